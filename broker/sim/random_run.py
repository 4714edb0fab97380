"""Random runs: one seed chooses a cluster configuration, a fault schedule and a
workload, runs it on a `SimCluster` with the invariants checked after every step, heals
everything, lets the cluster settle, and reads back every acks=all acknowledgement.
The fault moves are generic faults and the stories of `stories.py` (the triggers of the
known bugs, broker/triggers, played by the simulation driver: `StoryMix`). The controllers
are a Raft quorum (3 voters, sometimes 5; dedicated nodes or, in some seeds, combined with
brokers) with faults of their own on a schedule of their own, at least one per seed
(`ControllerFaults`): kill -9 of a voter or
of the active controller, power loss of a voter, the active controller partitioned from
the other voters, from the brokers, or from everyone, a paused voter or active
controller. After the settle period the run checks liveness (`check_liveness`): one
active controller that every voter follows, every broker registered and unfenced, and an
acks=all write acknowledged on every partition that has a leader.

Safe configurations (what must never lose an acknowledged acks=all write), all
safeguards on and unclean leader election off:
- ``recovery="manual"`` (default): every fault, including power loss; no automatic
  unclean recovery (it may legitimately lose data beyond min.insync.replicas - 1 lossy
  shutdowns), so partitions whose candidates all restarted uncleanly stay unavailable.
- ``recovery="balanced"``: balanced unclean recovery, no power loss and no disk loss (a
  kill -9 keeps the page cache, so every LastKnownELR member is complete and log
  inspection is safe).
Other safeguard sets can be run to watch the invariants fire.
"""

from __future__ import annotations

import functools
import multiprocessing
import os
import random
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from broker.core.broker import RUNNING, BrokerConfig
from broker.core.controller import ControllerConfig
from broker.core.messages import NO_LEADER, TopicPartition
from broker.core.raft import RaftConfig
from broker.sim.cluster import ClusterSettings, SimCluster, with_safeguards_off
from broker.sim.invariants import Violation
from broker.sim.network import NetworkSettings
from broker.sim.stories import LOSSY, STORIES, StoryMix


@dataclass
class RunResult:
    seed: int
    safeguards_off: frozenset[str]
    steps: int
    acked_all: int
    acked_one: int
    violations: list[Violation] = field(default_factory=list)
    lost: dict[str, list[int]] = field(default_factory=dict)
    unavailable: list[str] = field(default_factory=list)
    config: dict[str, object] = field(default_factory=dict)
    faults: list[str] = field(default_factory=list)
    unclean_recoveries: int = 0

    @property
    def ok(self) -> bool:
        return not self.violations and not self.lost

    def summary(self) -> str:
        head = f"seed {self.seed}: {'ok' if self.ok else 'FAIL'} steps={self.steps} acked(all)={self.acked_all} acked(1)={self.acked_one}"
        lines = [head]
        if self.unavailable:
            lines.append(f"  unavailable at the end: {', '.join(self.unavailable)}")
        lines += [f"  violation {v}" for v in self.violations]
        lines += [f"  lost acked writes {tp}: offsets {offs}" for tp, offs in self.lost.items()]
        return "\n".join(lines)


def random_settings(rng: random.Random, recovery: str = "manual", controllers: int | None = None
                    ) -> tuple[ClusterSettings, dict[str, object]]:
    brokers = rng.choice([3, 3, 3, 4, 5])
    voters = controllers if controllers is not None else rng.choice([3] * 9 + [5])
    combined = voters <= brokers and rng.random() < 0.2
    cfg: dict[str, object] = {
        "brokers": brokers,
        "partitions": rng.choice([1, 1, 2]),
        "min_isr": rng.choice([1, 2, 2, 2]),
        "lag_ms": rng.choice([2000, 5000, 30000]),
        "max_delay_ms": rng.choice([2, 10, 40]),
        "drop": rng.choice([0.0, 0.0, 0.002, 0.01]),
        "reorder": rng.choice([0.0, 0.05]),
        "flush_interval_ms": rng.choice([0, 200, 2000, None]),
        "controllers": voters,
        "combined": combined,
        "pre_vote": rng.random() < 0.5,
        "check_quorum": rng.random() < 0.8,
    }
    settings = ClusterSettings(
        brokers=brokers,
        controllers=voters,
        combined=combined,
        raft=RaftConfig(pre_vote=cfg["pre_vote"], check_quorum=cfg["check_quorum"]),  # type: ignore[arg-type]
        broker=BrokerConfig(node_id=-1, replica_lag_time_max_ms=cfg["lag_ms"], request_timeout_ms=5000),  # type: ignore[arg-type]
        controller=ControllerConfig(unclean_recovery_strategy=recovery),
        network=NetworkSettings(1, cfg["max_delay_ms"], cfg["drop"], cfg["reorder"]),  # type: ignore[arg-type]
        flush_interval_ms=cfg["flush_interval_ms"],  # type: ignore[arg-type]
    )
    return settings, cfg


