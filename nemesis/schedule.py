"""Fault schedules: packages combined with intervals, like Jepsen's nemesis.combined.

A `FaultPackage` is a flip-flop: `start(rng)` makes a fault op, `stop` (None for instant
faults such as restarts) undoes it; `final` ops run at the end of a test; `color` shades its
fault windows in plots. `combined(packages, interval, rng)` yields `(delay_s, FaultOp)`
forever: each package keeps its own clock, and every `interval` (jittered by ±50%) of it
either starts its fault or, when its fault is on, stops it; the packages' ops are merged in
time order, so faults of different packages overlap (as Jepsen's `combined/compose-packages`
merges the packages' own timed flip-flops with `gen/any`). A test plays a schedule through
`harness.faults.ScheduleGenerator` and ends it with `Nemesis.final_heal(final_ops(packages))`.

`rotation(packages, interval, rng, calm=0.25)` is the default mix's schedule: the packages
in turn (a new random order each round, the stories that reach their trigger, tier 0,
before the other packages: in a one-minute test each gets its turn first), each fault held about `interval` (a story or an
instant: as long as it takes), each followed by a fault-free period, so that about `calm` of
the time has no fault (as Jepsen's recent Kafka-compatible tests rotate faults with stable
periods). Its delays count from the end of the previous op (`harness.faults.ScheduleGenerator`).

A system's suite adds packages of its own (the wrack broker's fault stories, each a
multi-step story on the roles of one partition played as one instant op, are
suites/wrack/stories.py's `story_package`).

Packages whose faults need node-side machinery (power loss: a LazyFS mount under the data
dir; clock: the libfaketime preload) have a `prepare(nemesis)` that installs their DB hooks
and fault handlers: call `prepare(nemesis, pkgs)` after making the Nemesis and BEFORE
`db.setup`/`db.start` on the nodes.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from contracts.history import FAULT_COLORS
from nemesis.clock import install_clock
from nemesis.core import FaultOp, Nemesis
from nemesis.corruption import install_corruption
from nemesis.lazyfs.hook import install_power_loss
from nemesis.membership import install_membership


@dataclass
class FaultPackage:
    name: str
    start: Callable[[random.Random], FaultOp]
    stop: FaultOp | None
    final: list[FaultOp] = field(default_factory=list)
    color: str = "#CCCCCC"
    prepare: Callable[[Nemesis], Any] | None = None
    tier: int = 1  # `rotation` plays a round's packages tier by tier (stories: 0)


def _choice(options: Sequence[Any]) -> Callable[[random.Random], Any]:
    return lambda rng: options[rng.randrange(len(options))]


def _rotation(options: Sequence[Any]) -> Callable[[random.Random], Any]:
    """Each option once per round, the rounds each in an order drawn from `rng`: a run with
    len(options) actions has met every one (a random choice of four misses one in a third
    of such runs: (3/4)^4)."""
    left: list[Any] = []

    def pick(rng: random.Random) -> Any:
        if not left:
            left.extend(rng.sample(list(options), len(options)))
        return left.pop()

    return pick


def partition_package(specs: Sequence[Any] = ("halves", "majority", "one", "majorities-ring", "bridge")
                      ) -> FaultPackage:
    pick = _choice(list(specs))
    return FaultPackage("partition", lambda rng: FaultOp("start-partition", pick(rng)),
                        FaultOp("stop-partition"), [FaultOp("stop-partition")], FAULT_COLORS["partition"])


def kill_package(targets: Sequence[Any] = ("one", "minority", "majority")) -> FaultPackage:
    pick = _choice(list(targets))
    return FaultPackage("kill", lambda rng: FaultOp("kill", pick(rng)), FaultOp("start", "all"),
                        [FaultOp("start", "all")], FAULT_COLORS["kill"])


def pause_package(targets: Sequence[Any] = ("one", "minority", "majority")) -> FaultPackage:
    pick = _choice(list(targets))
    return FaultPackage("pause", lambda rng: FaultOp("pause", pick(rng)), FaultOp("resume", "all"),
                        [FaultOp("resume", "all")], FAULT_COLORS["pause"])


def restart_package(targets: Sequence[Any] = ("one",), rolling: bool = False) -> FaultPackage:
    pick = _choice(list(targets))
    f = "rolling-restart" if rolling else "restart"
    return FaultPackage(f, lambda rng: FaultOp(f, pick(rng)), None, [], FAULT_COLORS[f])


def power_loss_package(targets: Sequence[Any] = ("one",), torn: Sequence[Any] = (False, True),
                       name: str = "power-loss") -> FaultPackage:
    """SIGKILL + drop unsynced data + restart (nemesis/lazyfs); an instant. Its heal puts
    every LazyFS into pass-through mode (nothing is lost after the schedule). By default one
    node at a time: with acks=all and min ISR 2 the protocol promises that loses nothing
    (seed 002, the ELR), so any loss is a bug; `power-loss-many` also takes minorities,
    majorities and the whole cluster at once (a site's power cut, as Jepsen's LazyFS tests
    do), beyond that promise unless every write is fsynced (the policy then allows their
    partitions' loss; with a flush per message it allows none). The targets rotate
    (`_rotation`): four power losses of `power-loss-many` cut the whole cluster once."""
    pick, pick_torn = _rotation(list(targets)), _choice(list(torn))
    return FaultPackage(name, lambda rng: FaultOp("power-loss", {"nodes": pick(rng), "torn": pick_torn(rng)}),
                        None, [], FAULT_COLORS["power-loss"], install_power_loss)


def clock_package() -> FaultPackage:
    """start-clock (a random bump or strobe) / stop-clock (reset), nemesis/clock.py."""
    return FaultPackage("clock", lambda rng: FaultOp("start-clock", None), FaultOp("stop-clock"),
                        [FaultOp("stop-clock")], FAULT_COLORS["clock"], install_clock)


def corruption_package(modes: Sequence[str] = ("bitflip", "truncate")) -> FaultPackage:
    """corrupt-file on one node's last segments (stop, corrupt, restart); an instant."""
    pick = _choice(list(modes))
    return FaultPackage("corruption", lambda rng: FaultOp("corrupt-file", {"nodes": "one", "mode": pick(rng)}),
                        None, [], FAULT_COLORS["corruption"], install_corruption)


def membership_package() -> FaultPackage:
    """remove-node (stop for good + wipe) / add-node (fresh id), nemesis/membership.py."""
    return FaultPackage("membership", lambda rng: FaultOp("remove-node", "one"), FaultOp("add-node", None),
                        [FaultOp("add-node", None)], FAULT_COLORS["membership"], install_membership)


def kill_target_package(name: str, target: Any, color: str) -> FaultPackage:
    """SIGKILL the node(s) `target` names (a `nemesis.targets` spec, e.g. a role the cluster's
    metadata resolves when the fault starts), later start all."""
    return FaultPackage(name, lambda rng: FaultOp("kill", target(rng) if callable(target) else target),
                        FaultOp("start", "all"), [FaultOp("start", "all")], color)


def isolate_target_package(name: str, target: Any, color: str) -> FaultPackage:
    """Isolate the node(s) `target` names from every other node, later heal."""
    return FaultPackage(name, lambda rng: FaultOp("start-partition", {"isolate": target(rng) if callable(target)
                                                                       else target}),
                        FaultOp("stop-partition"), [FaultOp("stop-partition")], color)


PACKAGES: dict[str, Callable[[], FaultPackage]] = {
    "partition": partition_package, "kill": kill_package, "pause": pause_package,
    "restart": restart_package, "rolling-restart": lambda: restart_package(("all",), rolling=True),
    "power-loss": power_loss_package, "clock": clock_package, "corruption": corruption_package,
    "membership": membership_package,
    "power-loss-many": lambda: power_loss_package(("one", "minority", "majority", "all"), name="power-loss-many"),
}


def prepare(nemesis: Nemesis, pkgs: Sequence[FaultPackage]) -> None:
    """Install what the packages' faults need (DB hooks, handlers); before db.setup."""
    for p in pkgs:
        if p.prepare is not None:
            p.prepare(nemesis)


def packages(names: Sequence[str]) -> list[FaultPackage]:
    """Packages by name (ValueError for unknown names)."""
    bad = [n for n in names if n not in PACKAGES]
    if bad:
        raise ValueError(f"unknown fault packages {bad} (known: {', '.join(sorted(PACKAGES))})")
    return [PACKAGES[n]() for n in names]


def combined(pkgs: Sequence[FaultPackage], interval: float, rng: random.Random
             ) -> Iterator[tuple[float, FaultOp]]:
    """(delay before the op, op) forever; see the module docstring."""
    if not pkgs:
        return
    on = [False] * len(pkgs)
    due = [interval * rng.uniform(0.5, 1.5) for _ in pkgs]
    now = 0.0
    while True:
        i = min(range(len(pkgs)), key=due.__getitem__)
        p, delay, now = pkgs[i], due[i] - now, due[i]
        due[i] = now + interval * rng.uniform(0.5, 1.5)
        if on[i] and p.stop is not None:
            on[i] = False
            yield delay, p.stop
        else:
            on[i] = p.stop is not None
            yield delay, p.start(rng)


def rotation(pkgs: Sequence[FaultPackage], interval: float, rng: random.Random, calm: float = 0.25
             ) -> Iterator[tuple[float, FaultOp]]:
    """(delay after the previous op ended, op) forever; see the module docstring."""
    if not pkgs:
        return
    gap = interval * calm / (1 - calm)
    while True:
        order = list(pkgs)
        rng.shuffle(order)
        order.sort(key=lambda p: p.tier)  # stable: a random order within each tier
        for p in order:
            yield gap * rng.uniform(0.5, 1.5), p.start(rng)
            if p.stop is not None:
                yield interval * rng.uniform(0.5, 1.5), p.stop


def final_ops(pkgs: Sequence[FaultPackage]) -> list[FaultOp]:
    """Every package's final ops, in package order (run sequentially, like Jepsen)."""
    return [op for p in pkgs for op in p.final]


def colors(pkgs: Sequence[FaultPackage]) -> dict[str, str]:
    """Fault kind (as `fault_windows` names it) -> plot colour."""
    return {p.name: p.color for p in pkgs}
