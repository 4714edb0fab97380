"""The `log` model: one Kafka topic-partition per key (see `modelkit` for what a model is).

The state is the sequence of values written; a value's offset is its position.
"""

from __future__ import annotations

from typing import Any

from checkers.linearizable.modelkit import UNSEEN, Call, Model, Prepared, State, _key, _pair, _scalar, _show

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
