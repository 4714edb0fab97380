"""Rule 6, *overwritten values*: a refutation found without searching, for models whose ops
name the states they need and make (registers: `Model.needs`, `produces`, `leaves`).

An op X that needs state t (a read of t, a cas t->b that took effect) cannot be linearized
when every op that could bring the register to t before X is followed, in real time, by
a determinate op Y that leaves another state and returns before X is invoked:

- the producers of t that may precede X are the ops (determinate or not) whose step can
  change the state to t (`produces`) and that were invoked no later than X returned; the
  initial state counts as a producer that returned at -infinity when it is t;
- an indeterminate producer can take effect at any point after its invocation, so one
  invoked before X returned defeats the rule;
- every other producer P must have returned before some determinate Y (`leaves(Y)` != t)
  was invoked, with Y returning before X is invoked: P < Y < X in every linearization.

Why that is sound (docs/checkers-linearizable.md, "Rule 6"): in a linearization, let P be
the last op before X that changed the state; it changed it to t (X needs t), so it is a
producer, or no op changed it and P is the initial state. Y comes after P and before X and
leaves a state other than t: either Y changed the state (P was not the last to) or the
state before Y, which is the state after P, was not t. Both contradict.

`overwritten(...)` returns the refuted op that returns first, with its Y (None when no op
could ever have produced t), in O(n log n).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

INF = float("inf")


@dataclass(frozen=True)
class Overwritten:
    """Op `op` needs `state`; `by` (an op, or None: nothing ever produced it) left another
    state after every op that could have produced it, and before `op` was invoked."""

    op: int
    state: Hashable
    by: int | None


def overwritten(calls: Sequence[Any], starts: Sequence[float], ends: Sequence[float | None], init: Hashable,
                needs: Callable[[Any], Hashable | None], produces: Callable[[Any], Hashable | None],
                leaves: Callable[[Any], Hashable | None]) -> Overwritten | None:
    """The first (by return) op refuted by rule 6, or None. `ends[i]` None: indeterminate."""
    n = len(calls)
    prod: dict[Hashable, list[tuple[float, float]]] = {}  # state -> (call, return or inf) of its producers
    for i in range(n):
        t = produces(calls[i])
        if t is not None:
            e = ends[i]
            prod.setdefault(t, []).append((starts[i], INF if e is None else e))
    pcalls: dict[Hashable, list[float]] = {}
    pmax: dict[Hashable, list[float]] = {}  # prefix maxima of the producers' returns, in call order
    for t, lst in prod.items():
        lst.sort()
        pcalls[t] = [c for c, _ in lst]
        acc, m = [], -INF
        for _, r in lst:
            m = max(m, r)
            acc.append(m)
        pmax[t] = acc
    ys = []
    for i in range(n):
        if ends[i] is not None:
            v = leaves(calls[i])
            if v is not None:
                ys.append((ends[i], starts[i], v, i))
    ys.sort(key=lambda y: (y[0], y[1], y[3]))
    xs = sorted((starts[i], i) for i in range(n) if ends[i] is not None and needs(calls[i]) is not None
                and produces(calls[i]) != needs(calls[i]))
    best: Overwritten | None = None
    best_ret = INF
    top: list[tuple[float, Hashable, int]] = []  # the latest-invoked Y per left state, two at most
    k = 0
    for start, x in xs:
        while k < len(ys) and ys[k][0] < start:
            _, yc, v, y = ys[k]
            top = _keep_two(top, (yc, v, y))
            k += 1
        end = ends[x]
        assert end is not None
        if end >= best_ret:
            continue
        t = needs(calls[x])
        j = bisect_right(pcalls.get(t, []), end)
        last = pmax[t][j - 1] if j else -INF  # the latest return of a producer that may precede x
        if j == 0 and t != init:
            best, best_ret = Overwritten(x, t, None), end
            continue
        y = next(((yc, yi) for yc, v, yi in top if v != t), None)
        if y is not None and last < y[0]:
            best, best_ret = Overwritten(x, t, y[1]), end
    return best


def _keep_two(top: list[tuple[float, Hashable, int]], y: tuple[float, Hashable, int]) -> list[tuple[float, Hashable, int]]:
    """The two latest-invoked Ys that leave different states (latest first), `y` added."""
    if not top:
        return [y]
    a = top[0]
    if y[1] == a[1]:
        if y[0] > a[0]:
            top[0] = y
        return top
    if y[0] > a[0]:
        return [y, a]
    if len(top) == 1 or y[0] > top[1][0]:
        return [a, y]
    return top


def possible_states(calls: Sequence[Any], starts: Sequence[float], q: float, init: Hashable,
                    produces: Callable[[Any], Hashable | None]) -> list[Hashable]:
    """Every state the object can be in at time `q`: the initial state, or one an op invoked
    before `q` can produce (the first state of a window, docs/checkers-linearizable.md)."""
    out = [init]
    seen = {init}
    for i, c in enumerate(calls):
        if starts[i] < q:
            t = produces(c)
            if t is not None and t not in seen:
                seen.add(t)
                out.append(t)
    return out
