"""One partition decided in stages: rule 6, then the exact search, joined by the relaxed one.

`Plan(spec, calls, starts, ends, readonly, groups, hooks)` holds one partition's ops in
the model's encoding, sorted by call time (``ends[i]`` None: indeterminate). `run(budget)`
advances it by about `budget` moves and returns True/False once decided, None to go on:

1. *Rule 6* (`refute.overwritten`, models with ``needs``/``produces``/``leaves``): an op
   that needs a value every producer of which was overwritten before it began, or that no
   op ever produced. No search; O(n log n).
2. *The exact search* (`Search`, rules 1-4, moves directed at the state the op returning
   first needs) alone for its first `4 n + EXACT_ALONE` moves: a valid history is usually
   linearized by then.
3. Then slices rotate between it, the exact search in plain call order (move orders
   differ in luck; each is exact) and *the relaxed search* (rule 5, models with ``produces``:
   repeated indeterminate ops then reach finitely many states), in which a class of
   indeterminate ops (same call) can be used any number of times. It has no counts of
   linearized indeterminate ops in its configurations, so it stays small where the exact
   one explodes. Its failure proves the partition invalid (real linearizations are relaxed
   ones); a relaxed linearization that a real one matches (`Search._witness`) proves it
   valid; when it found only ones that used a class too often, the exact search goes on alone.

After a failure, `refuted` (rule 6) or `failed` (the search that failed, with its
`horizon`) says what the counterexample window (`window.py`) starts from.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

from checkers.linearizable.modelkit import Spec
from checkers.linearizable.refute import Overwritten, overwritten
from checkers.linearizable.search import Search

EXACT_ALONE = 20_000  # plus 4 moves an op: what the exact search gets before the relaxed one joins


class Hooks:
    """Rule 6's model functions (see `Model.needs`), or None where the model has none."""

    def __init__(self, needs: Callable[[Any], Hashable | None] | None,
                 produces: Callable[[Any], Hashable | None] | None,
                 leaves: Callable[[Any], Hashable | None] | None):
        self.needs, self.produces, self.leaves = needs, produces, leaves

    @property
    def complete(self) -> bool:
        return self.needs is not None and self.produces is not None and self.leaves is not None


def real_order(s: Search, stack: list[int]) -> list[int]:
    """The ops of a search stack, the k-th use of a class of indeterminate ops standing for
    the class's k-th op (the last one when a relaxed stack used it more often)."""
    used: dict[int, int] = {}
    out = []
    for op, _ in s.frames(stack):
        mem = s.members.get(op)
        if mem is None:
            out.append(op)
        else:
            k = used.get(op, 0)
            used[op] = k + 1
            out.append(mem[min(k, len(mem) - 1)])
    return out


class Plan:
    """The staged decision of one partition (see the module docstring)."""

    def __init__(self, spec: Spec, calls: list[Any], starts: list[float], ends: list[float | None],
                 readonly: list[bool], groups: list[int] | None, hooks: Hooks):
        self.spec, self.calls, self.starts, self.ends, self.ro, self.groups = spec, calls, starts, ends, readonly, groups
        self.hooks = hooks
        self.n = len(calls)
        self.stage = "rule 6" if hooks.complete else "exact"
        self.exact: Search | None = None  # the exact search, in the directed move order
        self.others: list[Search] = []  # those that join it: the plain order, the relaxed search
        self.alone: int | None = 4 * self.n + EXACT_ALONE  # moves the exact search gets before the others join
        self.result: bool | None = None
        self.refuted: Overwritten | None = None
        self.failed: Search | None = None  # the search that failed
        self.order: list[int] = []  # a linearization once valid
        self._turn = 0

    @property
    def searches(self) -> list[Search]:
        return ([self.exact] if self.exact is not None else []) + self.others

    @property
    def configs(self) -> int:
        return sum(s.configs for s in self.searches)

    @property
    def moves(self) -> int:
        return sum(s.steps for s in self.searches)

    @property
    def memory_units(self) -> int:
        return sum(s.memory_units for s in self.searches)

    def run(self, budget: int) -> bool | None:
        """Advance by about `budget` moves; True/False once decided."""
        if self.result is not None:
            return self.result
        if self.stage == "rule 6":
            h = self.hooks
            assert h.needs is not None and h.produces is not None and h.leaves is not None
            self.refuted = overwritten(self.calls, self.starts, self.ends, self.spec.init, h.needs, h.produces,
                                       h.leaves)
            if self.refuted is not None:
                self.result = False
                return False
            self.stage = "exact"
        if self.exact is None:
            self.exact = self._search()
        s = self.exact
        if self.alone is not None and s.steps >= self.alone:
            self.alone = None
            # the plain move order, where the model names states ops need (else it is the same)
            self.others = [self._search(directed=False)] if self.spec.needs is not None else []
            if self.hooks.produces is not None:
                # the relaxed search repeats indeterminate ops at will: it needs a finite set of
                # states they can reach, which `produces` guarantees (each op makes one at most)
                self.others.append(self._search(relaxed=True))
        if self.others:
            self._turn = (self._turn + 1) % (1 + len(self.others))
            s = self.searches[self._turn]
        self.stage = "relaxed" if s.relaxed else "exact"
        r = s.run(budget)
        if r is None:
            return None
        if r:
            self.order = real_order(s, s.final)
            self.result = True
        elif s.relaxed and s.rejected:
            self.others.remove(s)  # its linearizations used a class too often
            return None
        else:
            self.failed = s
            self.result = False
        return self.result

    def _search(self, **kw: bool) -> Search:
        return Search(self.calls, self.starts, self.ends, self.ro, self.spec, self.groups, **kw)

    def frontier(self) -> tuple[int, int] | None:
        """For an undecided partition: (the op whose return no configuration of the exact search
        has passed yet, the earliest op still unlinearized in its deepest one)."""
        s = self.exact
        if s is None:
            return None
        done = set(real_order(s, s.best))
        left = [op for op in range(s.n) if op not in done and (s.ends[op] is not None or s.rep[op] == op)]
        first = min(left, key=lambda op: s.call_entry[op], default=None)
        stuck = min((op for op in left if s.ret_entry[op] >= 0), key=lambda op: s.ret_entry[op], default=None)
        if stuck is None or first is None:
            return None
        return stuck, first