def random_run(
    seed: int,
    safeguards_off: frozenset[str] = frozenset(),
    duration_ms: int = 30000,
    settle_ms: int = 30000,
    recovery: str = "manual",
    stories: tuple[str, ...] | None = None,
    controllers: int | None = None,
    raft_unsafe: frozenset[str] = frozenset(),
) -> RunResult:
    """Run one seed; deterministic in its arguments. `stories`: the fault stories to play
    (`stories.STORIES`: the triggers' names, or their old names); None draws them from the
    seed. `controllers`: voters of the controller quorum; None draws them from the seed.
    `raft_unsafe`: Raft rules to break (`raft.UNSAFE_SWITCHES`, to watch the Raft
    invariants fire)."""
    _check_arguments(recovery, stories, controllers)
    rng = random.Random(seed * 7919 + 17)
    c, cfg, tps = _start_cluster(seed, rng, safeguards_off, recovery, controllers, raft_unsafe)
    start, end = c.now, c.now + duration_ms
    t = start
    while t < end:  # the workload
        t += rng.randint(10, 120)
        tp, acks = rng.choice(tps), (-1 if rng.random() < 0.8 else 1)
        c.at(t, lambda tp=tp, acks=acks: c.produce(tp, acks))
    faults: list[str] = []

    def log(what: str) -> None:
        faults.append(f"t={c.now} {what}")

    mix = StoryMix(c, rng, tps, end, cfg, log, stories)
    ControllerFaults(c, random.Random(rng.random()), end, recovery, log, lambda: mix.busy).schedule(start)
    generic = GenericFaults(c, rng, recovery, log, mix)
    t = start
    while True:
        t += rng.randint(500, 6000)
        if t >= end:
            break
        c.at(t, generic.strike)
    c.run_until(end)
    _final_heal(c, settle_ms, log)
    return _verdict(c, seed, safeguards_off, tps, cfg, faults)


def _check_arguments(recovery: str, stories: tuple[str, ...] | None, controllers: int | None) -> None:
    """Raise ValueError for arguments `random_run` cannot run with."""
    if recovery not in ("manual", "balanced"):
        raise ValueError(f"recovery must be manual or balanced, got {recovery!r}")
    unknown = [s for s in stories or () if s not in STORIES]
    if unknown:
        raise ValueError(f"unknown story {unknown[0]!r} (known: {', '.join(STORIES)})")
    if recovery == "balanced" and LOSSY & set(stories or ()):
        raise ValueError(f"stories {', '.join(sorted(LOSSY))} lose disks: not with balanced recovery")
    if controllers is not None and controllers < 1:
        raise ValueError(f"controllers must be at least 1, got {controllers}")


def _start_cluster(seed: int, rng: random.Random, safeguards_off: frozenset[str], recovery: str,
                   controllers: int | None, raft_unsafe: frozenset[str]
                   ) -> tuple[SimCluster, dict[str, object], list[TopicPartition]]:
    """The seed's cluster with every broker running and topic "t" created:
    (cluster, its configuration as reported, the topic's partitions)."""
    settings, cfg = random_settings(rng, recovery, controllers)
    cfg["recovery"] = recovery
    if safeguards_off:
        settings = with_safeguards_off(settings, safeguards_off)
    if raft_unsafe:
        settings = replace(settings, raft=replace(settings.raft, unsafe=raft_unsafe))
        cfg["raft_unsafe"] = sorted(raft_unsafe)
    c = SimCluster(seed, settings)
    c.run_for(3000)
    c.run_until_true(lambda: all(n.broker is not None and n.broker.state == RUNNING for n in c.brokers.values()), 15000)
    c.create_topic("t", cfg["partitions"], 3, {"min.insync.replicas": str(cfg["min_isr"])})  # type: ignore[arg-type]
    tps = [TopicPartition("t", i) for i in range(cfg["partitions"])]  # type: ignore[call-overload]
    return c, cfg, tps


def _final_heal(c: SimCluster, settle_ms: int, log: Callable[[str], None]) -> None:
    """The final phase: heal everything, restart everything, let the cluster settle."""
    c.net.heal()

    def restart_all() -> None:  # again while controlled shutdowns started before the heal complete
        for i in c.nodes:
            c.resume(i)
            c.start_broker(i)

    for k in range(0, min(settle_ms, 10000), 500):
        c.at(c.now + k, restart_all)
    log("final heal")
    c.run_for(settle_ms)


