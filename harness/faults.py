"""The runner's fault side: `--nemesis` names -> fault packages, played by the generator.

`fault_packages(names, system, topics)` returns nemesis/schedule.py packages from the table
the system under test gives (`SystemUnderTest.fault_packages`: the generic packages that
reach it and its own, e.g. aimed at its leaders' roles or its fault stories; each package
brings its generator, final ops and plot colour). `mix` (the default `--nemesis`) stands for
the system's default mix, played by `nemesis.schedule.rotation` (each package in turn, a
random order per round, about a quarter of the time fault-free) instead of `combined`'s
flip-flops, one clock per package; the mix's background packages (tier
`nemesis.layers.BACKGROUND`, e.g. the client path's faults) play beside the rotation on
their own clocks (`nemesis.layers.layered`).

`ScheduleGenerator` turns `nemesis.schedule.combined` into a generator for the nemesis
thread (`contracts.generator.nemesis(...)`), so client ops and faults run on one clock;
`nemesis_client` is what that thread calls for each op (the heal op: `Nemesis.final_heal`).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any

from contracts.generator import NEMESIS_THREAD, NS, PENDING, Context, Generator, Pending
from contracts.history import NEMESIS
from harness.schedule_file import PackageOp, replay
from nemesis.core import FaultOp, Nemesis
from nemesis.layers import layered
from nemesis.schedule import FaultPackage, combined, final_ops

HEAL_F = "heal"
MIX = "mix"
# how many more time limits the workload runs while the mix's first round is owed: two tests
# at once on a 2-core host needed 130-150 s for the broker's round of ten trigger shapes
OWED_GRACE = 2


def expand(names: Sequence[str], mix: Sequence[str]) -> list[str]:
    """`--nemesis` names with `mix` replaced by the system's mix (no name twice)."""
    out: list[str] = []
    for n in names:
        for m in (mix if n == MIX else (n,)):
            if m not in out:
                out.append(m)
    return out


def rotates(names: Sequence[str]) -> bool:
    """Whether the schedule for `names` is the rotation (the default mix) or `combined`."""
    return MIX in names


def known_packages(system: Any, topics: Mapping[str, int] | None = None) -> list[str]:
    return sorted({*system.fault_packages(topics or {"t": 1})[0], MIX})


def fault_packages(names: Sequence[str], system: Any, topics: Mapping[str, int]) -> list[Any]:
    """Packages for `--nemesis` names on `system` (ValueError naming the unknown ones)."""
    table, mix = system.fault_packages(topics)
    bad = [n for n in names if n != MIX and n not in table]
    if bad:
        raise ValueError(f"unknown nemesis {', '.join(bad)} for --db {system.name} "
                         f"(known: {', '.join(known_packages(system, topics))})")
    return [table[n]() for n in expand(names, mix)]


