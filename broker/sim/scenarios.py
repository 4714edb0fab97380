"""Named scenarios, played on the simulation with fixed seeds.

The bug triggers (broker/triggers: one definition each, also played by the random runs'
story mix and on real nodes) are scenarios here as they are: `trigger_scenario(name, off,
seed)` plays one on a quiet three-broker cluster (one controller, no network noise, no other
fault; an acks=all producer writes every 40-100 ms, from 2 s before the trigger starts;
min.insync.replicas 2, nothing flushed
before a power loss) with the simulation driver, and returns a `ScenarioResult`: the
acknowledged acks=all writes missing from the final leader's log, the invariant violations
seen, the roles the trigger bound, and the partition's registration at each of its steps.
Tests (tests/sim/test_sim_scenarios.py) take the first seed of a few on which a trigger
reaches its bug with its safeguard off and assert both directions there (the safeguard
keeps the data, switching it off loses it), and what the trigger's steps say happens.

Other scenarios stay written out, because they check something a trigger does not:
`clean_elr_recovery` and `balanced_recovery` compare registrations step by step with the
seed's worked examples (seed 002, 5.2.2 and 5.3.3: fixed brokers, an exact ELR and
LastKnownELR at each step), and `consumer_after_failover` and
`idempotent_retry_across_failover` are regressions of client-facing rules, not of a
safeguard.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from broker.core.broker import BrokerConfig
from broker.core.controller import ControllerConfig
from broker.core.messages import (
    FetchResponse,
    ProduceRequest,
    ProduceResponse,
    TopicPartition,
)
from broker.core.metadata import PartitionRegistration
from broker.records import encode_batch as encode
from broker.sim.clients import Ack
from broker.sim.cluster import ClusterSettings, SimCluster, with_safeguards_off
from broker.sim.driver import MessageFilters, TriggerPlay, run
from broker.sim.invariants import Violation
from broker.triggers import TRIGGERS, resolve

TP = TopicPartition("t", 0)


@dataclass
class ScenarioResult:
    acked: list[Ack]
    lost: list[Ack]
    violations: list[Violation]
    steps: dict[str, PartitionRegistration] = field(default_factory=dict)
    final_leader: int = -1
    unclean_events: list[str] = field(default_factory=list)
    roles: dict[str, object] = field(default_factory=dict)
    log: list[str] = field(default_factory=list)

    def violation_names(self) -> set[str]:
        return {v.name for v in self.violations}


def _cluster(seed: int, off: frozenset[str], flush_interval_ms: int | None = None, lag_ms: int = 5000,
             strategy: str = "balanced") -> SimCluster:
    settings = ClusterSettings(
        brokers=3,
        broker=BrokerConfig(node_id=-1, replica_lag_time_max_ms=lag_ms, request_timeout_ms=5000),
        controller=ControllerConfig(unclean_recovery_strategy=strategy),
        flush_interval_ms=flush_interval_ms,
    )
    c = SimCluster(seed, with_safeguards_off(settings, off) if off else settings)
    c.run_for(3000)
    return c


def _finish(c: SimCluster, steps: dict[str, PartitionRegistration]) -> ScenarioResult:
    c.run_for(20000)
    steps["final"] = c.registration(TP)
    lost = c.oracle.lost_acked_writes(c).get(TP, [])
    assert c.controller is not None
    return ScenarioResult(
        acked=[a for a in c.acks if a.acks == -1],
        lost=lost,
        violations=list(c.oracle.violations),
        steps=steps,
        final_leader=c.leader(TP),
        unclean_events=[e.how for e in c.controller.events],
    )


def trigger_scenario(name: str, off: frozenset[str] = frozenset(), seed: int = 1,
                     unclean: bool = False, lag_ms: int = 5000) -> ScenarioResult:
    """Play trigger `name` (or an old name of it) on a quiet three-broker cluster (module
    docstring) with `off` switched off, on cluster seed `seed`. `unclean`: the
    topic has unclean.leader.election.enable=true; `lag_ms`: the brokers' replica.lag.time.max.ms."""
    trigger = resolve(name)
    c = _cluster(seed, off, lag_ms=lag_ms)
    c.create_topic("t", 1, 3, {"min.insync.replicas": "2", "unclean.leader.election.enable": str(unclean).lower()})
    rng = random.Random(seed)
    log: list[str] = []
    steps = {"initial": c.registration(TP)}

    def record(step: str, ok: bool) -> None:
        ctl = c.latest_controller
        if ok and ctl is not None and TP in ctl.image.partitions:
            steps[step] = ctl.image.partitions[TP]

    done: list[bool] = []

    def write() -> None:
        if not done:
            c.produce(TP, -1)
            c.at(c.now + rng.randint(40, 100), write)

    write()
    c.run_for(2000)  # records to lose
    play = TriggerPlay(c, TP, trigger, rng, lambda s: log.append(f"t={c.now} {s}"), MessageFilters(c), record)
    run(c, play.steps(), c.now + 120000, lambda: done.append(True))
    c.run_until_true(lambda: bool(done), 120000)
    done.append(True)
    c.net.heal()
    for i in c.nodes:
        c.resume(i)
        c.start_broker(i)
    c.run_until_true(lambda: c.controller is not None and all(c.running(i) for i in c.nodes), 20000)
    r = _finish(c, steps)
    r.roles, r.log = dict(play.roles), log
    return r