def _verdict(c: SimCluster, seed: int, safeguards_off: frozenset[str], tps: list[TopicPartition],
             cfg: dict[str, object], faults: list[str]) -> RunResult:
    """After the final heal: check the invariants and liveness, read back every acknowledgement."""
    c.oracle.check(c, c.now)
    stuck = check_liveness(c, tps)
    lost = {str(tp): [a.offset for a in acks] for tp, acks in c.oracle.lost_acked_writes(c).items()}
    return RunResult(
        seed=seed,
        safeguards_off=safeguards_off,
        steps=c.steps,
        acked_all=sum(1 for a in c.acks if a.acks == -1),
        acked_one=sum(1 for a in c.acks if a.acks == 1),
        violations=[*c.violations(), *stuck],
        lost=lost,
        unavailable=[str(tp) for tp in tps if c.leader_log(tp) is None],
        config=cfg,
        faults=faults,
        unclean_recoveries=sum(len(ctl.events) for ctl in c.controllers_seen),
    )


class GenericFaults:
    """The generic fault moves, one per strike unless a fault story takes the slot
    (`StoryMix.offer`): crash (kill -9) or power loss of a broker (power loss only with manual
    recovery), a broker isolated from every node or cut from the controllers, one link cut,
    the network healed, a controlled shutdown, and a restart while a broker is down."""

    KINDS = ("crash", "power-loss", "isolate", "isolate-controller", "cut", "heal", "controlled-shutdown")
    NEED_LIVE = ("crash", "power-loss", "controlled-shutdown", "isolate", "isolate-controller")

    def __init__(self, c: SimCluster, rng: random.Random, recovery: str, log: Callable[[str], None],
                 mix: StoryMix) -> None:
        self.c, self.rng, self.log, self.mix = c, rng, log, mix
        self.ids = sorted(c.brokers)
        self.weights = [2, 1 if recovery == "manual" else 0, 1, 1, 1, 2, 1]

    def strike(self) -> None:
        if self.mix.offer():
            return
        c, rng = self.c, self.rng
        live = [i for i in self.ids if c.running(i)]
        down = [i for i in self.ids if not c.running(i)]
        kinds, weights = list(self.KINDS), list(self.weights)
        if down:
            kinds.append("restart")
            weights.append(4)
        kind = rng.choices(kinds, weights)[0]
        if kind in self.NEED_LIVE and not live:
            return
        self.log(f"{kind} {self._apply(kind, live, down)}")

    def _apply(self, kind: str, live: list[int], down: list[int]) -> object:
        """Do fault `kind`; returns its target (None for heal)."""
        c, rng = self.c, self.rng
        v: object = None
        if kind == "crash":
            v = rng.choice(live)
            c.crash(v)
        elif kind == "power-loss":
            v = rng.choice(live)
            c.power_loss(v)
        elif kind == "restart":
            v = rng.choice(down)
            c.start_broker(v)
        elif kind == "isolate":
            v = rng.choice(live)
            c.net.isolate(v, list(c.nodes))
        elif kind == "isolate-controller":
            v = rng.choice(live)
            c.cut_from_controllers(v)
        elif kind == "cut":
            v = a, b = rng.sample(self.ids, 2)
            c.net.cut(a, b)
        elif kind == "heal":
            c.net.heal()
        else:
            v = rng.choice(live)
            c.controlled_shutdown(v)
        return v


