"""Delta debugging over a fault schedule: the smallest schedule that still shows the bug.

`Shrinker(original, trial, times=K, budget_s=S).run()` starts from a run's schedule
(harness/schedule_file.py) and tries smaller ones, each a `Schedule`, keeping a candidate
when one of up to K runs of it shows the bug (`trial(candidate) -> bool`; a bug shows up in
2 or 3 of 3 runs, so one miss proves nothing; the first run that shows it ends the candidate's
tries). The passes, cheapest first, each repeated while it gains:

0. focus (when the run says when its first anomaly happened, `hint_s`): only the actions from
   `BEFORE_S` before it to `AFTER_S` after it, moved earlier, the time limit cut: one guess
   that makes every later run short when it holds;
1. packages: drop whole fault packages (all their actions), by ddmin (halves, then quarters...);
2. time: move the actions earlier (the first at `LEAD_S`, the gaps kept) and end the time
   limit `TAIL_S` after the last one, so every later run is shorter (again after 3.);
3. actions: drop actions by ddmin (Zeller's: try each chunk's complement, halve the chunks
   when none can go);
4. options: fewer nodes, keys (topics, partitions) and clients (`SMALLER`), one at a time.

The budget is checked before each run: a run is not started when the median run so far would
overrun it. `trial` may raise `contracts.errors.InputError` for a candidate the system
refuses (e.g. fewer nodes than its replication factor): that candidate is skipped, no run
spent. The result: the smallest schedule kept, how many runs were made, and whether the last
kept candidate's run showed the bug (the original counts as shown).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from contracts.errors import InputError
from harness.schedule_file import Action, Schedule

BEFORE_S, AFTER_S = 20.0, 10.0  # the focus window around the first anomaly
LEAD_S = 5.0  # the first action of a moved schedule starts this long after the workload
TAIL_S = 15.0  # a shortened time limit ends this long after the last action starts
# option -> the smaller values to try, in order (a value not below the current one is skipped)
SMALLER: dict[str, tuple[Any, ...]] = {"nodes": (3,), "topics": (1,), "partitions": (1,),
                                       "concurrency": ("1",), "in_flight": (8,)}


@dataclass
class Outcome:
    """What a shrink found: the smallest schedule kept, the runs made, and the steps taken."""

    schedule: Schedule
    tries: int
    reproduced: bool
    steps: list[str] = field(default_factory=list)
    out_of_budget: bool = False


class Shrinker:
    """See the module docstring. `on_step(message)` hears each candidate's result."""

    def __init__(self, original: Schedule, trial: Callable[[Schedule], bool], times: int = 2,
                 budget_s: float = 1200.0, clock: Callable[[], float] = time.monotonic,
                 on_step: Callable[[str], None] | None = None, hint_s: float | None = None):
        self.best = original
        self.hint_s = hint_s
        self.trial = trial
        self.times = max(1, times)
        self.budget_s = budget_s
        self.clock = clock
        self.on_step = on_step or (lambda _m: None)
        self.start = clock()
        self.durations: list[float] = []
        self.tries = 0
        self.steps: list[str] = []
        self.out_of_budget = False

    # ----------------------------------------------------------------- running candidates

    def _time_left(self) -> bool:
        used = self.clock() - self.start
        need = statistics.median(self.durations) if self.durations else 0.0
        if used + need > self.budget_s:
            self.out_of_budget = True
        return not self.out_of_budget

    def attempt(self, cand: Schedule, what: str) -> bool:
        """Up to `times` runs of `cand` (stopping at the first that shows the bug); keep it if one did."""
        for i in range(self.times):
            if not self._time_left():
                return False
            t0 = self.clock()
            try:
                shown = self.trial(cand)
            except InputError as e:
                self._note(f"{what}: skipped ({e})")
                return False
            self.durations.append(self.clock() - t0)
            self.tries += 1
            if shown:
                self.best = cand
                self._note(f"{what}: kept ({len(cand.actions)} actions; shown in run {i + 1})")
                return True
        self._note(f"{what}: not shown in {self.times} run(s)")
        return False

    def _note(self, msg: str) -> None:
        self.steps.append(msg)
        self.on_step(msg)

    # ----------------------------------------------------------------- the passes

    def run(self) -> Outcome:
        self.focus()
        self.packages()
        self.shorten()
        self.actions()
        self.shorten()
        self.options()
        return Outcome(self.best, self.tries, True, self.steps, self.out_of_budget)

    def _ddmin(self, items: Sequence[Any], make: Callable[[list[Any]], Schedule], what: str) -> None:
        """Zeller's ddmin over `items`: keep the complement of a chunk whenever it shows the bug."""
        items, n = list(items), 2
        while len(items) >= 2 and not self.out_of_budget:
            chunk = max(1, len(items) // n)
            parts = [items[i:i + chunk] for i in range(0, len(items), chunk)]
            for part in parts:
                rest = [x for x in items if x not in part]
                if rest and self.attempt(make(rest), f"{what}: without {_names(part)}"):
                    items, n = rest, max(n - 1, 2)
                    break
            else:
                if chunk == 1:
                    break
                n = min(len(items), n * 2)

    def packages(self) -> None:
        used = self.best.used_packages()

        def make(keep: list[str]) -> Schedule:
            return replace(self.best, packages=[p for p in self.best.packages if p in keep],
                           actions=[a for a in self.best.actions if a.package in keep])

        self._ddmin(used, make, "packages")

    def focus(self) -> None:
        if self.hint_s is None:
            return
        acts = [a for a in self.best.actions if self.hint_s - BEFORE_S <= a.at_s <= self.hint_s + AFTER_S]
        if acts and len(acts) < len(self.best.actions):
            self.shorten(replace(self.best, actions=acts, packages=[p for p in self.best.packages
                                                                    if any(a.package == p for a in acts)]),
                         f"focus: {len(acts)} actions around the first anomaly at {self.hint_s:.0f} s")

    def shorten(self, base: Schedule | None = None, what: str = "time") -> None:
        base = base or self.best
        acts = base.actions
        if not acts:
            return
        shift = max(0.0, acts[0].at_s - LEAD_S)
        moved = [replace(a, at_s=a.at_s - shift) for a in acts]
        limit = round(moved[-1].at_s + TAIL_S, 1)
        if base is self.best and shift < 1.0 and limit >= float(base.options.get("time_limit", limit + 1)):
            return
        cand = replace(base, actions=moved, options={**base.options, "time_limit": limit})
        self.attempt(cand, f"{what}: actions {shift:.0f} s earlier, time limit {limit:.0f} s")

    def actions(self) -> None:
        def make(keep: list[Action]) -> Schedule:
            return replace(self.best, actions=[a for a in self.best.actions if a in keep])

        self._ddmin(self.best.actions, make, "actions")

    def options(self) -> None:
        for name, values in SMALLER.items():
            if name not in self.best.options:
                continue
            for v in values:
                if self.out_of_budget or not _smaller(v, self.best.options[name]):
                    continue
                cand = replace(self.best, options={**self.best.options, name: v})
                if self.attempt(cand, f"options: {name} {v}"):
                    break


def _smaller(v: Any, current: Any) -> bool:
    try:
        return float(v) < float(current)
    except (TypeError, ValueError):
        return str(v) != str(current)  # e.g. concurrency "1" for "1n"


def _names(part: Sequence[Any]) -> str:
    shown = [p if isinstance(p, str) else f"{p.f}@{p.at_s:.1f}s" for p in part[:4]]
    return ", ".join(shown) + (f" and {len(part) - 4} more" if len(part) > 4 else "")
