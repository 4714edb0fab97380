"""Shrink a failing simulation seed to the fewest faults that still fail it.

A seed's faults come in *slots*: each strike of the generic faults (`random_run.GenericFaults`:
a crash, a cut, a partition, or a fault story that takes the slot) is `g0, g1, ...`, each
strike of the controller quorum's faults (`random_run.ControllerFaults`) `c0, c1, ...`, and
each move that follows a fault story's end (`stories.StoryMix._next`: the next story, say)
`s0, s1, ...`, in the order they come. `gated(keep)` runs a seed with only the slots in `keep` striking (the others
do nothing; None: all), which is as deterministic as the seed itself, so a set of slots is
a reproduction: `python -m broker.sim --seed S --faults g3,c1` replays it.

`shrink(seed, **run_args)` runs the seed once (it must fail), then Zeller's ddmin over the
slots that struck: the complement of a chunk is kept when the seed still fails with the same
signature (`signature`: lost acknowledged writes, and the invariants violated; the same bug
shares one of them), chunks halve when none can go. It returns the kept slots, each with
the first fault line it logged, and the number of runs.

The gate wraps the two classes' `strike` and the mix's `_next` for the duration of one run (in this process: the
seeds of a shrink run one after another), and their `log` so that each slot's lines are known.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from broker.sim import random_run as rr
from broker.sim.stories import StoryMix


class Gate:
    """Counts the slots as they come and lets only `keep` strike; records what each slot logged."""

    def __init__(self, keep: frozenset[str] | None = None):
        self.keep = keep
        self.counts = {"g": 0, "c": 0, "s": 0}
        self.lines: dict[str, list[str]] = {}

    def slot(self, kind: str) -> str:
        s = f"{kind}{self.counts[kind]}"
        self.counts[kind] += 1
        return s

    def allows(self, slot: str) -> bool:
        return self.keep is None or slot in self.keep

    def logger(self, slot: str, log: Callable[[str], None]) -> Callable[[str], None]:
        def write(what: str) -> None:
            self.lines.setdefault(slot, []).append(what)
            log(what)

        return write


def _gated(gate: Gate, kind: str, method: Callable[..., Any],
           loggers: Callable[[Any], list[Any]]) -> Callable[..., Any]:
    """`method` as one slot of `kind`: nothing when the gate says no, else the method with the
    `log` of each of `loggers(self)` recording the slot's lines."""
    def wrapper(self: Any, *args: Any, **kw: Any) -> Any:
        slot = gate.slot(kind)
        if not gate.allows(slot):
            return None
        objs = loggers(self)
        saved = [o.log for o in objs]
        for o, log in zip(objs, saved, strict=True):
            o.log = gate.logger(slot, log)
        try:
            return method(self, *args, **kw)
        finally:
            for o, log in zip(objs, saved, strict=True):
                o.log = log

    return wrapper


@contextmanager
def gated(gate: Gate) -> Iterator[Gate]:
    """Runs inside see only the slots `gate` allows (module docstring)."""
    g_strike, c_strike = rr.GenericFaults.strike, rr.ControllerFaults.strike
    s_next = getattr(StoryMix, "_next", None)  # a mix that chains its stories
    rr.GenericFaults.strike = _gated(gate, "g", g_strike, lambda f: [f, f.mix])  # type: ignore[method-assign]
    rr.ControllerFaults.strike = _gated(gate, "c", c_strike, lambda f: [f])  # type: ignore[method-assign]
    if s_next is not None:
        StoryMix._next = _gated(gate, "s", s_next, lambda m: [m])  # type: ignore[method-assign]
    try:
        yield gate
    finally:
        rr.GenericFaults.strike, rr.ControllerFaults.strike = g_strike, c_strike  # type: ignore[method-assign]
        if s_next is not None:
            StoryMix._next = s_next  # type: ignore[method-assign]


def run_gated(seed: int, keep: frozenset[str] | None, **run_args: Any) -> tuple[rr.RunResult, Gate]:
    """`random_run(seed, **run_args)` with only the slots `keep` striking."""
    with gated(Gate(keep)) as gate:
        return rr.random_run(seed, **run_args), gate


def signature(r: rr.RunResult) -> frozenset[str]:
    """What a failure is: lost acknowledged writes, and the names of the invariants violated."""
    return frozenset({"lost-acked-writes"} if r.lost else set()) | {v.name for v in r.violations}


def struck(gate: Gate) -> list[str]:
    """The slots that did something (logged a fault), in the order they came."""
    return [s for s in gate.lines if any("no target" not in line for line in gate.lines[s])]


@dataclass
class SimShrink:
    seed: int
    slots: list[str]
    lines: dict[str, list[str]] = field(default_factory=dict)
    runs: int = 0
    signature: frozenset[str] = frozenset()
    from_slots: int = 0


class NotFailing(ValueError):
    """The seed passes: there is nothing to shrink."""


def shrink(seed: int, on_step: Callable[[str], None] | None = None, **run_args: Any) -> SimShrink:
    """The fewest slots of `seed` that still fail it with a shared signature (module docstring)."""
    first, gate = run_gated(seed, None, **run_args)
    if first.ok:
        raise NotFailing(f"seed {seed} passes: nothing to shrink")
    want = signature(first)
    items = struck(gate)
    out = SimShrink(seed, items, gate.lines, 1, want, len(items))

    def fails(keep: list[str]) -> bool:
        r, g = run_gated(seed, frozenset(keep), **run_args)
        out.runs += 1
        if not r.ok and signature(r) & want:
            out.lines = g.lines
            return True
        return False

    n = 2
    while len(items) >= 2:
        chunk = max(1, len(items) // n)
        parts = [items[i:i + chunk] for i in range(0, len(items), chunk)]
        for part in parts:
            rest = [x for x in items if x not in part]
            if rest and fails(rest):
                items, n = rest, max(n - 1, 2)
                if on_step:
                    on_step(f"{len(items)} faults still fail the seed ({out.runs} runs)")
                break
        else:
            if chunk == 1:
                break
            n = min(len(items), n * 2)
    out.slots = items
    return out
