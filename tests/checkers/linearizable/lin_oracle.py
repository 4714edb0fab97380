"""Test helpers: a brute-force linearizability oracle and random history generators.

The oracle shares nothing with `checkers.linearizable`: its own pairing, its own
sequential semantics on the raw JSON values, and an exhaustive search over every order
of the ops that respects real time (an op whose completion precedes another's invocation
comes first; indeterminate ops may take effect at any point after their invocation, or
never). Only for small histories.
"""

from __future__ import annotations

import math
from functools import cache
from typing import Any

INF = math.inf


# --------------------------------------------------------------------------- semantics


def _freeze(d: dict) -> tuple:
    return tuple(sorted(d.items(), key=lambda kv: repr(kv[0])))


def _reg_key(f: str, inv: Any) -> tuple[Any, Any, bool]:
    """(key, bare invoke value, keyed?) of a register op."""
    if f == "cas":
        if isinstance(inv, list) and len(inv) == 2 and isinstance(inv[1], list):
            return inv[0], inv[1], True
        return None, inv, False
    if isinstance(inv, list):
        return inv[0], inv[1], True
    return None, inv, False


def semantics(model: str, op: dict) -> Any:
    """A function state(dict key -> value) -> list of next states ([] illegal), or None to drop the op."""
    f, t, inv, out = op["f"], op["type"], op["inv"], op["out"]
    if model in ("register", "cas-register"):
        key, v, keyed = _reg_key(f, inv)
        if keyed and t == "ok":
            out = out[1]
        if f == "read":
            if t != "ok":
                return None
            return lambda s: [s] if s.get(key) == out else []
        if f == "write":
            if t == "fail":
                return None
            return lambda s: [{**s, key: v}]
        if f == "cas":
            a, b = v
            if t == "ok":
                return lambda s: [{**s, key: b}] if s.get(key) == a else []
            if t == "info":
                return lambda s: [{**s, key: b}] if s.get(key) == a else [s]
            if op.get("error") is not None:
                return None
            return lambda s: [s] if s.get(key) != a else []
    if model == "kv":
        key, v = inv
        if f == "get":
            if t != "ok":
                return None
            want = out[1] or ""
            return lambda s: [s] if s.get(key, "") == want else []
        if t == "fail":
            return None
        if f == "put":
            return lambda s: [{**s, key: v}]
        if f == "append":
            return lambda s: [{**s, key: s.get(key, "") + v}]
    if model == "log":
        keyed = isinstance(inv, list)
        key, iv = (inv[0], inv[1]) if keyed else (None, inv)
        o2 = out[1] if keyed and t == "ok" else out
        if f == "send":
            if t == "fail":
                return None
            if t == "info":
                return lambda s: [{**s, key: s.get(key, ()) + (iv,)}]
            off, val = o2
            return lambda s: [{**s, key: s.get(key, ()) + (val,)}] if len(s.get(key, ())) == off else []
        if f == "read":
            if t != "ok":
                return None
            off, val = o2

            def read(s: dict) -> list:
                log = s.get(key, ())
                if val is None:
                    return [s] if off >= len(log) else []
                return [s] if off < len(log) and log[off] == val else []
            return read
    raise ValueError(f"oracle: no semantics for {model} {f} {t}")


def pair(events: list[dict]) -> list[dict]:
    """Ops with call/ret times (ret INF for indeterminate), type, invoke/completion values."""
    open_: dict[Any, dict] = {}
    ops = []
    for ev in events:
        p = ev["process"]
        if p == "nemesis":
            continue
        if ev["type"] == "invoke":
            open_[p] = ev
            continue
        inv = open_.pop(p)
        ops.append({"f": inv["f"], "type": ev["type"], "inv": inv["value"], "out": ev.get("value"),
                    "error": ev.get("error"), "call": inv["time"],
                    "ret": INF if ev["type"] == "info" else ev["time"]})
    for inv in open_.values():
        ops.append({"f": inv["f"], "type": "info", "inv": inv["value"], "out": None, "error": None,
                    "call": inv["time"], "ret": INF})
    return ops