class ControllerFaults:
    """The controller quorum's faults, on their own schedule: every 3-9 s from 0.5-5 s into
    the fault window, and at least one per seed. Each is undone after a while (a restart,
    the partition's links back, SIGCONT) unless the window ends first (the final heal
    does it). Stories' cuts are left alone: a partition takes back only the links it cut.

    While a fault story plays (`story_busy()`) a strike waits for it to end, as the
    generic faults do: a controller failover gives every broker a fresh session (a story
    waiting for a broker to be fenced would wait in vain), a quorum without a majority
    holds every ISR change, and a combined voter is one of the story's brokers. The
    last chance, 2 s before the window ends, strikes anyway if nothing struck yet."""

    KINDS = ("kill-voter", "kill-active", "power-loss-voter", "partition-active", "pause-voter", "pause-active")
    WEIGHTS = (2, 3, 1, 3, 1, 1)

    def __init__(self, c: SimCluster, rng: random.Random, end: int, recovery: str, log: Callable[[str], None],
                 story_busy: Callable[[], bool] = lambda: False) -> None:
        self.c, self.rng, self.end, self.log, self.story_busy = c, rng, end, log, story_busy
        # in combined mode a voter's machine is a broker's: no power loss with balanced recovery
        self.power_loss_ok = recovery == "manual" or not c.settings.combined
        self.struck = 0
        self.waiting = False

    def schedule(self, start: int) -> None:
        t = start + self.rng.randint(500, 5000)
        while t < self.end:
            self.c.at(t, self.strike)
            t += self.rng.randint(3000, 9000)
        self.c.at(self.end - 2000, lambda: self.struck or self.strike(last_chance=True))

    def strike(self, last_chance: bool = False) -> None:
        c, rng = self.c, self.rng
        if self.story_busy() and not last_chance:
            if not self.waiting:  # one strike waits for the story, the others are dropped
                self.waiting = True
                c.probe(c.now + 200, self._after_story)
            return
        kind = rng.choices(self.KINDS, [w if k != "power-loss-voter" or self.power_loss_ok else 0
                                        for k, w in zip(self.KINDS, self.WEIGHTS, strict=True)])[0]
        active = c.active_controller_id()
        live = [v for v in c.voter_ids if c.nodes[v].up and not c.nodes[v].paused]
        v = active if kind.endswith("-active") else (rng.choice(live) if live else None)
        if v is None or v not in live:
            self.log(f"controller {kind}: no target")
            return
        self.struck += 1
        back = rng.randint(100, 6000)
        if kind.startswith("kill"):
            c.crash(v)
            c.at(c.now + back, lambda: c.start_broker(v))
        elif kind == "power-loss-voter":
            c.power_loss(v)
            c.at(c.now + back, lambda: c.start_broker(v))
        elif kind.startswith("pause"):
            c.pause(v, back)
        else:
            scope = rng.choice(["voters", "brokers", "all"])
            others = [u for u in c.voter_ids if u != v] if scope == "voters" else (
                [b for b in c.brokers if b != v] if scope == "brokers" else [n for n in c.nodes if n != v])
            pairs = {p for u in others for p in ((v, u), (u, v))} - c.net.blocked
            c.net.blocked |= pairs
            back = rng.randint(1000, 8000)
            c.at(c.now + back, lambda: c.net.blocked.difference_update(pairs))
            kind = f"{kind} from {scope}"
        self.log(f"controller {kind} {v} for {back} ms")

    def _after_story(self) -> bool:
        if self.c.now >= self.end:
            return False
        if self.story_busy():
            self.c.probe(self.c.now + 200, self._after_story)
            return False
        self.waiting = False
        self.strike()
        return True


def check_liveness(c: SimCluster, tps: list[TopicPartition], timeout_ms: int = 20000) -> list[Violation]:
    """After the final heal and settle: within `timeout_ms` (each), one active controller
    that every voter follows; every broker registered and unfenced (RUNNING); an acks=all
    write acknowledged on every partition with a leader (partitions left without one by
    manual recovery are reported as unavailable, not here)."""
    if not c.run_until_true(lambda: c.agreed_quorum_leader() is not None, timeout_ms):
        roles = {v: (q.raft.role.value, q.raft.epoch, q.raft.leader_id, q.controller is not None)
                 for v, n in c.voters.items() if (q := n.quorum) is not None}
        return [Violation(c.now, "no-liveness", f"controller quorum: no active controller followed by every voter: {roles}")]

    def not_running() -> list[int]:
        return [i for i, n in c.brokers.items() if n.broker is None or n.broker.state != RUNNING]

    if not c.run_until_true(lambda: not not_running(), timeout_ms):
        states = {i: c.brokers[i].broker.state if c.brokers[i].broker else "down" for i in not_running()}  # type: ignore[union-attr]
        return [Violation(c.now, "no-liveness", f"brokers not registered and unfenced: {states}")]
    out = []
    for tp in tps:
        if c.leader(tp) == NO_LEADER:
            continue
        if c.produce_and_wait(tp, f"liveness {tp}".encode(), timeout_ms=timeout_ms) is None:
            out.append(Violation(c.now, "no-liveness",
                                 f"{tp}: no acks=all write acknowledged within {timeout_ms} ms (leader {c.leader(tp)})"))
    return out


def run_seeds(seeds: Iterable[int], jobs: int | None = None, **kw: Any) -> Iterator[RunResult]:
    """`random_run(seed, **kw)` for every seed, yielded in seed order, on `jobs` worker
    processes (None: one per CPU; 1: in this process). Each seed is deterministic wherever
    it runs; closing the iterator early stops the workers."""
    seeds = list(seeds)
    jobs = min(jobs or os.cpu_count() or 1, len(seeds))
    if jobs <= 1:
        yield from (random_run(s, **kw) for s in seeds)
        return
    with multiprocessing.get_context("fork").Pool(jobs) as pool:
        yield from pool.imap(functools.partial(_run_one, kw), seeds)


def _run_one(kw: dict[str, Any], seed: int) -> RunResult:
    return random_run(seed, **kw)
