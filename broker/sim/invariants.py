"""The seed invariants, checked on the whole simulated cluster after every step.

Ground truth, as in Vanlightly's TLA+ specs: the True HWM of a partition is the highest
HWM any leader reached; `committed[tp]` holds the identity (leader epoch, batch CRC,
index in batch) of every offset below it, taken from that leader's log when it advanced.
Checks (names as reported):

- ``leader-completeness``: the controller's leader, once it acts as leader in that
  epoch, holds every committed offset with the committed content.
- ``leader-candidate-completeness``: every running member of the controller's ISR and
  ELR (registered with its current broker epoch) holds every committed offset.
- ``log-matching``: every replica's log below its local HWM equals the committed prefix.
- ``hwm-monotonicity``: a leader's HWM never decreases within its leader epoch.
- ``one-leader-per-epoch``: at most one broker acts as leader in a given leader epoch.
- ``acked-write-lost``: every acks=all acknowledgement names a committed offset holding
  that record (and, through leader completeness, it stays there).
- ``valid-controller-state`` (the TLA+ ValidControllerIsrAndElr): ISR and ELR are
  disjoint subsets of the replicas, the leader is in the ISR, ELR is empty once the ISR
  reaches min.insync.replicas, and (with ELR) no fenced broker is in the ISR.

The oracle reads the cluster through `ObservedCluster` (the `SimCluster` of
broker/sim/cluster.py is one), so this module does not import the cluster.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from broker.core.broker import Broker
from broker.core.controller import Controller
from broker.core.messages import NO_LEADER, TopicPartition
from broker.core.replica import LEADER
from broker.sim.clients import Ack
from broker.sim.disk import SimDisk
from broker.sim.memlog import InMemoryPartitionLog

Identity = tuple[int, int, int]


class ObservedNode(Protocol):
    """What the oracle reads of one simulated machine."""

    @property
    def id(self) -> int: ...

    @property
    def disk(self) -> SimDisk: ...

    @property
    def broker(self) -> Broker | None:
        """The running broker, None while the machine is down (or has no broker)."""


class ObservedCluster(Protocol):
    """What the oracle reads of the simulated cluster."""

    @property
    def controller(self) -> Controller | None:
        """The active controller, None during elections."""

    @property
    def brokers(self) -> Mapping[int, ObservedNode]: ...

    def leader_log(self, tp: TopicPartition) -> InMemoryPartitionLog | None:
        """The log of the controller's current leader of `tp`, if it is running."""


@dataclass(frozen=True)
class Violation:
    time: int
    name: str
    detail: str

    def __str__(self) -> str:
        return f"t={self.time}ms {self.name}: {self.detail}"