def linearizable(events: list[dict], model: str) -> bool:
    """Brute force: is there an order of the ops that respects real time and the semantics?"""
    ops = []
    for op in pair(events):
        sem = semantics(model, op)
        if sem is None:
            continue
        if op["type"] == "info" and op["f"] in ("read", "get"):
            continue
        ops.append((op["call"], op["ret"], sem))
    n = len(ops)
    assert n <= 12, "the oracle is for small histories"
    must = frozenset(i for i in range(n) if ops[i][1] != INF)

    @cache
    def go(remaining: frozenset, state: tuple) -> bool:
        if not (remaining & must):
            return True
        s = dict(state)
        first_ret = min(ops[i][1] for i in remaining)
        for i in remaining:
            if ops[i][0] > first_ret:
                continue  # some remaining op returned before this one was invoked
            for ns in ops[i][2](s):
                if go(remaining - {i}, _freeze(ns)):
                    return True
        return False

    return go(frozenset(range(n)), ())


# --------------------------------------------------------------------------- generators


def simulate(model: str, script: list[int], procs: int = 3, keys: int = 1) -> list[dict]:
    """A history of a *correct* object, driven by `script` (a list of small ints = choices).

    Processes invoke ops; each op takes effect atomically at some moment before it
    completes (or, if it crashes, maybe never); completions report what the object
    did. Crashed processes come back with a new process id.
    """
    it = iter(script)

    def pick(n: int) -> int:
        return next(it, 0) % n

    state: dict = {}
    events: list[dict] = []
    t = 0
    pids = list(range(procs))
    next_pid = procs
    pending: dict[int, dict] = {}  # pid -> {"f", "value", "done": result or None}
    values = iter(range(100, 10**6))
    key_names = [f"k{i}" for i in range(keys)]

    def emit(ev: dict) -> None:
        nonlocal t
        t += 1
        ev["time"] = t
        ev["index"] = len(events)
        events.append(ev)

    def gen_op() -> tuple[str, Any]:
        k = key_names[pick(keys)]
        kk = k if keys > 1 else None
        r = pick(3)
        if model in ("register", "cas-register"):
            fs = ["read", "write", "cas"] if model == "cas-register" else ["read", "write"]
            f = fs[r % len(fs)]
            if f == "read":
                return f, [kk, None] if kk else None
            if f == "write":
                v = pick(3)
                return f, [kk, v] if kk else v
            a, b = pick(3), pick(3)
            return f, [kk, [a, b]] if kk else [a, b]
        if model == "kv":
            f = ["get", "put", "append"][r]
            return f, [k, None if f == "get" else "xyz"[pick(3)]]
        if model == "log":
            if r == 0:
                return "read", [k, pick(4)] if kk else pick(4)
            v = next(values)
            return "send", [k, v] if kk else v
        raise ValueError(model)

    def effect(f: str, value: Any) -> tuple[str, Any]:
        """Apply an op to the real state: (completion type, completion value)."""
        if model in ("register", "cas-register"):
            key, v, keyed = _reg_key(f, value)
            wrap = (lambda x: [key, x]) if keyed else (lambda x: x)
            if f == "read":
                return "ok", wrap(state.get(key))
            if f == "write":
                state[key] = v
                return "ok", wrap(v)
            a, b = v
            if state.get(key) == a:
                state[key] = b
                return "ok", wrap([a, b])
            return "fail", wrap([a, b])
        if model == "kv":
            k, v = value
            if f == "get":
                return "ok", [k, state.get(k, "")]
            state[k] = v if f == "put" else state.get(k, "") + v
            return "ok", [k, v]
        if model == "log":
            keyed = isinstance(value, list)
            k, v = (value[0], value[1]) if keyed else (None, value)
            wrap = (lambda x: [k, x]) if keyed else (lambda x: x)
            log = state.setdefault(k, [])
            if f == "send":
                log.append(v)
                return "ok", wrap([len(log) - 1, v])
            return "ok", wrap([v, log[v] if v < len(log) else None])
        raise ValueError(model)

    for _ in range(len(script)):
        action = pick(4)
        idle = [p for p in pids if p not in pending]
        if action == 0 and idle:
            p = idle[pick(len(idle))]
            f, value = gen_op()
            pending[p] = {"f": f, "value": value, "done": None}
            emit({"process": p, "type": "invoke", "f": f, "value": value})
        elif action == 1 and pending:  # an op takes effect now
            ready = [p for p, o in pending.items() if o["done"] is None]
            if ready:
                p = ready[pick(len(ready))]
                pending[p]["done"] = effect(pending[p]["f"], pending[p]["value"])
        elif action == 2 and pending:  # an op that took effect completes
            done = [p for p, o in pending.items() if o["done"] is not None]
            if done:
                p = done[pick(len(done))]
                o = pending.pop(p)
                emit({"process": p, "type": o["done"][0], "f": o["f"], "value": o["done"][1]})
        elif action == 3 and pending:  # a crash: maybe it took effect, maybe not
            p = list(pending)[pick(len(pending))]
            o = pending.pop(p)
            emit({"process": p, "type": "info", "f": o["f"], "value": o["value"], "error": "crash"})
            pids.remove(p)
            pids.append(next_pid)
            next_pid += 1
    # complete what took effect; the rest stays open (never completed = indeterminate)
    for p, o in list(pending.items()):
        if o["done"] is not None:
            emit({"process": p, "type": o["done"][0], "f": o["f"], "value": o["done"][1]})
    return events


