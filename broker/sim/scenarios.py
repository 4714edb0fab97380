"""Named scenarios from the seed documents, played on the simulation.

Each function runs one story with a given set of safeguards switched off and returns a
`ScenarioResult`: the acknowledged acks=all writes missing from the final leader's log,
the invariant violations seen, and the partition registrations at the story's steps
(to compare with the seed's text). Tests assert both directions: the safeguard keeps the
data, switching it off loses it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from broker.core import safeguards as sg
from broker.core.broker import BrokerConfig
from broker.core.controller import ControllerConfig
from broker.core.messages import (
    AlterPartitionRequest,
    FetchResponse,
    ProduceRequest,
    ProduceResponse,
    TopicPartition,
)
from broker.core.metadata import PartitionRegistration
from broker.core.replica import FOLLOWER, LEADER
from broker.records import encode_batch as encode
from broker.sim.clients import Ack
from broker.sim.cluster import CONTROLLER, ClusterSettings, SimCluster, with_safeguards_off
from broker.sim.invariants import Violation

TP = TopicPartition("t", 0)


@dataclass
class ScenarioResult:
    acked: list[Ack]
    lost: list[Ack]
    violations: list[Violation]
    steps: dict[str, PartitionRegistration] = field(default_factory=dict)
    final_leader: int = -1
    unclean_events: list[str] = field(default_factory=list)

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


def _replica(c: SimCluster, i: int):  # noqa: ANN202
    b = c.brokers[i].broker
    return None if b is None else b.partitions.get(TP)


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


def hw_truncation(off: frozenset[str] = frozenset(), seed: int = 1) -> ScenarioResult:
    """Seed 000 (KIP-101): a follower truncates to its stale HW, then is elected.

    Replicas A=1 (leader), B=2, C=3, min.insync.replicas=2. m1 is committed on all three
    and acknowledged, but C never hears the HW that covers it. A is cut off from the
    controller and fenced; B is elected and C becomes its follower: pre-KIP-101, C
    truncates to its HW and drops m1. B dies before C re-fetches; C is elected. With
    epochs (the `epoch-truncation` safeguard), C keeps m1: its last fetched epoch shows
    no divergence. (KRaft removes a restarting broker from the ISR at registration, so
    the seed's restart of B alone cannot lose data here; the loss needs the election.)
    """
    c = _cluster(seed, off)
    c.create_topic("t", 1, 3, {"min.insync.replicas": "2"})
    steps = {"created": c.registration(TP)}
    _must(c.produce_and_wait(TP, b"m0") is not None, "m0 acked")
    c.run_for(1000)
    c.produce_async(TP, b"m1")
    _must(c.run_until_true(lambda: c.brokers[3].disk.log(TP).log_end_offset == 2, 5000), "C fetched m1")
    c.net.blocked.add((1, 3))  # C never gets a fetch response carrying HW 2
    _must(c.run_until_true(lambda: any(a.value == b"m1" for a in c.acks), 5000), "m1 acked")
    steps["m1 acked"] = c.registration(TP)
    c.net.blocked.add((2, 3))  # and cannot re-fetch from B either
    c.net.cut(1, CONTROLLER)
    _must(c.run_until_true(lambda: (r := _replica(c, 3)) is not None and r.role == FOLLOWER and r.leader_id == 2, 20000),
          "C follows B")
    steps["B elected"] = c.registration(TP)
    c.crash(2)
    _must(c.run_until_true(lambda: c.leader(TP) == 3, 20000), "C elected")
    steps["C elected"] = c.registration(TP)
    c.run_for(1000)
    c.net.heal()
    c.start_broker(2)
    return _finish(c, steps)


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


def last_replica_standing(off: frozenset[str] = frozenset(), seed: int = 4) -> ScenarioResult:
    """KIP-966's motivating story: the ISR shrinks to the leader 1; 1 has a lossy unclean
    shutdown. With the `elr` safeguard, 3 (in the ELR, holding every acked write) is
    elected. Without it (Kafka 3.5), the ISR stays [1], 1 is re-elected after its restart
    with an empty log and 2 and 3 truncate: acknowledged writes are lost globally."""
    c = _cluster(seed, off, flush_interval_ms=None)
    c.create_topic("t", 1, 3, {"min.insync.replicas": "2"})
    steps = {"initial": c.registration(TP)}
    _must(c.produce_and_wait(TP, b"r1") is not None, "r1 acked")
    c.net.cut(1, 2)
    _must(_wait_for_isr(c, (1, 3)), "2 leaves the ISR")
    _must(c.produce_and_wait(TP, b"r2") is not None, "r2 acked")
    c.net.cut(1, 3)
    _must(_wait_for_isr(c, (1,)), "3 leaves the ISR")
    steps["ISR [1]"] = c.registration(TP)
    c.produce_async(TP, b"r3-acks1", acks=1)
    c.run_for(200)
    c.power_loss(1)
    c.run_for(12000)
    steps["1 fenced"] = c.registration(TP)
    c.net.heal()
    c.start_broker(1)
    _must(c.run_until_true(lambda: c.leader(TP) != -1, 30000), "a leader")
    steps["after restart"] = c.registration(TP)
    return _finish(c, steps)


def unclean_election(off: frozenset[str] = frozenset(), seed: int = 5, unclean: bool = True) -> ScenarioResult:
    """docs/protocol-rules.md "Unclean leader election": 3 falls out of the ISR; r is
    committed on [1,2]; 1 and 2 die.
    With unclean.leader.election.enable=true, 3 is elected at once and r is truncated
    away when 1 and 2 return. With it false, the partition waits (then balanced recovery
    picks 1 or 2, which kept r)."""
    c = _cluster(seed, off)
    c.create_topic("t", 1, 3, {"min.insync.replicas": "2", "unclean.leader.election.enable": str(unclean).lower()})
    steps = {"initial": c.registration(TP)}
    _must(c.produce_and_wait(TP, b"r0") is not None, "r0 acked")
    c.net.cut(1, 3)
    _must(_wait_for_isr(c, (1, 2)), "3 leaves the ISR")
    for i in range(3):
        _must(c.produce_and_wait(TP, f"r{i + 1}".encode()) is not None, "write acked on [1,2]")
    c.run_for(500)
    c.crash(1)
    c.crash(2)
    c.run_for(12000)
    steps["1 and 2 down"] = c.registration(TP)
    c.net.heal()
    c.start_broker(1)
    c.start_broker(2)
    _must(c.run_until_true(lambda: c.leader(TP) != -1, 30000), "a leader")
    steps["after restart"] = c.registration(TP)
    return _finish(c, steps)


def leso_rule(off: frozenset[str] = frozenset(), seed: int = 6) -> ScenarioResult:
    """docs/protocol-rules.md "The LESO rule" (Vanlightly 6.4.1/6.5.3): 3 is fenced (cut
    from the controller), leaving ISR [1,2]. A is committed on 1 and 2, but 2 never hears
    the HW covering it. 1 dies; 2 leads with a stale local HWM (before A) and LESO after A.
    3 returns and fetches from 2 (but gets no records): its fetch offset reaches the stale
    HWM, so without the LESO rule it joins the ISR though it lacks A; 2 dies and 3 is
    elected without A."""
    c = _cluster(seed, off)
    c.create_topic("t", 1, 3, {"min.insync.replicas": "2"})
    steps = {"initial": c.registration(TP)}
    _must(c.produce_and_wait(TP, b"a0") is not None, "a0 acked")
    c.net.isolate(3, [1, 2, CONTROLLER])
    _must(c.run_until_true(lambda: c.registration(TP).isr == (1, 2), 20000), "3 fenced out of the ISR")
    target = c.brokers[1].disk.log(TP).log_end_offset + 1
    c.produce_async(TP, b"A")
    _must(c.run_until_true(lambda: c.brokers[2].disk.log(TP).log_end_offset == target, 5000), "2 fetched A")
    c.net.blocked.add((1, 2))
    _must(c.run_until_true(lambda: any(a.value == b"A" for a in c.acks), 5000), "A acked")
    c.crash(1)
    _must(c.run_until_true(lambda: (r := _replica(c, 2)) is not None and r.role == LEADER, 20000), "2 elected")
    steps["2 elected"] = c.registration(TP)
    c.net.heal()
    c.net.blocked.add((2, 3))  # 3's fetches reach 2, but no records come back
    c.run_for(10000)
    steps["3 back"] = c.registration(TP)
    c.crash(2)
    c.run_for(12000)
    steps["2 down"] = c.registration(TP)
    c.net.heal()
    return _finish(c, steps)


def stale_broker_epoch(off: frozenset[str] = frozenset(), seed: int = 7) -> ScenarioResult:
    """KIP-903 (KAFKA-14617): replicas 1 (leader) and 2, min.insync.replicas=1. 2 catches up
    and 1 proposes adding it, but the AlterPartition is slow to reach the controller. 2
    meanwhile loses its disk (power loss, nothing flushed), restarts and re-registers with
    a new broker epoch. The stale proposal arrives: with the broker-epoch check it is
    INELIGIBLE_REPLICA; without it 2 joins the ISR with an empty log, 1 dies, 2 is elected."""
    c = _cluster(seed, off, flush_interval_ms=None)
    c.create_topic("t", 1, 2, {"min.insync.replicas": "1"})
    steps = {"initial": c.registration(TP)}
    leader, follower = c.registration(TP).replicas
    _must(c.produce_and_wait(TP, b"k0") is not None, "k0 acked")
    c.net.cut(leader, follower)
    _must(_wait_for_isr(c, (leader,)), "the follower leaves the ISR")
    for i in range(3):
        _must(c.produce_and_wait(TP, f"k{i + 1}".encode()) is not None, "write acked on [leader]")
    steps["ISR [leader]"] = c.registration(TP)
    # every AlterPartition is slow (the leader sends an unanswered one again after its
    # request timeout: the copies are slow too)
    c.extra_delay = lambda src, to, msg: 15000 if isinstance(msg, AlterPartitionRequest) else 0
    c.net.blocked.discard((leader, follower))
    c.net.blocked.discard((follower, leader))
    _must(c.run_until_true(lambda: (r := _replica(c, leader)) is not None and r.pending_alter is not None, 10000),
          "the leader proposes the follower")
    c.power_loss(follower)
    c.net.cut(leader, follower)  # the restarted follower stays empty
    c.start_broker(follower)
    c.run_for(16000)
    c.extra_delay = None
    steps["stale proposal arrived"] = c.registration(TP)
    c.crash(leader)
    c.run_for(12000)
    c.net.heal()
    steps["leader down"] = c.registration(TP)
    c.start_broker(leader)
    return _finish(c, steps)


def stale_partition_epoch(off: frozenset[str] = frozenset(), seed: int = 8) -> ScenarioResult:
    """A stale AlterPartition (KIP-497's concurrency control): leader 1 proposes ISR [1,3]
    (dropping the lagging 2) at partition epoch 0 and the request is held up in the
    network. 3 is then cut off and fenced, the ISR shrinks to [1] and writes commit on 1
    alone (min.insync.replicas=1). 3 is unfenced again (same broker epoch) but stays
    behind. The old request arrives: with the partition-epoch check it is
    INVALID_UPDATE_VERSION; without it the ISR becomes [1,3] and 3 is elected when 1 dies."""
    c = _cluster(seed, off, lag_ms=3000)
    c.create_topic("t", 1, 3, {"min.insync.replicas": "1"})
    steps = {"initial": c.registration(TP)}
    _must(c.produce_and_wait(TP, b"s0") is not None, "s0 acked")
    held: list[int] = []

    def hold_first_alter(src: int | str, to: int | str, msg: object) -> int:
        if isinstance(msg, AlterPartitionRequest) and not held:
            held.append(c.now + 20000)
            return 20000
        return 0

    c.extra_delay = hold_first_alter
    c.net.cut(1, 2)
    n = 0
    while not held and n < 60:
        n += 1
        c.produce_async(TP, f"filler-{n}".encode(), acks=1)
        c.run_until_true(lambda: bool(held), 500)
    _must(bool(held), "1 proposes [1,3]")
    c.net.isolate(3, [1, 2, CONTROLLER])
    _must(_wait_for_isr(c, (1,), 30000), "the ISR shrinks to [1]")
    steps["ISR [1]"] = c.registration(TP)
    for i in range(3):
        _must(c.produce_and_wait(TP, f"s{i + 1}".encode()) is not None, "write acked on [1]")
    for pair in ((3, CONTROLLER), (CONTROLLER, 3)):
        c.net.blocked.discard(pair)  # 3 is back with the controller, not with the leader
    _must(held[0] > c.now, "the held request is still in flight")
    c.run_until(held[0] + 20)
    steps["stale proposal arrived"] = c.registration(TP)
    c.extra_delay = None
    c.crash(1)
    c.run_for(12000)
    steps["leader down"] = c.registration(TP)
    c.net.heal()
    c.start_broker(1)
    return _finish(c, steps)


SCENARIOS = {
    "hw-truncation": (hw_truncation, sg.EPOCH_TRUNCATION),
    "clean-elr-recovery": (clean_elr_recovery, sg.ELR),
    "balanced-recovery": (balanced_recovery, sg.ELR),
    "last-replica-standing": (last_replica_standing, sg.ELR),
    "unclean-election": (unclean_election, sg.CLEAN_ELECTION_ONLY),
    "leso-rule": (leso_rule, sg.LESO_CHECK),
    "stale-broker-epoch": (stale_broker_epoch, sg.BROKER_EPOCH_CHECK),
    "stale-partition-epoch": (stale_partition_epoch, sg.PARTITION_EPOCH_CHECK),
}

__all__ = ["SCENARIOS", "ScenarioResult", "replace"]


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
