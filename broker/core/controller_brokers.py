"""The controller's broker lifecycle (Kafka's ClusterControlManager and
BrokerHeartbeatManager): registrations (a new incarnation ends the old one's session at
once), heartbeats (unfencing once caught up with the metadata, controlled shutdown),
fencing (an expired session, or asked for), and what each does to the partitions: a
fenced or shutting-down broker leaves every ISR and leadership, an unfenced one may be
elected where no leader is, an unclean restart leaves every ELR (KIP-966).
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from broker.core.controller_partitions import PartitionChanges
from broker.core.messages import (
    NO_LEADER,
    Actions,
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
)
from broker.core.metadata import BrokerRegistrationChangeRecord, RegisterBrokerRecord


class BrokerLifecycle(PartitionChanges):
    """Registrations, heartbeats and fencing."""

    def _on_registration(self, req: BrokerRegistrationRequest, now_ms: int, acts: Actions) -> BrokerRegistrationResponse:
        b = self.image.brokers.get(req.broker_id)
        if b is not None and b.incarnation_id == req.incarnation_id:
            self.last_heartbeat[req.broker_id] = now_ms
            return BrokerRegistrationResponse(req.correlation_id, ErrorCode.none, b.broker_epoch)
        # A new incarnation means the old process is gone (a node id runs one process): its
        # session ends now, not a session timeout later, so a restarted broker serves again
        # at once and its dead incarnation is never elected meanwhile (the old epoch is fenced).
        if b is not None:
            if not b.fenced:
                self._fence(req.broker_id, acts)
            if req.previous_broker_epoch != b.broker_epoch:
                self._handle_unclean_shutdown(req.broker_id, acts)
        epoch = self.quorum.end_offset
        self._commit(RegisterBrokerRecord(req.broker_id, epoch, req.incarnation_id, True, req.listeners), acts)
        self.last_heartbeat[req.broker_id] = now_ms
        self.shutdown_offset.pop(req.broker_id, None)
        return BrokerRegistrationResponse(req.correlation_id, ErrorCode.none, epoch)

    def _handle_unclean_shutdown(self, broker_id: int, acts: Actions) -> None:
        """KIP-966 Unclean Exclusion: leave every ELR (for LastKnownELR); v3.5 keeps ISRs."""
        for tp, reg in sorted(self.image.partitions.items(), key=lambda kv: (kv[0].topic, kv[0].partition)):
            if broker_id in reg.elr and self._policy(tp.topic).elr:
                self._change(tp, acts, unclean_shutdown=frozenset({broker_id}))

    def _fence(self, broker_id: int, acts: Actions) -> None:
        b = self.image.brokers[broker_id]
        self._commit(BrokerRegistrationChangeRecord(broker_id, b.broker_epoch, fenced=True), acts)
        self._remove_from_partitions(broker_id, acts)

    def _remove_from_partitions(self, broker_id: int, acts: Actions) -> None:
        for tp, reg in sorted(self.image.partitions.items(), key=lambda kv: (kv[0].topic, kv[0].partition)):
            if broker_id in reg.isr or reg.leader == broker_id:
                self._change(tp, acts, target_isr=tuple(r for r in reg.isr if r != broker_id))

    def _on_heartbeat(self, req: BrokerHeartbeatRequest, now_ms: int, acts: Actions) -> BrokerHeartbeatResponse:
        b = self.image.brokers.get(req.broker_id)
        if b is None or b.broker_epoch != req.broker_epoch:
            return BrokerHeartbeatResponse(req.correlation_id, ErrorCode.stale_broker_epoch, False, True, False)
        self.last_heartbeat[req.broker_id] = now_ms
        caught_up = req.current_metadata_offset >= b.broker_epoch
        should_shut_down = False
        if req.want_shut_down:
            if not b.in_controlled_shutdown and not b.fenced:
                self._commit(
                    BrokerRegistrationChangeRecord(req.broker_id, b.broker_epoch, in_controlled_shutdown=True), acts
                )
                self._remove_from_partitions(req.broker_id, acts)
                self.shutdown_offset[req.broker_id] = self.quorum.end_offset - 1  # its last record
            done_at = self.shutdown_offset.get(req.broker_id, 0)
            if b.fenced or req.current_metadata_offset >= done_at:
                should_shut_down = True
                if not b.fenced:
                    self._commit(BrokerRegistrationChangeRecord(req.broker_id, b.broker_epoch, fenced=True), acts)
        elif b.fenced and not req.want_fence and caught_up:
            self._commit(BrokerRegistrationChangeRecord(req.broker_id, b.broker_epoch, fenced=False), acts)
            self._elect_leaderless(acts)
        elif not b.fenced and req.want_fence:
            self._fence(req.broker_id, acts)
        return BrokerHeartbeatResponse(req.correlation_id, ErrorCode.none, caught_up, b.fenced, should_shut_down)

    def _elect_leaderless(self, acts: Actions) -> None:
        for tp, reg in sorted(self.image.partitions.items(), key=lambda kv: (kv[0].topic, kv[0].partition)):
            if reg.leader == NO_LEADER:
                self._change(tp, acts)