def mutate(events: list[dict], choice: int, alt: int) -> list[dict]:
    """A copy of `events` with one completion value changed, or two events' order swapped."""
    evs = [dict(e) for e in events]
    comps = [i for i, e in enumerate(evs) if e["type"] in ("ok", "fail") and e["process"] != "nemesis"]
    if not comps:
        return evs
    i = comps[choice % len(comps)]
    e = evs[i]
    if alt % 3 == 2 and i + 1 < len(evs):  # swap the order (times) of two neighbours
        evs[i]["time"], evs[i + 1]["time"] = evs[i + 1]["time"], evs[i]["time"]
        evs[i], evs[i + 1] = evs[i + 1], evs[i]
        if not _well_formed(evs):
            return [dict(x) for x in events]
        for j, x in enumerate(evs):
            x["index"] = j
        return evs
    v = e["value"]
    keyed = isinstance(v, list) and len(v) == 2 and isinstance(v[0], str)
    inner = v[1] if keyed else v
    if e["f"] == "send":  # a send's result must carry the sent value: change the offset
        inner = [_tweak(inner[0], alt), inner[1]]
    elif e["f"] == "read" and isinstance(inner, list):  # a log read names its offset: change the value
        inner = [inner[0], _tweak(inner[1], alt)]
    else:
        inner = _tweak(inner, alt)
    e["value"] = [v[0], inner] if keyed else inner  # keyed: keep the key
    if e["type"] == "fail" and alt % 2:
        e["type"] = "ok"
    return evs


def _tweak(v: Any, alt: int) -> Any:
    if isinstance(v, bool) or v is None:
        return alt % 3
    if isinstance(v, int):
        return v + 1 + alt % 2 if alt % 4 else max(0, v - 1)
    if isinstance(v, str):
        return v + "xyz"[alt % 3] if alt % 2 else v[:-1]
    if isinstance(v, list) and v:
        j = alt % len(v)
        return v[:j] + [_tweak(v[j], alt // 2 + 1)] + v[j + 1:]
    return v


def _well_formed(evs: list[dict]) -> bool:
    open_: set = set()
    for e in evs:
        if e["type"] == "invoke":
            if e["process"] in open_:
                return False
            open_.add(e["process"])
        elif e["process"] in open_:
            open_.discard(e["process"])
        else:
            return False
    return True


def random_history(model: str, ops: list[tuple[int, int, int, int, int]]) -> list[dict]:
    """Arbitrary (mostly not linearizable) histories: one process per op, given intervals.

    Each tuple is (start, length, kind, a, b); length 0 makes the op indeterminate.
    """
    events = []
    for pid, (start, length, kind, a, b) in enumerate(ops):
        if model in ("register", "cas-register"):
            f = ["read", "write", "cas"][kind % (3 if model == "cas-register" else 2)]
            inv = None if f == "read" else a % 3 if f == "write" else [a % 3, b % 3]
            out = a % 3 if f == "read" else inv
            typ = "ok" if f != "cas" or b % 4 else "fail"
        elif model == "kv":
            f = ["get", "put", "append"][kind % 3]
            inv = ["k", None if f == "get" else "xy"[a % 2]]
            out = ["k", ["", "x", "y", "xy", "yx"][b % 5]] if f == "get" else inv
            typ = "ok"
        else:
            f = ["send", "read"][kind % 2]
            inv = 10 + pid if f == "send" else a % 3
            out = [a % 3, 10 + pid] if f == "send" else [a % 3, None if b % 3 == 0 else 10 + b % len(ops)]
            typ = "ok"
        events.append((2 * start, {"process": pid, "type": "invoke", "f": f, "value": inv}))
        if length:
            events.append((2 * (start + length) + 1, {"process": pid, "type": typ, "f": f, "value": out}))
        elif kind % 2:
            events.append((2 * start + 1, {"process": pid, "type": "info", "f": f, "value": inv}))
    events.sort(key=lambda x: x[0])
    out_evs = []
    for i, (t, e) in enumerate(events):
        e["time"] = t
        e["index"] = i
        out_evs.append(e)
    return out_evs