class ScheduleGenerator(Generator):
    """Fault ops from `combined(packages, interval, rng)` (or `rotation` when `rotate`) at
    their scheduled times. Each delay counts from the moment the previous op ended (a story
    takes seconds: the fault-free period after it stays as long as the schedule says).

    The schedule has its own rng (derived from the test's seed), so the faults and their
    order replay for a seed whatever the clients do. Each op names its package (`package`),
    so the run's schedule.json can say which package played what (harness/schedule_file.py).

    `ScheduleGenerator.played(actions)` plays a schedule file's actions instead: each at its
    `at_s` (seconds since the workload started), or when the one before it ended if later;
    it owes every action of the file (a run's round may have gone past its time limit).

    The rotation's first round owes every tier-0 package (those that reach a trigger: the
    rotation plays them first) one turn: `owed` holds the names of those whose first op has
    not yet ended, `owes()` whether any is left. The runner keeps the workload going past
    its time limit while the round is owed (at most `OWED_GRACE` more time limits), so that a
    slow host plays fewer faults after the round, not fewer trigger shapes."""

    def __init__(self, packages: Sequence[Any], interval: float, rng: random.Random, rotate: bool = False):
        play = layered if rotate else combined
        tagged = [_tagging(p) for p in packages]
        self.it: Iterator[tuple[float, FaultOp]] = play(tagged, interval, rng) if packages else iter(())
        self.absolute = False
        self.next_time: int | None = None
        self.owed: set[str] = {p.name for p in packages if p.tier == 0} if rotate else set()
        self._playing: str | None = None  # the package of the op handed out last, until it ends
        self._replay_left = 0  # a schedule file's actions not yet played to their end

    @classmethod
    def played(cls, actions: Sequence[Any]) -> ScheduleGenerator:
        gen = cls([], 1.0, random.Random(0))
        gen.it, gen.absolute, gen._replay_left = replay(actions), True, len(actions)
        return gen

    def op(self, ctx: Context) -> dict[str, Any] | Pending | None:
        if NEMESIS_THREAD not in ctx.free:
            return PENDING
        try:
            when, fop = next(self.it)
        except StopIteration:
            return None
        self.next_time = max(ctx.time, int(when * NS)) if self.absolute else ctx.time + int(when * NS)
        self._playing = getattr(fop, "package", "")
        return {"process": NEMESIS, "f": fop.f, "value": fop.value, "time": self.next_time,
                "package": self._playing}

    def update(self, ctx: Context, event: Mapping[str, Any]) -> None:
        if event.get("process") == NEMESIS and event.get("type") != "invoke" and self._playing is not None:
            self.owed.discard(self._playing)
            self._playing = None
            self._replay_left = max(0, self._replay_left - 1)

    def owes(self) -> bool:
        """Whether the first round still owes a tier-0 package its turn, or a schedule file
        an action (class docstring)."""
        return bool(self.owed) or self._replay_left > 0


def _tagging(p: FaultPackage) -> FaultPackage:
    """`p` whose ops name it (`PackageOp`)."""
    stop = PackageOp(p.stop.f, p.stop.value, p.name) if p.stop is not None else None
    return replace(p, start=lambda rng: _tag(p.start(rng), p.name), stop=stop)


def _tag(op: FaultOp, name: str) -> PackageOp:
    return PackageOp(op.f, op.value, name)


def heal_op() -> dict[str, Any]:
    """The op that ends every fault: the packages' final ops, then `Nemesis.heal_all`."""
    return {"process": NEMESIS, "f": HEAL_F, "value": None}


def nemesis_client(nem: Nemesis, packages: Sequence[FaultPackage], ready_timeout: float = 30.0,
                   on_played: Callable[[dict[str, Any], Any], None] | None = None,
                   clock: Callable[[], int] | None = None) -> Callable[[dict[str, Any]], Any]:
    """The interpreter's nemesis (Jepsen's nemesis client): a scheduled fault op is performed
    and recorded by `nem`; the heal op is its `final_heal` with the packages' final ops,
    waiting at most `ready_timeout` s for each node to be ready (a node not ready by the
    recovery time limit fails the liveness check whatever comes later). A fault that fails
    is recorded as `nemesis-error` and the test goes on. `on_played(op, event)` hears every
    scheduled op played (the recorded event, None for one that failed), with the op's `time`
    when it started by `clock` (ns, the history's clock): the run's schedule.json."""
    finals = final_ops(packages)

    def invoke(op: dict[str, Any]) -> Any:
        if clock is not None:
            op = {**op, "time": clock()}  # the op loop hands its ops over without their time
        try:
            if op["f"] == HEAL_F:
                nem.final_heal(finals, ready_timeout)
                return None
            event = nem.invoke(FaultOp(op["f"], op.get("value")))
        except Exception as e:  # noqa: BLE001 - recorded, the test goes on
            nem.record("nemesis-error", {"f": op["f"], "spec": op.get("value"),
                                         "error": f"{type(e).__name__}: {e}"})
            event = None
        if on_played is not None:
            on_played(op, event)
        return event

    return invoke