def _wait_for_isr(c: SimCluster, isr: tuple[int, ...], timeout_ms: int = 30000) -> bool:
    """Write acks=1 records every 500 ms until the ISR is `isr`: Kafka shrinks the ISR only
    when a follower falls behind a moving LEO (a stalled follower at the LEO is in sync)."""
    deadline = c.now + timeout_ms
    n = 0
    while c.now < deadline:
        if c.registration(TP).isr == isr:
            return True
        n += 1
        c.produce_async(TP, f"filler-{c.now}-{n}".encode(), acks=1)
        c.run_until_true(lambda: c.registration(TP).isr == isr, 500)
    return c.registration(TP).isr == isr


def _must(ok: bool, what: str) -> None:
    if not ok:
        raise AssertionError(f"scenario step did not happen: {what}")


def clean_elr_recovery(off: frozenset[str] = frozenset(), seed: int = 2) -> ScenarioResult:
    """Seed 002, 5.2.2: ISR [1,2,3] shrinks to [1] with 3 in the ELR; leader 1 has a lossy
    unclean shutdown; 3 is elected from the ELR; 1 re-registers, catches up, rejoins."""
    c = _cluster(seed, off, flush_interval_ms=None)
    c.create_topic("t", 1, 3, {"min.insync.replicas": "2"})
    steps = {"initial": c.registration(TP)}
    for i in range(5):
        _must(c.produce_and_wait(TP, f"a{i}".encode()) is not None, "write acked")
    c.net.cut(1, 2)
    _must(_wait_for_isr(c, (1, 3)), "2 leaves the ISR")
    steps["2 removed"] = c.registration(TP)
    for i in range(5):
        _must(c.produce_and_wait(TP, f"b{i}".encode()) is not None, "write acked on [1,3]")
    c.net.cut(1, 3)
    _must(_wait_for_isr(c, (1,)), "3 leaves the ISR")
    steps["3 removed"] = c.registration(TP)
    c.produce_async(TP, b"rejected")  # NOT_ENOUGH_REPLICAS: the HWM is frozen
    c.run_for(100)
    c.power_loss(1)
    _must(c.run_until_true(lambda: c.leader(TP) == 3, 20000), "3 elected from the ELR")
    steps["3 elected"] = c.registration(TP)
    c.net.heal()
    c.net.isolate(2, [1, 3])  # 2 stays out, as in the seed's example
    c.start_broker(1)
    _must(c.run_until_true(lambda: c.registration(TP).isr == (1, 3), 30000), "1 rejoins the ISR")
    steps["1 rejoined"] = c.registration(TP)
    return _finish(c, steps)


