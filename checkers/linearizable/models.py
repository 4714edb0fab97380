"""Sequential specifications for the linearizability checker.

A `Model` is a small record of pure functions (Porcupine's shape):

- ``prepare(op) -> Prepared | None`` turns one paired history op (`contracts.history.Op`)
  into the model's encoding: a partition ``key`` (``None`` for unkeyed forms), a hashable
  ``call`` tuple that carries the op's input *and* observed output, and whether the call
  is ``readonly`` (it never changes any state). It returns ``None`` for an op that
  constrains nothing (a failed write, a read that timed out) and raises ``ValueError``
  for a value it cannot parse.
- ``init() -> state`` and ``step(state, call) -> state | None`` (``None``: illegal, so a
  state is never ``None``: registers use `NIL`). States are immutable, hashable Python values, so Python's ``==``/``hash`` are the model's
  equal/hash; the checker interns them and caches every ``step`` per (op, state).
- ``partition``: P-compositionality. Ops with different keys touch independent objects
  (Herlihy & Wing's locality), so each key's sub-history is checked on its own with
  ``init``/``step``; ``--no-partition`` checks the whole history against the product
  state (one per key) instead (`composite_step`).
- ``describe_call(call)`` / ``describe_state(state)``: short strings for counterexamples.
- ``target(call)`` (optional): for a read-only call legal in exactly one state (a read that
  observed a value), that state, else None; it lets the checker test reads without steps.
- ``resets(call)`` / ``stuck(state, call)`` (optional, for pruning): a mutating call that
  does not reset may only "extend" the state; ``stuck(state, read)`` (asked for a read-only
  call illegal in ``state``) is True when no sequence of non-resetting calls can make it
  legal. The defaults (every mutating call resets; stuck) are right for any model.
  ``blocking(call)`` (optional) marks non-resetting mutating calls that can be stuck the same
  way (a send at an offset the log has already passed); the checker watches them too.
- ``needs(call)`` / ``produces(call)`` / ``leaves(call)`` (optional, all three or none; for
  rule 6 and counterexample windows): the one state a call is legal in (a read of v, a cas
  v->w that took effect; else None); the one state a call can change the state *to* (None:
  its step never changes the state); the state a determinate call always leaves (None: it
  depends). A changed state must equal ``produces(call)``.
- ``abstract(calls) -> calls`` (optional): rewrites one partition's calls into ones with
  the same verdict that the search handles faster; registers and logs replace every value
  that no op ever observes by `UNSEEN` (an exact abstraction: no read or compare can tell
  two unobserved values apart), so crashed writes of such values become interchangeable.

Indeterminate ops (``info``, or never completed) are prepared with an output-free call
(``"w?"``, ``"c?"``, ``"send?"``...) whose step is legal in every state; the checker
lets them take effect at any point after their invocation, or never.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any, NamedTuple

State = Hashable
Call = tuple


class Prepared(NamedTuple):
    """One op in a model's encoding (see the module docstring); `prepare` may return this
    or a plain ``(key, call, readonly)`` tuple (the built-in models do: it is cheaper)."""

    key: Hashable
    call: Call
    readonly: bool


@dataclass(frozen=True)
class Model:
    """A sequential specification: see the module docstring for the contract of each field."""

    name: str
    init: Callable[[], State]
    step: Callable[[State, Call], State | None]
    prepare: Callable[[Any], Prepared | tuple | None]
    describe_call: Callable[[Call], str]
    describe_state: Callable[[State], str]
    target: Callable[[Call], State | None] = lambda call: None
    resets: Callable[[Call], bool] = lambda call: True
    stuck: Callable[[State, Call], bool] = lambda state, call: True
    abstract: Callable[[list[Call]], list[Call]] | None = None
    blocking: Callable[[Call], bool] = lambda call: False
    needs: Callable[[Call], State | None] | None = None
    produces: Callable[[Call], State | None] | None = None
    leaves: Callable[[Call], State | None] | None = None
    partition: bool = True
    doc: str = ""


_SCALARS = (type(None), bool, int, float, str)


class _Nil:
    """The value of a register nobody wrote (JSON null in histories); a state, unlike None."""

    _inst: _Nil | None = None

    def __new__(cls) -> _Nil:
        if cls._inst is None:
            cls._inst = super().__new__(cls)
        return cls._inst

    def __repr__(self) -> str:
        return "nil"

    def __reduce__(self) -> tuple:
        return (_Nil, ())


NIL = _Nil()


class _Unseen:
    """Stands for any value that no op of the partition observes (see `Model.abstract`)."""

    def __repr__(self) -> str:
        return "<an unread value>"

    def __reduce__(self) -> tuple:
        return (_unseen, ())


def _unseen() -> _Unseen:
    return UNSEEN


UNSEEN = _Unseen()


def _value(v: Any, what: str) -> Any:
    """A register value: a scalar, JSON null read as `NIL`."""
    return NIL if v is None else _scalar(v, what)


def _scalar(v: Any, what: str) -> Any:
    if not isinstance(v, _SCALARS):
        raise ValueError(f"{what} {v!r} is not a scalar (null, boolean, number or string)")
    return v


def _key(k: Any) -> Hashable:
    if not isinstance(k, _SCALARS) or k is None:
        raise ValueError(f"key {k!r} is not a string or number")
    return k


def _pair(v: Any, what: str) -> tuple[Any, Any]:
    if not isinstance(v, list | tuple) or len(v) != 2:
        raise ValueError(f"{what} {v!r} is not a pair [a, b]")
    return v[0], v[1]


def _show(v: Any) -> str:
    if v is UNSEEN:
        return "?"
    return "nil" if v is None or v is NIL else repr(v) if isinstance(v, str) else str(v)


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


def _prepare_register(op: Any, cas: bool) -> Prepared | None:
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


# --------------------------------------------------------------------------- log
#
# One Kafka partition per key: the state is the sequence of values written so far, the
# offset of a value is its position. ("send", o, v): an acknowledged send wrote v at
# offset o; ("send?", v) indeterminate send; ("read", o, v): offset o held v, or with
# v None, offset o was not written yet.


class LogState:
    """An append-only log as a persistent list: the last value, its offset + 1, the rest.

    O(1) memory and time per send however long the log. Equality compares the last value
    and length and the *identity* of the rest: the checker interns states, so logs it
    builds share their prefixes and equal logs compare equal; logs built elsewhere may
    compare unequal though equal, which only costs the cache a duplicate.
    """

    __slots__ = ("prev", "value", "length", "_hash")

    def __init__(self, prev: LogState | None, value: Any, length: int):
        self.prev, self.value, self.length = prev, value, length
        self._hash = hash((id(prev), value, length))

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, LogState) and self.length == other.length and self.prev is other.prev
                and self.value == other.value)

    def __hash__(self) -> int:
        return self._hash

    def at(self, offset: int) -> Any:
        """The value at `offset` (< length)."""
        node: LogState | None = self
        while node is not None and node.length > offset + 1:
            node = node.prev
        return node.value if node is not None else None

    def values(self) -> list[Any]:
        out = []
        node: LogState | None = self
        while node is not None and node.length > 0:
            out.append(node.value)
            node = node.prev
        return out[::-1]

    def __repr__(self) -> str:
        return f"LogState({self.values()!r})"


EMPTY_LOG = LogState(None, None, 0)


def _log_step(state: State, call: Call) -> State | None:
    k = call[0]
    n = state.length
    if k == "send":
        return LogState(state, call[2], n + 1) if call[1] == n else None
    if k == "send?":
        return LogState(state, call[1], n + 1)
    if k == "read":
        o, v = call[1], call[2]
        if o < n:
            return state if v is not None and state.at(o) == v else None
        return state if v is None else None
    raise ValueError(f"unknown log call {call!r}")


def _offset(o: Any, what: str) -> int:
    if not isinstance(o, int) or isinstance(o, bool) or o < 0:
        raise ValueError(f"{what} {o!r} is not an offset (an integer >= 0)")
    return o


def _prepare_log(op: Any) -> Prepared | None:
    f, t = op.f, op.type
    if f not in ("send", "read"):
        raise ValueError(f"unknown f {f!r} for model log (expected send or read)")
    inv = op.invoke.get("value")
    keyed = isinstance(inv, list)
    key = None
    if keyed:
        key, inv = _pair(inv, f"{f} value")
        key = _key(key)
    out = None
    if t == "ok":
        out = op.complete.get("value")
        if keyed:
            k2, out = _pair(out, f"{f} result")
            if k2 != key:
                raise ValueError(f"{f} result key {k2!r} differs from the invoked key {key!r}")
    if f == "send":
        v = _scalar(inv, "send value")
        if v is None:
            raise ValueError("send value is null")
        if t == "fail":
            return None
        if t == "info":
            return (key, ("send?", v), False)
        o, v2 = _pair(out, "send result")
        if v2 != v:
            raise ValueError(f"send result value {v2!r} differs from the sent value {v!r}")
        return (key, ("send", _offset(o, "send result offset"), v), False)
    o = _offset(inv, "read offset")
    if t != "ok":
        return None
    o2, v = _pair(out, "read result")
    if o2 != o:
        raise ValueError(f"read result offset {o2!r} differs from the invoked offset {o!r}")
    return (key, ("read", o, _scalar(v, "read result value")), True)


def _describe_log(call: Call) -> str:
    k = call[0]
    if k == "send":
        return f"send {_show(call[2])} at {call[1]}"
    if k == "send?":
        return f"send {_show(call[1])} (indeterminate)"
    if k == "read":
        return f"read {call[1]}: " + ("nothing yet" if call[2] is None else _show(call[2]))
    return repr(call)


def _log_abstract(calls: list[Call]) -> list[Call]:
    """Sent values that no read observes become `UNSEEN`; an indeterminate send of a value
    that only it sends and that a read found at offset o can only have landed at o."""
    seen: dict[Any, int] = {}
    for c in calls:
        if c[0] == "read" and c[2] is not None:
            seen.setdefault(c[2], c[1])
    sent: dict[Any, int] = {}
    for c in calls:
        if c[0] == "send" or c[0] == "send?":
            v = c[2] if c[0] == "send" else c[1]
            sent[v] = sent.get(v, 0) + 1
    out = []
    for c in calls:
        if c[0] == "send" and c[2] not in seen:
            c = ("send", c[1], UNSEEN)
        elif c[0] == "send?":
            v = c[1]
            if v not in seen:
                c = ("send?", UNSEEN)
            elif sent[v] == 1:
                c = ("send", seen[v], v)
        out.append(c)
    return out


def _describe_log_state(state: State) -> str:
    vals = state.values()
    if len(vals) > 12:
        return "[" + " ".join(_show(v) for v in vals[:4]) + f" ... ({len(vals)} values) ... " + \
            " ".join(_show(v) for v in vals[-4:]) + "]"
    return "[" + " ".join(_show(v) for v in vals) + "]"


LOG = Model(
    name="log",
    init=lambda: EMPTY_LOG,
    step=_log_step,
    prepare=_prepare_log,
    describe_call=_describe_log,
    describe_state=_describe_log_state,
    resets=lambda call: False,  # sends only extend the log
    stuck=lambda state, call: call[1] < state.length,  # a written offset never changes; nor does the length
    blocking=lambda call: call[0] == "send",
    abstract=_log_abstract,
    doc="one Kafka partition per key: send v -> [offset, v]; read offset o -> [o, v] (v null: not written yet)",
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
