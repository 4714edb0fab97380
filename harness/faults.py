"""The runner's fault side: `--nemesis` names -> fault packages, played by the generator.

`fault_packages(names, topics)` returns `nemesis.schedule` packages. Besides the nemesis
part's own (partition, kill, pause, restart, rolling-restart, and whatever it registers in
`nemesis.schedule.PACKAGES`), the harness adds packages aimed at the workload's partition
leaders, found through the cluster's metadata at the moment of the fault:

- `kill-leader`: SIGKILL the current leader of a random topic-partition, later start all;
- `partition-leader`: the current leader of a random topic-partition isolated from every
  other node or (the next time: they alternate) cut off from its ISR followers only, keeping the controller
  (`nemesis.leadercut`: the op returns once the ISR is the leader alone), later heal;
- `power-loss`: one node at a time, a leader that stands alone in its ISR when there is one
  (`nemesis.targets` role `lone-leader`: the ELR's case), else one at random;
- `kill-controller` / `partition-controller`: the same for the active controller's node;
- the fault stories of `nemesis.stories` (lrs, hw-truncation, leso, wipe-follower,
  stale-alter-partition, leader-churn), each aimed at one of the workload's partitions.

`mix` (the default `--nemesis`) is `DEFAULT_MIX`: five stories with the generic packages,
played by `nemesis.schedule.rotation` (each package in turn, a random order per round,
about a quarter of the time fault-free) instead of `combined`'s flip-flops, one clock per package.

With `--db etcd` the packages are `etcd_packages()`: the generic ones that reach etcd, and
`kill-leader` / `partition-leader` aimed at its Raft leader (the metadata's controller:
`nemesis.targets.LeaderMetadata`); `mix` is `ETCD_MIX`. Clock skew is left out (libfaketime
does not reach a Go program's clock), as are corruption and membership (the broker's
segment files and node ids) and the stories (Kafka partitions).

`ScheduleGenerator` turns `nemesis.schedule.combined` into a generator for the nemesis
thread (`contracts.generator.nemesis(...)`), so client ops and faults run on one clock;
`nemesis_client` is what that thread calls for each op (the heal op: `Nemesis.final_heal`).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from contracts.generator import NEMESIS_THREAD, NS, PENDING, Context, Generator, Pending
from contracts.history import NEMESIS
from nemesis.core import FaultOp, Nemesis
from nemesis.leadercut import install_leader_cut
from nemesis.schedule import (
    PACKAGES,
    FaultPackage,
    combined,
    final_ops,
    power_loss_package,
    rotation,
    story_package,
)
from nemesis.stories import STORIES

HEAL_F = "heal"
MIX = "mix"
# the stories that reach their trigger on wrack-broker, then generic faults; leader-churn is
# left out (docs/nemesis.md "Fault stories": no bug found with it alone, and it left
# partitions without a full ISR 30 s after the heal)
DEFAULT_MIX = ("lrs", "hw-truncation", "leso", "wipe-follower", "stale-alter-partition",
               "kill-leader", "partition", "kill")


ETCD_PACKAGES = ("partition", "kill", "pause", "restart", "rolling-restart", "power-loss", "power-loss-many")
ETCD_MIX = ("partition", "kill", "pause", "kill-leader", "partition-leader")


def expand(names: Sequence[str], mix: Sequence[str] = DEFAULT_MIX) -> list[str]:
    """`--nemesis` names with `mix` replaced by `mix` (no name twice)."""
    out: list[str] = []
    for n in names:
        for m in (mix if n == MIX else (n,)):
            if m not in out:
                out.append(m)
    return out


def rotates(names: Sequence[str]) -> bool:
    """Whether the schedule for `names` is the rotation (the default mix) or `combined`."""
    return MIX in names


def _leader_target(topics: Mapping[str, int]) -> Any:
    names = sorted(topics)

    def pick(rng: random.Random) -> dict[str, Any]:
        t = names[rng.randrange(len(names))]
        return {"role": "leader", "topic": t, "partition": rng.randrange(max(1, topics[t]))}

    return pick


def partition_leader_start(leader: Callable[[random.Random], dict[str, Any]],
                           candidates: Callable[[random.Random], list[tuple[str, int]]]
                           ) -> Callable[[random.Random], FaultOp]:
    """`partition-leader`'s start: a drawn partition's leader either isolated from every other
    node (the controller fences it and elects a follower: what acks=1 loses) or cut off from
    its ISR followers only (`nemesis.leadercut`, the workload's partitions in a drawn order as
    candidates: the leader keeps the controller and shrinks the ISR to itself, the ELR's
    case). The first start draws the shape, the next ones alternate: a run with two leader
    partitions has both (drawn each time, three in a row were isolations in 2 of 5 runs)."""
    isolate_next: list[bool] = []

    def start(rng: random.Random) -> FaultOp:
        isolate = rng.random() < 0.5 if not isolate_next else isolate_next[0]
        isolate_next[:] = [not isolate]
        if isolate:
            return FaultOp("start-partition", {"isolate": leader(rng)})
        return FaultOp("cut-leader", {"candidates": [list(c) for c in candidates(rng)]})

    return start


def extra_packages(topics: Mapping[str, int]) -> dict[str, Any]:
    if not topics:
        return {}
    leader = _leader_target(topics)

    every = [(t, p) for t in sorted(topics) for p in range(max(1, topics[t]))]

    def candidates(rng: random.Random) -> list[tuple[str, int]]:
        order = list(every)
        rng.shuffle(order)
        return order

    stories = {name: (lambda name=name: story_package(name, candidates)) for name in STORIES}
    # a power loss strikes a leader that stands alone in its ISR when there is one (seed 002:
    # the ELR's case), else one node at random
    lone = {"role": "lone-leader", "topics": sorted(topics), "else": "one"}
    return {
        **stories,
        "power-loss": lambda: power_loss_package((lone,)),
        "kill-leader": lambda: FaultPackage("kill-leader", lambda rng: FaultOp("kill", leader(rng)),
                                            FaultOp("start", "all"), [FaultOp("start", "all")], "#E9A4A0"),
        "partition-leader": lambda: FaultPackage(
            "partition-leader", partition_leader_start(leader, candidates), FaultOp("stop-partition"),
            [FaultOp("stop-partition")], "#E9DCA0", install_leader_cut),
    }


def controller_packages() -> dict[str, Any]:
    """`kill-controller` (SIGKILL the active controller's node, later start all) and
    `partition-controller` (isolate it from every other node, later heal); the controller
    is found through the cluster's metadata at the moment of the fault."""
    ctl = {"role": "controller"}
    return {
        "kill-controller": lambda: FaultPackage("kill-controller", lambda rng: FaultOp("kill", ctl),
                                                FaultOp("start", "all"), [FaultOp("start", "all")], "#D98880"),
        "partition-controller": lambda: FaultPackage(
            "partition-controller", lambda rng: FaultOp("start-partition", {"isolate": ctl}),
            FaultOp("stop-partition"), [FaultOp("stop-partition")], "#D9C880"),
    }


def etcd_packages() -> dict[str, Any]:
    """The packages for `--db etcd` (module docstring); its leader is the metadata's controller."""
    ctl = controller_packages()
    return {
        **{n: PACKAGES[n] for n in ETCD_PACKAGES},
        "kill-leader": lambda: replace(ctl["kill-controller"](), name="kill-leader"),
        "partition-leader": lambda: replace(ctl["partition-controller"](), name="partition-leader"),
    }


def package_table(topics: Mapping[str, int], db: str = "wrack") -> tuple[dict[str, Any], Sequence[str]]:
    """The packages `--nemesis` may name for `db`, and what `mix` stands for."""
    if db == "etcd":
        return etcd_packages(), ETCD_MIX
    return {**PACKAGES, **extra_packages(topics), **controller_packages()}, DEFAULT_MIX


def known_packages(topics: Mapping[str, int] | None = None, db: str = "wrack") -> list[str]:
    return sorted({*package_table(topics or {"t": 1}, db)[0], MIX})


def fault_packages(names: Sequence[str], topics: Mapping[str, int], db: str = "wrack") -> list[Any]:
    """Packages for `--nemesis` names (ValueError naming the unknown ones)."""
    table, mix = package_table(topics, db)
    bad = [n for n in names if n != MIX and n not in table]
    if bad:
        what = "nemesis" if db == "wrack" else f"nemesis for {db}"
        raise ValueError(f"unknown {what} {', '.join(bad)} (known: {', '.join(known_packages(topics, db))})")
    return [table[n]() for n in expand(names, mix)]


class ScheduleGenerator(Generator):
    """Fault ops from `combined(packages, interval, rng)` (or `rotation` when `rotate`) at
    their scheduled times. Each delay counts from the moment the previous op ended (a story
    takes seconds: the fault-free period after it stays as long as the schedule says).

    The schedule has its own rng (derived from the test's seed), so the faults and their
    order replay for a seed whatever the clients do."""

    def __init__(self, packages: Sequence[Any], interval: float, rng: random.Random, rotate: bool = False):
        play = rotation if rotate else combined
        self.it = play(list(packages), interval, rng) if packages else iter(())
        self.next_time: int | None = None

    def op(self, ctx: Context) -> dict[str, Any] | Pending | None:
        if NEMESIS_THREAD not in ctx.free:
            return PENDING
        try:
            delay, fop = next(self.it)
        except StopIteration:
            return None
        self.next_time = ctx.time + int(delay * NS)
        return {"process": NEMESIS, "f": fop.f, "value": fop.value, "time": self.next_time}


def heal_op() -> dict[str, Any]:
    """The op that ends every fault: the packages' final ops, then `Nemesis.heal_all`."""
    return {"process": NEMESIS, "f": HEAL_F, "value": None}


def nemesis_client(nem: Nemesis, packages: Sequence[FaultPackage],
                   ready_timeout: float = 30.0) -> Callable[[dict[str, Any]], Any]:
    """The interpreter's nemesis (Jepsen's nemesis client): a scheduled fault op is performed
    and recorded by `nem`; the heal op is its `final_heal` with the packages' final ops,
    waiting at most `ready_timeout` s for each node to be ready (a node not ready by the
    recovery time limit fails the liveness check whatever comes later). A fault that fails
    is recorded as `nemesis-error` and the test goes on."""
    finals = final_ops(packages)

    def invoke(op: dict[str, Any]) -> Any:
        try:
            if op["f"] == HEAL_F:
                nem.final_heal(finals, ready_timeout)
                return None
            return nem.invoke(FaultOp(op["f"], op.get("value")))
        except Exception as e:  # noqa: BLE001 - recorded, the test goes on
            nem.record("nemesis-error", {"f": op["f"], "spec": op.get("value"),
                                         "error": f"{type(e).__name__}: {e}"})
            return None

    return invoke
