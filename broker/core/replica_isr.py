"""The leader's ISR, high watermark and AlterPartition rules of a partition replica
(seed 003 2.8-2.9; docs/protocol-rules.md "High watermark and acks", "ISR changes"): the
HWM over the Maximal ISR, acks=all answered once it passes them, ISR expansion and
shrinking proposed to the controller, one change in flight at a time, and its answer.
One method a rule (Kafka's Partition.scala); the state is replica_state.py's.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from broker.core import safeguards as sg
from broker.core.messages import AlterPartitionRequest, BrokerIdAndEpoch, ProduceResponse
from broker.core.metadata import RECOVERED, RECOVERING, MetadataImage
from broker.core.replica_state import LEADER, FollowerState, PendingAlter, ReplicaEvents, ReplicaState


class IsrRules(ReplicaState):
    """The leader's ISR and HWM rules."""

    def _effective_isr_ok(self) -> bool:
        return len(self.isr) >= min(self.s.min_isr, len(self.replicas))

    def maybe_advance_hwm(self, now: int, ev: ReplicaEvents) -> None:
        """HWM = min LEO over the Maximal ISR, only while ISR >= min.insync.replicas (KIP-966)."""
        if self.role != LEADER:
            return
        if self.s.guards.on(sg.ELR) and not self._effective_isr_ok():
            return
        new = self.log.log_end_offset
        for r in self.maximal_isr:
            if r == self.s.broker_id:
                continue
            f = self.followers.get(r)
            if f is None or f.log_end_offset < 0:
                return
            new = min(new, f.log_end_offset)
        if new > self.high_watermark:
            self.high_watermark = new
            ev.hwm_changed = True
            self._complete_produces(ev)

    def _complete_produces(self, ev: ReplicaEvents) -> None:
        keep = []
        for p in self.pending_produce:
            if self.high_watermark >= p.required_offset:
                ok = len(self.maximal_isr) >= min(self.s.min_isr, len(self.replicas))
                code = ErrorCode.none if ok else ErrorCode.not_enough_replicas_after_append
                ev.produce_responses.append((p.client, ProduceResponse(p.correlation_id, self.tp, code, p.base_offset)))
            else:
                keep.append(p)
        self.pending_produce = keep

    def _fail_pending_if_under_min_isr(self, ev: ReplicaEvents) -> None:
        if self._effective_isr_ok():
            return
        for p in self.pending_produce:
            ev.produce_responses.append(
                (p.client, ProduceResponse(p.correlation_id, self.tp, ErrorCode.not_enough_replicas_after_append, p.base_offset))
            )
        self.pending_produce = []

    def _alter_request(self, isr: tuple[int, ...], recovery: int, now: int, image: MetadataImage) -> AlterPartitionRequest:
        cid = self._next_id()
        self.maximal_isr = tuple(r for r in self.replicas if r in set(self.isr) | set(isr))
        members = tuple(
            BrokerIdAndEpoch(r, self.followers[r].broker_epoch if r in self.followers else image.broker_epoch(r)) for r in isr
        )
        req = AlterPartitionRequest(
            cid, self.s.broker_id, image.broker_epoch(self.s.broker_id), self.tp, self.leader_epoch, self.partition_epoch, members, recovery
        )
        self.pending_alter = PendingAlter(cid, isr, recovery, now, req)
        return req

    def maybe_propose_recovered(self, image: MetadataImage, now: int, ev: ReplicaEvents) -> None:
        """KIP-704: the leader of a RECOVERING partition (elected uncleanly, an ISR of one)
        proposes RECOVERED, with the epochs of the registration it holds, whenever it has no
        ISR change in flight: on the registration that made it leader, on every later one
        (which drops the pending change), and from the Broker's tick after an answer that
        left it RECOVERING. So it asks until the controller accepts or another broker leads;
        until then `maybe_expand_isr` lets no follower in."""
        if self.role != LEADER or self.recovery_state != RECOVERING or self.pending_alter is not None:
            return
        ev.alter_partition = self._alter_request(self.isr, RECOVERED, now, image)

    def maybe_expand_isr(self, rid: int, f: FollowerState, image: MetadataImage, now: int, ev: ReplicaEvents) -> None:
        """Add `rid` if it fetched in this epoch, LEO >= HWM and >= LESO, is unfenced and its
        broker epoch matches the metadata (seed 003 2.9; KIP-841, KIP-903)."""
        if self.pending_alter is not None or rid in self.isr or self.recovery_state == RECOVERING:
            return
        if not f.fetched_in_epoch or f.log_end_offset < self.high_watermark:
            return
        if self.s.guards.on(sg.LESO_CHECK) and f.log_end_offset < self.leso:
            return
        if not image.is_usable(rid):
            return
        if self.s.guards.on(sg.BROKER_EPOCH_CHECK) and f.broker_epoch != image.broker_epoch(rid):
            return
        new_isr = tuple(r for r in self.replicas if r in self.isr or r == rid)
        ev.alter_partition = self._alter_request(new_isr, self.recovery_state, now, image)

    def maybe_shrink_isr(self, image: MetadataImage, now: int, ev: ReplicaEvents) -> None:
        """Drop followers not caught up within replica.lag.time.max.ms."""
        if self.role != LEADER or self.pending_alter is not None:
            return
        leo = self.log.log_end_offset
        out = []
        for r in self.isr:
            if r == self.s.broker_id:
                continue
            f = self.followers.get(r)
            caught_up = f is not None and (f.log_end_offset == leo or now - f.last_caught_up_time <= self.s.replica_lag_time_max_ms)
            if not caught_up:
                out.append(r)
        if out:
            ev.alter_partition = self._alter_request(tuple(r for r in self.isr if r not in out), self.recovery_state, now, image)

    def handle_alter_response(
        self, correlation_id: int, error: ErrorCode, isr: tuple[int, ...], partition_epoch: int, leader_epoch: int,
        recovery_state: int, now: int, ev: ReplicaEvents,
    ) -> None:
        """Commit (if newer) or roll back the in-flight ISR change. INVALID_UPDATE_VERSION and
        FENCED_LEADER_EPOCH say the controller holds newer state, which may include an earlier
        copy of this very request (`alter_timed_out`): the change stays pending (Maximal ISR)
        until that metadata arrives, as Kafka's Partition.handleAlterPartitionError does."""
        p = self.pending_alter
        if p is None or p.correlation_id != correlation_id or p.outdated:
            return
        if error in (ErrorCode.invalid_update_version, ErrorCode.fenced_leader_epoch):
            p.outdated = True
            return
        self.pending_alter = None
        if error is ErrorCode.none and leader_epoch == self.leader_epoch and partition_epoch > self.partition_epoch:
            self.isr = isr
            self.partition_epoch = partition_epoch
            self.recovery_state = recovery_state
        self.maximal_isr = self.isr
        self._fail_pending_if_under_min_isr(ev)
        self.maybe_advance_hwm(now, ev)

    def alter_timed_out(self, now: int, timeout_ms: int) -> AlterPartitionRequest | None:
        """The in-flight request, to send again (same correlation id), if unanswered for
        `timeout_ms`. It is never dropped: a request held up in the network may still be
        applied, and a leader that had let its HWM advance without a proposed member would
        then have that member in the ISR without the records committed meanwhile."""
        p = self.pending_alter
        if p is None or p.outdated or p.request is None or now - p.sent_at < timeout_ms:
            return None
        p.sent_at = now
        return p.request

    def alter_deadline(self, timeout_ms: int) -> int | None:
        """When `alter_timed_out` will next send the request again (None: nothing to resend)."""
        p = self.pending_alter
        return None if p is None or p.outdated else p.sent_at + timeout_ms
