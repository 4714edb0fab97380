"""Random runs: one seed chooses a cluster configuration, a fault schedule and a
workload, runs it on a `SimCluster` with the invariants checked after every step, heals
everything, lets the cluster settle, and reads back every acks=all acknowledgement.
The fault moves are generic faults and the stories of `stories.py` (the triggers of the
known bugs, `StoryMix`).

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

import random
from dataclasses import dataclass, field

from broker.core.broker import BrokerConfig
from broker.core.controller import ControllerConfig
from broker.core.messages import TopicPartition
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


def random_settings(rng: random.Random, recovery: str = "manual") -> tuple[ClusterSettings, dict[str, object]]:
    brokers = rng.choice([3, 3, 3, 4, 5])
    cfg: dict[str, object] = {
        "brokers": brokers,
        "partitions": rng.choice([1, 1, 2]),
        "min_isr": rng.choice([1, 2, 2, 2]),
        "lag_ms": rng.choice([2000, 5000, 30000]),
        "max_delay_ms": rng.choice([2, 10, 40]),
        "drop": rng.choice([0.0, 0.0, 0.002, 0.01]),
        "reorder": rng.choice([0.0, 0.05]),
        "flush_interval_ms": rng.choice([0, 200, 2000, None]),
    }
    settings = ClusterSettings(
        brokers=brokers,
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
) -> RunResult:
    """Run one seed; deterministic in its arguments. `stories`: the fault stories to play
    (`stories.STORIES`); None draws them from the seed."""
    if recovery not in ("manual", "balanced"):
        raise ValueError(f"recovery must be manual or balanced, got {recovery!r}")
    unknown = [s for s in stories or () if s not in STORIES]
    if unknown:
        raise ValueError(f"unknown story {unknown[0]!r} (known: {', '.join(STORIES)})")
    if recovery == "balanced" and LOSSY & set(stories or ()):
        raise ValueError(f"stories {', '.join(sorted(LOSSY))} lose disks: not with balanced recovery")
    rng = random.Random(seed * 7919 + 17)
    settings, cfg = random_settings(rng, recovery)
    cfg["recovery"] = recovery
    if safeguards_off:
        settings = with_safeguards_off(settings, safeguards_off)
    c = SimCluster(seed, settings)
    faults: list[str] = []
    c.run_for(3000)
    c.create_topic("t", cfg["partitions"], 3, {"min.insync.replicas": str(cfg["min_isr"])})  # type: ignore[arg-type]
    tps = [TopicPartition("t", i) for i in range(cfg["partitions"])]  # type: ignore[call-overload]
    start, end = c.now, c.now + duration_ms
    ids = sorted(c.brokers)

    t = start
    while t < end:  # the workload
        t += rng.randint(10, 120)
        tp, acks = rng.choice(tps), (-1 if rng.random() < 0.8 else 1)
        c.at(t, lambda tp=tp, acks=acks: c.produce(tp, acks))

    mix = StoryMix(c, rng, tps, end, cfg, lambda s: faults.append(f"t={c.now} {s}"), stories)

    def fault() -> None:
        if mix.offer():
            return
        live = [i for i in ids if c.running(i)]
        down = [i for i in ids if not c.running(i)]
        kinds = ["crash", "power-loss", "isolate", "isolate-controller", "cut", "heal", "controlled-shutdown", "controller-bounce"]
        weights = [2, 1 if recovery == "manual" else 0, 1, 1, 1, 2, 1, 0.5]
        if down:
            kinds.append("restart")
            weights.append(4)
        kind = rng.choices(kinds, weights)[0]
        if kind in ("crash", "power-loss", "controlled-shutdown", "isolate", "isolate-controller") and not live:
            return
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
            c.net.isolate(v, [*ids, 0])
        elif kind == "isolate-controller":
            v = rng.choice(live)
            c.net.cut(v, 0)
        elif kind == "cut":
            a, b = rng.sample(ids, 2)
            c.net.cut(a, b)
            v = (a, b)  # type: ignore[assignment]
        elif kind == "heal":
            c.net.heal()
            v = None  # type: ignore[assignment]
        elif kind == "controlled-shutdown":
            v = rng.choice(live)
            c.controlled_shutdown(v)
        else:
            c.crash_controller()
            c.at(c.now + rng.randint(100, 3000), c.start_controller)
            v = 0
        faults.append(f"t={c.now} {kind} {v}")

    t = start
    while True:
        t += rng.randint(500, 6000)
        if t >= end:
            break
        c.at(t, fault)
    c.run_until(end)
    # final phase: heal everything, restart everything, settle, read back
    c.net.heal()
    if c.controller is None:
        c.start_controller()
    for i in ids:
        c.start_broker(i)
    faults.append(f"t={c.now} final heal")
    c.run_for(settle_ms)
    c.oracle.check(c, c.now)
    lost = {str(tp): [a.offset for a in acks] for tp, acks in c.oracle.lost_acked_writes(c).items()}
    return RunResult(
        seed=seed,
        safeguards_off=safeguards_off,
        steps=c.steps,
        acked_all=sum(1 for a in c.acks if a.acks == -1),
        acked_one=sum(1 for a in c.acks if a.acks == 1),
        violations=list(c.oracle.violations),
        lost=lost,
        unavailable=[str(tp) for tp in tps if c.leader_log(tp) is None],
        config=cfg,
        faults=faults,
        unclean_recoveries=len(c.controller.events) if c.controller is not None else 0,
    )


def run_many(seeds: range, safeguards_off: frozenset[str] = frozenset(), **kw: object) -> list[RunResult]:
    return [random_run(s, safeguards_off, **kw) for s in seeds]  # type: ignore[arg-type]