def balanced_recovery(off: frozenset[str] = frozenset(), seed: int = 3) -> ScenarioResult:
    """Seed 002, 5.3.3: a power outage takes all three brokers down; the controller fences
    them one by one (ELR ends [2,3]); 1 and 3 come back having lost data, 2 intact; all
    restart uncleanly (LastKnownELR [2,3]); balanced recovery inspects the logs of 2 and 3
    and elects 2, the highest epoch and offset: no committed data lost."""
    c = _cluster(seed, off, flush_interval_ms=None)
    c.create_topic("t", 1, 3, {"min.insync.replicas": "2", "unclean.recovery.strategy": "balanced"})
    steps = {"initial": c.registration(TP)}
    for i in range(10):
        _must(c.produce_and_wait(TP, f"v{i}".encode()) is not None, "write acked")
    c.brokers[2].disk.flush_all()
    for i in (1, 2, 3):  # each lost once the previous is fenced: the order does not hang on heartbeat phases
        c.power_loss(i)
        _must(c.run_until_true(lambda i=i: i not in c.registration(TP).isr, 20000), f"{i} fenced")
    _must(c.registration(TP).elr == (2, 3) and not c.registration(TP).isr, "fenced one by one")
    steps["all fenced"] = c.registration(TP)
    for i in (1, 2, 3):
        c.start_broker(i)
        c.run_for(1000)
        steps[f"{i} registered"] = c.registration(TP)
    _must(c.run_until_true(lambda: c.leader(TP) != -1, 30000), "recovery elected a leader")
    steps["recovered"] = c.registration(TP)
    return _finish(c, steps)


SCENARIOS = {
    **{t.name: (lambda off=frozenset(), seed=1, name=t.name: trigger_scenario(name, off, seed), t.safeguard)
       for t in TRIGGERS.values()},
    "clean-elr-recovery": (clean_elr_recovery, "elr"),
    "balanced-recovery": (balanced_recovery, "elr"),
}


@dataclass
class ConsumerScenarioResult:
    """What a consumer saw across a story: its reads (offset, value) in order, its
    rewinds (position before, time), and the acknowledged writes."""

    reads: list[tuple[int, bytes]]
    rewinds: list[tuple[int, int]]
    acked: list[Ack]
    violations: list[Violation]
    steps: dict[str, PartitionRegistration] = field(default_factory=dict)
    leader_hwm_at_read: int = -1  # the old leader's HWM when the consumer had read up to it
    new_leader_hwm: int = -1  # the new leader's (frozen) HWM while the consumer polled it
    position_on_new_leader: int = -1


def consumer_after_failover(seed: int = 9) -> ConsumerScenarioResult:
    """A new leader's HWM lags the old leader's (followers learn the HWM one fetch
    later, KIP-207): a consumer that read up to the old leader's HWM then fetches from
    the new leader at an offset above its HWM but within its log. Kafka answers such a
    fetch with no records (the read stops at the HWM; OFFSET_OUT_OF_RANGE only beyond
    the LEO). Answering OFFSET_OUT_OF_RANGE (the bug, found by `wrack test` with acks=1
    and an isolated leader, and after membership changes) makes librdkafka reset the
    consumer to the earliest offset: a nonmonotonic poll. Here the new leader's HWM is
    held back (its follower cannot fetch, so the ISR shrinks below min ISR and the HWM
    stays frozen, KIP-966) while the consumer polls it; then the network heals."""
    c = _cluster(seed, frozenset())
    c.create_topic("t", 1, 3, {"min.insync.replicas": "2"})
    reg = c.registration(TP)
    old, new, other = reg.leader, *[r for r in reg.replicas if r != reg.leader]
    steps = {"created": reg}
    for i in range(5):
        _must(c.produce_and_wait(TP, f"a{i}".encode()) is not None, f"a{i} acked")
    c.run_for(1000)  # every replica at HWM 5

    def hold_hwm_only(src: int | str, to: int | str, msg: object) -> int:
        # the old leader's fetch responses that carry no records (only a new HWM) to its
        # followers are held for a minute: the followers keep the records, not the HWM
        if src == old and to in (new, other) and isinstance(msg, FetchResponse) and not any(p.records for p in msg.partitions):
            return 60000
        return 0

    c.extra_delay = hold_hwm_only
    _must(c.produce_and_wait(TP, b"b5") is not None, "b5 acked")
    cons = c.consumer(TP)
    _must(c.run_until_true(lambda: cons.position == 6, 5000), "the consumer read b5 from the old leader")
    leader_hwm = c.hwm(old, TP)
    steps["read"] = c.registration(TP)
    c.net.blocked.add((other, new))  # the other follower cannot fetch from the new leader
    c.controlled_shutdown(old)  # leadership moves at once
    _must(c.run_until_true(lambda: c.leader(TP) == new and c.hwm(new, TP) >= 0, 5000), "new leader")
    steps["failover"] = c.registration(TP)
    c.run_for(8000)  # the consumer polls the new leader; its ISR shrinks to itself, HWM frozen below 6
    steps["frozen"] = c.registration(TP)
    new_hwm, position = c.hwm(new, TP), cons.position
    c.extra_delay = None
    c.net.heal()
    c.start_broker(old)
    for i in range(3):
        _must(c.produce_and_wait(TP, f"c{i}".encode()) is not None, f"c{i} acked")
    c.run_until_true(lambda: cons.position == 9, 10000)
    c.run_for(1000)
    return ConsumerScenarioResult(cons.records, cons.rewinds, [a for a in c.acks if a.acks == -1],
                                  list(c.oracle.violations), steps, leader_hwm, new_hwm, position)