@dataclass
class Oracle:
    committed: dict[TopicPartition, list[Identity]] = field(default_factory=dict)
    acked: dict[TopicPartition, dict[int, Ack]] = field(default_factory=dict)
    epoch_leader: dict[tuple[TopicPartition, int], int] = field(default_factory=dict)
    leader_hwm: dict[tuple[int, TopicPartition, int], int] = field(default_factory=dict)
    verified: dict[tuple[int, TopicPartition], int] = field(default_factory=dict)
    violations: list[Violation] = field(default_factory=list)
    _reported: set[tuple[str, object]] = field(default_factory=set)
    _checked_image: tuple[int, int] = (-1, -1)
    _leader_seen: dict[tuple[int, TopicPartition], tuple[int, int]] = field(default_factory=dict)

    def _violate(self, now: int, name: str, key: object, detail: str) -> None:
        if (name, key) not in self._reported:
            self._reported.add((name, key))
            self.violations.append(Violation(now, name, detail))

    def on_ack(self, ack: Ack, now: int) -> None:
        if ack.acks != -1:
            return
        self.acked.setdefault(ack.tp, {})[ack.offset] = ack
        cl = self.committed.get(ack.tp, [])
        if ack.offset >= len(cl) or cl[ack.offset][1] != ack.crc:
            self._violate(now, "acked-write-lost", (ack.tp, ack.offset), f"{ack.tp}@{ack.offset} acked but not committed")

    def _verify(self, node: int, tp: TopicPartition, log: InMemoryPartitionLog, upto: int) -> int | None:
        """Check log[verified, upto) against the committed prefix; the first bad offset or None."""
        cl = self.committed.get(tp, [])
        key = (node, tp)
        v = self.verified.get(key, 0)
        if upto <= v:
            return None
        if upto > len(cl) or upto > log.log_end_offset:
            return min(len(cl), log.log_end_offset, upto)
        off = v
        while off < upto:
            b = log.batch_at(off)
            if b is None:
                return off
            end = min(b.last + 1, upto)
            for o in range(off, end):
                if cl[o] != (b.epoch, b.crc, o - b.base):
                    return o
            off = end
        self.verified[key] = upto
        return None

    def check(self, cluster: ObservedCluster, now: int) -> None:
        """Evaluate every invariant on the cluster's current state (after every step: the
        fast paths skip what `verified` already covers)."""
        ctl = cluster.controller
        image = ctl.image if ctl is not None else None
        verified = self.verified
        live = []
        for node in cluster.brokers.values():
            for tp, log in node.disk.logs.items():
                if log.truncation_mark is not None:
                    m = log.pop_truncation_mark()
                    if verified.get((node.id, tp), 0) > m:  # type: ignore[operator]
                        verified[(node.id, tp)] = m  # type: ignore[assignment]
            if node.broker is not None:
                live.append((node.id, node.broker))
        self._check_leaders(live, now)
        if image is not None:
            self._check_candidates(cluster, ctl, image, now)
        self._check_log_matching(live, now)

    def _check_leaders(self, live: list[tuple[int, Any]], now: int) -> None:
        """1. True HWM, leaders per epoch, HWM monotonicity."""
        committed = self.committed
        seen = self._leader_seen
        for nid, broker in live:
            for tp, r in broker.partitions.items():
                if r.role != LEADER:
                    continue
                epoch, hwm = r.leader_epoch, r.high_watermark
                if seen.get((nid, tp)) == (epoch, hwm):
                    continue  # checked and recorded as it is
                seen[(nid, tp)] = (epoch, hwm)
                owner = self.epoch_leader.setdefault((tp, epoch), nid)
                if owner != nid:
                    self._violate(now, "one-leader-per-epoch", (tp, epoch), f"{tp} epoch {epoch}: {owner} and {nid}")
                k = (nid, tp, epoch)
                if hwm < self.leader_hwm.get(k, 0):
                    self._violate(now, "hwm-monotonicity", k, f"{tp} leader {nid} epoch {epoch} HWM went back")
                self.leader_hwm[k] = hwm
                cl = committed.setdefault(tp, [])
                if hwm > len(cl):
                    bad = self._verify(nid, tp, r.log, len(cl))  # type: ignore[arg-type]
                    if bad is not None:
                        self._violate(now, "leader-completeness", (tp, nid, epoch),
                                      f"{tp} leader {nid} (epoch {epoch}) lacks committed offset {bad}")
                    log: InMemoryPartitionLog = r.log  # type: ignore[assignment]
                    for o in range(len(cl), hwm):
                        b = log.batch_at(o)
                        assert b is not None
                        cl.append((b.epoch, b.crc, o - b.base))

    def _check_candidates(self, cluster: ObservedCluster, ctl: Controller, image: Any, now: int) -> None:
        """2. The controller's state; completeness of the leader and of the leader candidates."""
        verified, committed = self.verified, self.committed
        stamp = (id(ctl), image.next_offset)
        fresh = stamp != self._checked_image
        self._checked_image = stamp
        brokers = cluster.brokers
        for tp, reg in image.partitions.items():
            if fresh:
                self._check_registration(ctl, now, tp, reg)  # type: ignore[arg-type]
            cl_len = len(committed.get(tp, ()))
            if reg.leader != NO_LEADER and verified.get((reg.leader, tp), 0) < cl_len:
                n = brokers.get(reg.leader)
                r = n.broker.partitions.get(tp) if n is not None and n.broker is not None else None
                if r is not None and r.role == LEADER and r.leader_epoch == reg.leader_epoch:
                    bad = self._verify(n.id, tp, r.log, cl_len)  # type: ignore[union-attr, arg-type]
                    if bad is not None:
                        self._violate(now, "leader-completeness", (tp, reg.leader, reg.leader_epoch),
                                      f"{tp} leader {reg.leader} (epoch {reg.leader_epoch}) lacks committed offset {bad} "
                                      f"(True HWM {cl_len})")
            for b in reg.isr + reg.elr:
                if verified.get((b, tp), 0) >= cl_len:
                    continue
                n = brokers.get(b)
                if n is None or n.broker is None or n.broker.broker_epoch != image.broker_epoch(b):
                    continue
                log = n.disk.logs.get(tp)
                if log is None:
                    continue
                bad = self._verify(b, tp, log, cl_len)
                if bad is not None:
                    self._violate(now, "leader-candidate-completeness", (tp, b, reg.partition_epoch),
                                  f"{tp} candidate {b} (ISR {list(reg.isr)}, ELR {list(reg.elr)}) lacks committed offset "
                                  f"{bad} (True HWM {cl_len})")

    def _check_log_matching(self, live: list[tuple[int, Any]], now: int) -> None:
        """3. Every live replica's log up to its HWM is the committed log."""
        verified = self.verified
        for nid, broker in live:
            for tp, r in broker.partitions.items():
                upto = min(r.high_watermark, r.log.log_end_offset)
                if upto <= verified.get((nid, tp), 0):
                    continue
                bad = self._verify(nid, tp, r.log, upto)  # type: ignore[arg-type]
                if bad is not None:
                    self._violate(now, "log-matching", (tp, nid, bad), f"{tp} replica {nid} differs from the committed log at offset {bad}")

    def _check_registration(self, ctl: Controller, now: int, tp: TopicPartition, reg: object) -> None:
        isr, elr, replicas = set(reg.isr), set(reg.elr), set(reg.replicas)  # type: ignore[attr-defined]
        problems = []
        if isr & elr or not (isr | elr) <= replicas:
            problems.append(f"ISR {sorted(isr)} / ELR {sorted(elr)} overlap or leave the replicas")
        if reg.leader != NO_LEADER and reg.leader not in isr:  # type: ignore[attr-defined]
            problems.append(f"leader {reg.leader} not in ISR {sorted(isr)}")  # type: ignore[attr-defined]
        if ctl._policy(tp.topic).elr:
            if len(isr) >= ctl.min_isr(tp.topic) and elr:
                problems.append(f"ELR {sorted(elr)} with ISR {sorted(isr)} at min ISR")
            fenced = [b for b in isr if not ctl.image.is_usable(b)]
            if fenced:
                problems.append(f"fenced or shutting-down {fenced} in the ISR")
        if problems:
            self._violate(now, "valid-controller-state", (tp, reg.partition_epoch), f"{tp}: " + "; ".join(problems))  # type: ignore[attr-defined]

    def lost_acked_writes(self, cluster: ObservedCluster) -> dict[TopicPartition, list[Ack]]:
        """acks=all acknowledgements missing from the current leader's log (read back);
        partitions without a leader are skipped (see `ObservedCluster.leader_log`)."""
        out: dict[TopicPartition, list[Ack]] = {}
        for tp, acks in self.acked.items():
            log = cluster.leader_log(tp)
            if log is None:
                continue  # unavailable, not (yet) lost
            for off, a in sorted(acks.items()):
                b = log.batch_at(off)
                if b is None or b.crc != a.crc:
                    out.setdefault(tp, []).append(a)
        return out
