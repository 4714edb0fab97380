"""The counterexample of an invalid partition: the smallest window of ops that cannot be linearized.

A *window* [q, T] of a partition (docs/checkers-linearizable.md, "Counterexample windows") is
the history of

- the ops invoked between q and T (those that return after T are indeterminate in it),
- and the ops invoked before q that may still take effect after it (indeterminate ops, and
  ops that return after q), as indeterminate ops invoked at q;

started in any state an op invoked before q could have produced, or the initial state
(`refute.possible_states`; with q = None, the history's start, in the initial state only).
If a linearization of the whole partition exists, one of every window exists: the ops of
the linearization that come after the last op to return before q, up to the first op
invoked after T, are one. So a window without a linearization proves the partition invalid.

`find_window(plan)` finds one for a failed `Plan`: for rule 6, the window from the
invocation of the overwriting op (or of the failing op) to the failing op's return; for a
failed search, the window ends at the search's `horizon` (no dead end of the search looked
past it, so the prefix up to it fails) and its start moves as late as a window check (a
relaxed search of the window, from each of its states) still refutes it: galloping back
from the end, then bisecting. Window checks share a budget of moves; when it runs out the
window found so far is kept (at worst the prefix).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from checkers.linearizable.modelkit import Spec
from checkers.linearizable.plan import Plan, real_order
from checkers.linearizable.refute import possible_states
from checkers.linearizable.search import Search

WINDOW_BUDGET = 400_000  # moves for all window checks of one partition


@dataclass
class Window:
    """A window of a partition that has no linearization (positions index the partition's ops)."""

    start: float | None  # q; None: the history's start, in the initial state
    end: float  # T
    ops: list[int]  # invoked in [q, T]
    carried: list[int]  # invoked before q, may take effect in it
    states: list[Any]  # the states it may start in
    op: int | None  # the op that cannot be linearized (rule 6), or the first op left out
    reason: str  # "rule 6" or the search that refuted it
    linearization: list[tuple[int, Any]] = field(default_factory=list)  # longest partial (position, state after)
    failed_in: Any = None  # the state after it
    needed: Any = None  # rule 6: the state `op` needs, that no op can make in time
    by: int | None = None  # rule 6: the op that left another state after every op that made it


@dataclass
class _Check:
    refuted: bool
    window: Window | None = None
    moves: int = 0


class _Finder:
    def __init__(self, plan: Plan, budget: int):
        self.p = plan
        self.budget = budget
        self.order = range(plan.n)  # a plan's ops are in call order

    def check(self, q: float | None, end: float) -> _Check:
        """Refute window [q, end]: one relaxed search, starting in each of its first states in turn."""
        p = self.p
        idx: list[int] = []
        carried: list[int] = []
        st: list[float] = []
        en: list[float | None] = []
        for i in self.order:
            s, e = p.starts[i], p.ends[i]
            if s > end:
                break
            if q is not None and s < q:
                if (e is not None and e < q) or p.ro[i]:
                    continue
                carried.append(i)
                s, e = q, None
            elif e is not None and e > end:
                if p.ro[i]:
                    continue
                e = None
            elif e is None and p.ro[i]:
                continue
            idx.append(i)
            st.append(s)
            en.append(e)
        produces = p.hooks.produces
        assert q is None or produces is not None
        states = [p.spec.init] if q is None or produces is None else \
            possible_states(p.calls, p.starts, q, p.spec.init, produces)
        cset = set(carried)
        w = Window(q, end, [i for i in idx if i not in cset], carried, states, None, p.stage)
        spec = Spec(states[0], p.spec.step, p.spec.target, p.spec.resets, p.spec.stuck, p.spec.blocking,
                    p.spec.needs)
        s = Search([p.calls[i] for i in idx], st, en, [p.ro[i] for i in idx], spec,
                   None if p.groups is None else [p.groups[i] for i in idx], relaxed=True, also_from=states[1:])
        r = s.run(max(1, self.budget))
        if r is not False or s.rejected:
            return _Check(False, None, s.steps)
        _describe(w, s, s.best, idx)
        return _Check(True, w, s.steps)

    def run_check(self, q: float | None, end: float) -> _Check | None:
        if self.budget <= 0:
            return None
        c = self.check(q, end)
        self.budget -= c.moves
        return c


def refutes(plan: Plan, q: float | None, end: float, budget: int = WINDOW_BUDGET) -> bool:
    """Does a window check refute window [q, end] of `plan` (q None: from the start)?"""
    return _Finder(plan, budget).check(q, end).refuted


def _describe(w: Window, s: Search, best: list[int], pos: list[int]) -> None:
    """Fill `w`'s longest partial linearization (ops of `s`, at positions `pos` of the
    partition) and the first op left out of it."""
    frames = s.frames(best)
    ops = real_order(s, best)
    lin = []
    for j, (op, sid) in enumerate(frames):
        after = frames[j + 1][1] if j + 1 < len(frames) else s.after(op, sid)
        lin.append((pos[ops[j]], s.states[after]))
    w.linearization = lin
    w.failed_in = lin[-1][1] if lin else s.states[0]
    done = set(ops)
    left = [op for op in range(s.n) if op not in done and s.ret_entry[op] >= 0]
    if w.op is None and left:
        w.op = pos[min(left, key=lambda op: s.ret_entry[op])]


def find_window(plan: Plan, budget: int = WINDOW_BUDGET) -> Window:
    """The smallest window found that refutes the failed `plan` (see the module docstring)."""
    f = _Finder(plan, budget)
    ref = plan.refuted
    if ref is not None:
        x = ref.op
        q = plan.starts[ref.by] if ref.by is not None else plan.starts[x]
        end = plan.ends[x]
        assert end is not None
        c = f.run_check(q, end)
        w = c.window if c is not None and c.window is not None else _prefix(plan, end, x, "rule 6")
        w.op, w.reason, w.needed, w.by = x, "rule 6", ref.state, ref.by
        return w
    s = plan.failed
    assert s is not None
    end = _entry_time(s, plan)
    if plan.hooks.produces is None:  # no way to tell the states a later window may start in
        return _prefix(plan, end, None, plan.stage)
    starts = sorted({plan.starts[i] for i in range(plan.n) if plan.starts[i] <= end}, reverse=True)
    found: Window | None = None
    lo, hi, k = -1, len(starts), 0  # starts[lo] not refuted; starts[hi] refuted (len: the prefix)
    while k < len(starts):
        c = f.run_check(starts[k], end)
        if c is None:
            break
        if c.refuted:
            found, hi = c.window, k
            break
        lo, k = k, 2 * k + 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        c = f.run_check(starts[mid], end)
        if c is None:
            break
        if c.refuted:
            found, hi = c.window, mid
        else:
            lo = mid
    if found is not None:
        return found
    return _prefix(plan, end, None, plan.stage)


def _entry_time(s: Search, plan: Plan) -> float:
    """The time of the failed search's horizon (a return entry)."""
    op = s.op_of[s.horizon]
    e = s.ends[op]
    assert e is not None
    return e


def _prefix(plan: Plan, end: float, op: int | None, reason: str) -> Window:
    """The window from the history's start (the failed search proves it has no linearization)."""
    ops = [i for i in range(plan.n) if plan.starts[i] <= end]
    w = Window(None, end, ops, [], [plan.spec.init], op, reason)
    s = plan.failed
    if s is not None:
        _describe(w, s, s.best, list(range(plan.n)))
    return w