@dataclass
class IdempotentScenarioResult:
    """An idempotent producer's batch acknowledged by a leader that died before its
    answer arrived, then retried (same producer id, epoch and sequence) at the new
    leader: the answers and the values in the new leader's log."""

    first_answer: object | None
    retry_answer: object | None
    values: list[bytes]
    violations: list[Violation]
    steps: dict[str, PartitionRegistration] = field(default_factory=dict)


def idempotent_retry_across_failover(seed: int = 10) -> IdempotentScenarioResult:
    """KIP-98 across a failover: followers keep the producer state of what they
    replicate, so a retry that reaches the new leader is recognised (answered with the
    first copy's offset) instead of being appended a second time."""
    c = _cluster(seed, frozenset())
    c.create_topic("t", 1, 3, {"min.insync.replicas": "2"})
    reg = c.registration(TP)
    old = reg.leader
    steps = {"created": reg}
    broker = c.brokers[old].broker
    assert broker is not None
    err, pid = broker.init_producer_id()
    _must(err.name == "none" and pid >= 0, "a producer id")
    client = c.recorder("idem")

    def batch(seq: int) -> bytes:
        return encode([f"s{seq}".encode()], producer_id=pid, producer_epoch=0, base_sequence=seq)

    def answer(cid: int) -> ProduceResponse | None:
        return next((m for _, m in client.received if isinstance(m, ProduceResponse) and m.correlation_id == cid), None)

    for seq in range(3):
        c.send("idem", old, ProduceRequest(seq + 1, TP, -1, batch(seq)))
        _must(c.run_until_true(lambda seq=seq: answer(seq + 1) is not None, 5000), f"s{seq} acknowledged")
    # s3: appended and replicated, but its answer never reaches the producer
    c.extra_delay = lambda src, to, msg: 60000 if to == "idem" and isinstance(msg, ProduceResponse) else 0
    c.send("idem", old, ProduceRequest(10, TP, -1, batch(3)))
    _must(c.run_until_true(lambda: c.hwm(old, TP) == 4, 5000), "s3 committed")
    c.controlled_shutdown(old)
    _must(c.run_until_true(lambda: c.leader(TP) not in (old, -1), 5000), "a new leader")
    new = c.leader(TP)
    steps["failover"] = c.registration(TP)
    c.extra_delay = None
    c.run_for(500)
    c.send("idem", new, ProduceRequest(11, TP, -1, batch(3)))  # the producer's retry
    _must(c.run_until_true(lambda: answer(11) is not None, 5000), "the retry answered")
    c.run_for(1000)
    return IdempotentScenarioResult(answer(10), answer(11), c.values(new, TP), list(c.oracle.violations), steps)
