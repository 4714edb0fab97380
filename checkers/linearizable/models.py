"""The sequential specifications of the linearizability checker: registers, kv, the registry.

What a model is: `checkers.linearizable.modelkit` (`Model`). The `log` model lives in
`logmodel.py`. `MODELS` maps names to models; `composite` is the product of one model per
key, for checking without partitioning.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from checkers.linearizable.logmodel import EMPTY_LOG, LOG, LogState
from checkers.linearizable.modelkit import (
    NIL,
    UNSEEN,
    Call,
    Model,
    Prepared,
    State,
    _key,
    _pair,
    _show,
    _value,
)

__all__ = ["CAS_REGISTER", "EMPTY_LOG", "KV", "LOG", "MODELS", "NIL", "REGISTER", "UNSEEN", "LogState", "Model",
           "Prepared", "State", "composite", "get_model"]


# --------------------------------------------------------------------------- registers
#
# Calls: ("r", v) read observed v; ("w", v) write; ("w?", v) indeterminate write;
# ("c", old, new) cas that took effect; ("c?", old, new) indeterminate cas;
# ("cf", old) failed cas = the value was not `old` at some point within the op.
# The register starts as nil (`NIL`); an ok read of null observes that initial value.


def _register_step(state: State, call: Call) -> State | None:
    k = call[0]
    if k == "r":
        return state if state == call[1] else None
    if k == "w" or k == "w?":
        return call[1]
    if k == "c":
        return call[2] if state == call[1] else None
    if k == "c?":
        return call[2] if state == call[1] else state
    if k == "cf":
        return state if state != call[1] else None
    raise ValueError(f"unknown register call {call!r}")


def _split_register(op: Any, cas: bool) -> tuple[Hashable, Any, Any, bool]:
    """(key, invoke value, completion value, keyed) of a register op, keyed form [key, v] or bare."""
    f = op.f
    inv = op.invoke.get("value")
    out = op.complete.get("value") if op.complete is not None else None
    keyed = False
    if f in ("read", "write"):
        keyed = isinstance(inv, list)
    elif f == "cas" and cas:
        keyed = isinstance(inv, list) and len(inv) == 2 and isinstance(inv[1], list)
    if not keyed:
        return None, inv, out, False
    k, iv = _pair(inv, f"{f} value")
    ov = None
    if op.complete is not None and op.type == "ok":
        k2, ov = _pair(out, f"{f} result")
        if k2 != k:
            raise ValueError(f"{f} result key {k2!r} differs from the invoked key {k!r}")
    return _key(k), iv, ov, True


_SLOW = object()


def _plain(v: Any) -> Any:
    """A register value of the common kinds (an int or a string, or null: `NIL`), else `_SLOW`."""
    c = v.__class__
    return v if c is int or c is str else NIL if v is None else _SLOW


def _fast_register(op: Any, cas: bool) -> Any:
    """`_prepare_register` for a keyed op whose key and values are of the common kinds, or
    `_SLOW` (then the full path parses it, and names what is wrong)."""
    inv = op.invoke.get("value")
    if inv.__class__ is not list or len(inv) != 2:
        return _SLOW
    k = inv[0]
    if k.__class__ is not str and k.__class__ is not int:
        return _SLOW
    f, t, done = op.f, op.type, op.complete
    if t == "ok":
        out = done["value"]
        if out.__class__ is not list or len(out) != 2 or out[0] != k:
            return _SLOW
    if f == "read":
        if t != "ok":
            return None
        v = _plain(out[1])
        return _SLOW if v is _SLOW else (k, ("r", v), True)
    if f == "write":
        v = _plain(inv[1])
        return _SLOW if v is _SLOW else None if t == "fail" else (k, ("w", v) if t == "ok" else ("w?", v), False)
    ab = inv[1]
    if f != "cas" or not cas or ab.__class__ is not list or len(ab) != 2:
        return _SLOW
    a, b = _plain(ab[0]), _plain(ab[1])
    if a is _SLOW or b is _SLOW:
        return _SLOW
    if t == "ok":
        return (k, ("c", a, b), False)
    if t == "info":
        return (k, ("c?", a, b), False)
    return None if done is not None and done.get("error") is not None else (k, ("cf", a), True)


def _prepare_register(op: Any, cas: bool) -> Prepared | None:
    r = _fast_register(op, cas)
    if r is not _SLOW:
        return r
    f, t = op.f, op.type
    key, inv, out, _ = _split_register(op, cas)
    if f == "read":
        if t != "ok":
            return None  # a failed or indeterminate read constrains nothing
        return (key, ("r", _value(out, "read result")), True)
    if f == "write":
        if t == "fail":
            return None
        v = _value(inv, "write value")
        return (key, ("w", v) if t == "ok" else ("w?", v), False)
    if f == "cas" and cas:
        old, new = _pair(inv, "cas value")
        old, new = _value(old, "cas old value"), _value(new, "cas new value")
        if t == "ok":
            return (key, ("c", old, new), False)
        if t == "info":
            return (key, ("c?", old, new), False)
        if op.complete is not None and op.complete.get("error") is not None:
            return None  # did not happen, for a reason other than the compare: no observation
        return (key, ("cf", old), True)
    expected = "read, write or cas" if cas else "read or write"
    raise ValueError(f"unknown f {f!r} for this model (expected {expected})")


def _register_abstract(calls: list[Call]) -> list[Call]:
    """Written values that no read or compare observes become `UNSEEN`."""
    seen = set()
    for c in calls:
        if c[0] in ("r", "c", "c?", "cf"):
            seen.add(c[1])
    out = []
    for c in calls:
        k = c[0]
        if k in ("w", "w?") and c[1] not in seen:
            c = (k, UNSEEN)
        elif k in ("c", "c?") and c[2] not in seen:
            c = (k, c[1], UNSEEN)
        out.append(c)
    return out


def _register_target(call: Call) -> State | None:
    return call[1] if call[0] == "r" else None


def _register_needs(call: Call) -> State | None:
    return call[1] if call[0] == "r" or call[0] == "c" else None


def _register_produces(call: Call) -> State | None:
    k = call[0]
    return call[1] if k == "w" or k == "w?" else call[2] if k == "c" or k == "c?" else None


def _register_leaves(call: Call) -> State | None:
    k = call[0]
    return call[1] if k == "w" else call[2] if k == "c" else None


_REGISTER_HOOKS: dict[str, Any] = {"target": _register_target, "abstract": _register_abstract,
                                   "needs": _register_needs, "produces": _register_produces,
                                   "leaves": _register_leaves}


def _describe_register(call: Call) -> str:
    k = call[0]
    if k == "r":
        return f"read {_show(call[1])}"
    if k in ("w", "w?"):
        return f"write {_show(call[1])}" + (" (indeterminate)" if k == "w?" else "")
    if k in ("c", "c?"):
        return f"cas {_show(call[1])}->{_show(call[2])}" + (" (indeterminate)" if k == "c?" else "")
    if k == "cf":
        return f"cas {_show(call[1])}->? failed (value was not {_show(call[1])})"
    return repr(call)


REGISTER = Model(
    name="register",
    init=lambda: NIL,
    step=_register_step,
    prepare=lambda op: _prepare_register(op, cas=False),
    describe_call=_describe_register,
    describe_state=_show,
    **_REGISTER_HOOKS,
    doc="a read/write register starting at nil; ops read, write (value v or [key, v])",
)

CAS_REGISTER = Model(
    name="cas-register",
    init=lambda: NIL,
    step=_register_step,
    prepare=lambda op: _prepare_register(op, cas=True),
    describe_call=_describe_register,
    describe_state=_show,
    **_REGISTER_HOOKS,
    doc="a register with compare-and-set starting at nil; ops read, write, cas [old, new] "
        "(keyed: [key, v] and [key, [old, new]]); a failed cas observed value != old",
)


# --------------------------------------------------------------------------- kv
#
# Per key a string starting as "": ("get", v) observed v; ("put", v); ("append", s);
# indeterminate ("put?", v), ("append?", s).


def _kv_step(state: State, call: Call) -> State | None:
    k = call[0]
    if k == "get":
        return state if state == call[1] else None
    if k == "put" or k == "put?":
        return call[1]
    if k == "append" or k == "append?":
        return state + call[1]
    raise ValueError(f"unknown kv call {call!r}")


def _string(v: Any, what: str) -> str:
    if v is None:
        return ""
    if not isinstance(v, str):
        raise ValueError(f"{what} {v!r} is not a string")
    return v


def _prepare_kv(op: Any) -> Prepared | None:
    f, t = op.f, op.type
    if f not in ("get", "put", "append"):
        raise ValueError(f"unknown f {f!r} for model kv (expected get, put or append)")
    k, iv = _pair(op.invoke.get("value"), f"{f} value")
    k = _key(k)
    if f == "get":
        if t != "ok":
            return None
        k2, ov = _pair(op.complete.get("value"), "get result")
        if k2 != k:
            raise ValueError(f"get result key {k2!r} differs from the invoked key {k!r}")
        return (k, ("get", _string(ov, "get result")), True)
    if t == "fail":
        return None
    return (k, (f if t == "ok" else f + "?", _string(iv, f"{f} value")), False)


def _describe_kv(call: Call) -> str:
    k = call[0]
    return f"{k.rstrip('?')} {call[1]!r}" + (" (indeterminate)" if k.endswith("?") else "")


KV = Model(
    name="kv",
    init=lambda: "",
    step=_kv_step,
    prepare=_prepare_kv,
    describe_call=_describe_kv,
    describe_state=repr,
    target=lambda call: call[1] if call[0] == "get" else None,
    resets=lambda call: call[0] in ("put", "put?"),
    stuck=lambda state, call: not call[1].startswith(state),  # appends only extend
    doc="independent string keys starting as \"\"; ops get, put, append with value [key, v]",
)


MODELS: dict[str, Model] = {m.name: m for m in (REGISTER, CAS_REGISTER, KV, LOG)}


def get_model(model: str | Model) -> Model:
    """The model named `model` (or `model` itself); `ValueError` names the known ones."""
    if isinstance(model, Model):
        return model
    m = MODELS.get(model)
    if m is None:
        raise ValueError(f"unknown model {model!r} (known: {', '.join(sorted(MODELS))})")
    return m


# --------------------------------------------------------------------------- no partition


def composite(model: Model, keys: list[Hashable]) -> Model:
    """The product of one `model` object per key, for calls ``(key_index, call)``.

    Used when partitioning is switched off: the state is the tuple of every key's state.
    """
    base_init, base_step, base_stuck = model.init, model.step, model.stuck
    n = len(keys)

    def init() -> State:
        return tuple(base_init() for _ in range(n))

    def step(state: State, call: Call) -> State | None:
        i, sub = call
        s = base_step(state[i], sub)
        if s is None:
            return None
        if s == state[i]:
            return state
        return state[:i] + (s,) + state[i + 1:]

    return Model(
        name=model.name, init=init, step=step, prepare=model.prepare,
        describe_call=lambda c: model.describe_call(c[1]),
        describe_state=lambda st: "{" + ", ".join(f"{k!r}: {model.describe_state(v)}" for k, v in
                                                 zip(keys, st, strict=True)) + "}",
        resets=lambda c: model.resets(c[1]),
        stuck=lambda st, c: base_stuck(st[c[0]], c[1]),
        blocking=lambda c: model.blocking(c[1]),
        partition=False, doc=model.doc)
