"""What a sequential specification of the linearizability checker is, and its shared parts.

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

The models themselves: `models.py` (registers, kv, the registry) and `logmodel.py`.
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


@dataclass(frozen=True)
class Spec:
    """What the search (search.py) needs of a model: its initial state, its step and the pruning
    hooks (`Model` above names each), the initial state already made."""

    init: State
    step: Callable[[State, Any], State | None]
    target: Callable[[Any], State | None] = lambda call: None
    resets: Callable[[Any], bool] = lambda call: True
    stuck: Callable[[State, Any], bool] = lambda state, call: True
    blocking: Callable[[Any], bool] = lambda call: False
    needs: Callable[[Any], State | None] | None = None
