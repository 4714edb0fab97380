"""The controller's partition changes (Kafka's ReplicationControlManager, KIP-966): every
change of a registration goes through `_change` (election.py `change_partition`, the
election rules of the partition's topic), AlterPartition requests from partition leaders
checked in Kafka's order, and unclean recovery: when a partition has no leader, no ISR and
no usable ELR member, the controller asks candidates for their logs (GetReplicaLogInfo)
and elects the most complete ("balanced": every LastKnownELR member must answer;
"proactive": any usable replica, after a wait).
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from broker.core import safeguards as sg
from broker.core.controller_state import ControllerState, RecoveryRound, UncleanRecoveryEvent
from broker.core.election import Assignment, change_partition
from broker.core.messages import (
    NO_LEADER,
    Actions,
    AlterPartitionRequest,
    AlterPartitionResponse,
    GetReplicaLogInfoRequest,
    GetReplicaLogInfoResponse,
    TopicPartition,
)
from broker.core.metadata import RECOVERED, RECOVERING, PartitionChangeRecord, PartitionRegistration


class PartitionChanges(ControllerState):
    """Partition changes, AlterPartition and unclean recovery."""

    def _change(
        self,
        tp: TopicPartition,
        acts: Actions,
        *,
        target_isr: tuple[int, ...] | set[int] | None = None,
        unclean_shutdown: frozenset[int] = frozenset(),
        leader_recovery_state: int | None = None,
        force_leader: int | None = None,
        how: str = "unclean election",
        assignment: Assignment | None = None,
        preferred: bool = False,
    ) -> PartitionRegistration:
        reg = self.image.partitions[tp]
        res = change_partition(
            reg,
            target_isr=reg.isr if target_isr is None else target_isr,
            usable=self.image.is_usable,
            policy=self._policy(tp.topic, len(reg.replicas)),
            unclean_shutdown=unclean_shutdown,
            leader_recovery_state=leader_recovery_state,
            force_leader=force_leader,
            assignment=assignment,
            preferred=preferred,
        )
        if res is None:
            return reg
        self._commit(PartitionChangeRecord(tp, res.registration), acts)
        if res.unclean:
            self.events.append(UncleanRecoveryEvent(self._now, tp, res.registration.leader, how))
        if res.registration.leader != NO_LEADER:
            self._recovery.pop(tp, None)
        return res.registration

    # ------------------------------------------------------------ AlterPartition
    def _on_alter_partition(self, req: AlterPartitionRequest, acts: Actions) -> AlterPartitionResponse:
        err = self.validate_alter_partition(req)
        if err is not ErrorCode.none:
            reg = self.image.partitions.get(req.tp)
            if reg is None:
                return AlterPartitionResponse(req.correlation_id, req.tp, err)
            return AlterPartitionResponse(
                req.correlation_id, req.tp, err, reg.leader, reg.leader_epoch, reg.isr, reg.leader_recovery_state, reg.partition_epoch
            )
        new = self._change(
            req.tp,
            acts,
            target_isr=tuple(m.broker_id for m in req.new_isr_with_epochs),
            leader_recovery_state=req.leader_recovery_state,
        )
        if new.leader != req.broker_id:  # the change completed a reassignment that moved the leadership
            return AlterPartitionResponse(req.correlation_id, req.tp, ErrorCode.new_leader_elected)
        return AlterPartitionResponse(
            req.correlation_id, req.tp, ErrorCode.none, new.leader, new.leader_epoch, new.isr, new.leader_recovery_state,
            new.partition_epoch
        )

    def validate_alter_partition(self, req: AlterPartitionRequest) -> ErrorCode:
        """Kafka's checks, in Kafka's order (seed 003 2.9.2; docs/protocol-rules.md "AlterPartition"),
        with the safeguards."""
        guards = self.safeguards_for(req.tp.topic)
        b = self.image.brokers.get(req.broker_id)
        if guards.on(sg.BROKER_EPOCH_CHECK) and (b is None or b.broker_epoch != req.broker_epoch):
            return ErrorCode.stale_broker_epoch
        reg = self.image.partitions.get(req.tp)
        if reg is None:
            return ErrorCode.unknown_topic_or_partition
        pe_check = guards.on(sg.PARTITION_EPOCH_CHECK)
        if req.leader_epoch > reg.leader_epoch or (pe_check and req.partition_epoch > reg.partition_epoch):
            return ErrorCode.not_controller
        if req.leader_epoch < reg.leader_epoch:
            return ErrorCode.fenced_leader_epoch
        if req.broker_id != reg.leader:
            return ErrorCode.invalid_request
        if pe_check and req.partition_epoch < reg.partition_epoch:
            return ErrorCode.invalid_update_version
        new_isr = [m.broker_id for m in req.new_isr_with_epochs]
        if req.broker_id not in new_isr or any(r not in reg.replicas for r in new_isr) or len(set(new_isr)) != len(new_isr):
            return ErrorCode.invalid_request
        if req.leader_recovery_state == RECOVERING and len(new_isr) > 1:
            return ErrorCode.invalid_request
        if reg.leader_recovery_state == RECOVERED and req.leader_recovery_state == RECOVERING:
            return ErrorCode.invalid_request
        for m in req.new_isr_with_epochs:
            if m.broker_id in reg.isr:
                continue
            mb = self.image.brokers.get(m.broker_id)
            if mb is None or mb.fenced or mb.in_controlled_shutdown:
                return ErrorCode.ineligible_replica
            if guards.on(sg.BROKER_EPOCH_CHECK) and m.broker_epoch not in (-1, mb.broker_epoch):
                return ErrorCode.ineligible_replica
        return ErrorCode.none

    # ------------------------------------------------------------ unclean recovery
    def _strategy(self, topic: str) -> str:
        return self.image.topic_config(topic, "unclean.recovery.strategy", self.config.unclean_recovery_strategy)

    def _maybe_start_recovery(self, now_ms: int, acts: Actions) -> None:
        for tp, reg in sorted(self.image.partitions.items(), key=lambda kv: (kv[0].topic, kv[0].partition)):
            if reg.leader != NO_LEADER or tp in self._recovery or reg.isr or not self._policy(tp.topic).elr:
                continue
            strategy = self._strategy(tp.topic)
            if strategy == "balanced" and not reg.elr and reg.last_known_elr:
                cands = reg.last_known_elr
                if all(self.image.is_usable(r) for r in cands):
                    self._start_round(tp, strategy, cands, now_ms + self.config.unclean_recovery_timeout_ms, acts)
            elif strategy == "proactive" and not any(self.image.is_usable(r) for r in reg.elr):
                cands = tuple(r for r in reg.replicas if self.image.is_usable(r))
                if cands:
                    self._start_round(tp, strategy, cands, now_ms + self.config.proactive_recovery_wait_ms, acts)

    def _start_round(self, tp: TopicPartition, strategy: str, cands: tuple[int, ...], deadline: int, acts: Actions) -> None:
        rnd = RecoveryRound(strategy, cands, deadline)
        for r in cands:
            cid = self._next_correlation
            self._next_correlation += 1
            rnd.correlation[r] = cid
            acts.send(r, GetReplicaLogInfoRequest(cid, tp))
        self._recovery[tp] = rnd

    def _on_log_info(self, resp: GetReplicaLogInfoResponse, acts: Actions) -> None:
        rnd = self._recovery.get(resp.tp)
        if rnd is None or rnd.correlation.get(resp.broker_id) != resp.correlation_id or resp.error is not ErrorCode.none:
            return
        rnd.replies[resp.broker_id] = resp
        if set(rnd.replies) >= set(rnd.candidates):
            self._finish_recovery(resp.tp, rnd, acts, timed_out=False)

    def _finish_recovery(self, tp: TopicPartition, rnd: RecoveryRound, acts: Actions, timed_out: bool) -> None:
        del self._recovery[tp]
        reg = self.image.partitions.get(tp)
        if reg is None or reg.leader != NO_LEADER:
            return
        valid = [
            r
            for r in rnd.replies.values()
            if self.image.is_usable(r.broker_id) and self.image.broker_epoch(r.broker_id) == r.broker_epoch
        ]
        if rnd.strategy == "balanced" and (timed_out or len(valid) < len(rnd.candidates)):
            return  # balanced needs every LastKnownELR member's log; try again later
        if not valid:
            return
        order = {b: i for i, b in enumerate(reg.replicas)}
        best = max(valid, key=lambda r: (r.last_written_leader_epoch, r.log_end_offset, -order.get(r.broker_id, 0)))
        self._change(tp, acts, force_leader=best.broker_id, how=f"{rnd.strategy} unclean recovery")
