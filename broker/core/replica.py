"""One partition's replica on one broker: leader or follower state, fetch handling, HWM,
ISR changes and acks (seed 003 sections 2.2-2.10; docs/protocol-rules.md "Fetch", "Truncation
by leader epoch", "High watermark and acks", "ISR changes").

`PartitionReplica` is driven by the `Broker` (broker.py), which owns the network side:
it routes fetches, produce requests and metadata here and sends what these methods
return. Methods take `now` in ms; nothing here does I/O except through the injected
`PartitionLog`.

One method a rule, as Kafka's Partition.scala, in modules by side: this one holds the role
transitions on a new registration; replica_state.py the state and the records of side
effects (`ReplicaEvents`); replica_isr.py the leader's ISR, HWM and AlterPartition rules;
replica_leader.py the leader serving fetches, produce and DeleteRecords;
replica_follower.py the follower's fetch state and what it does with the answers.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from broker.core import safeguards as sg
from broker.core.messages import NO_LEADER, DeleteRecordsResponse, ProduceResponse
from broker.core.metadata import MetadataImage, PartitionRegistration
from broker.core.replica_follower import FollowerRules
from broker.core.replica_leader import LeaderRules
from broker.core.replica_state import (
    FOLLOWER,
    LEADER,
    OFFLINE,
    REBUILD_ERRORS,
    FollowerState,
    PendingAlter,
    PendingDelete,
    PendingProduce,
    ReplicaEvents,
    ReplicaRole,
    ReplicaSettings,
)
from broker.logapi import STORAGE_ERRORS

__all__ = ["FOLLOWER", "LEADER", "OFFLINE", "REBUILD_ERRORS", "FollowerState", "PartitionReplica", "PendingAlter",
           "PendingDelete", "PendingProduce", "ReplicaEvents", "ReplicaRole", "ReplicaSettings"]


class PartitionReplica(LeaderRules, FollowerRules):
    """The local replica of one partition (its rules: the module docstring)."""

    def apply_registration(self, reg: PartitionRegistration, image: MetadataImage, now: int, ev: ReplicaEvents) -> None:
        """Act on the materialised registration (seed 003, 2.10 role transitions)."""
        me = self.s.broker_id
        if reg.partition_epoch <= self.partition_epoch and reg.leader_epoch <= self.leader_epoch:
            return
        new_epoch = reg.leader_epoch != self.leader_epoch
        self.replicas = reg.replicas
        if me not in reg.replicas:
            self._lose_leadership(ev, ErrorCode.not_leader_or_follower)
            self.role = OFFLINE
            self.leader_epoch, self.partition_epoch = reg.leader_epoch, reg.partition_epoch
            return
        if reg.leader == me:
            was_leader = self.role == LEADER
            self.role = LEADER
            self.leader_id = me
            self.isr = reg.isr
            self.maximal_isr = reg.isr
            self.pending_alter = None
            self.recovery_state = reg.leader_recovery_state
            if new_epoch or not was_leader:
                self.leader_epoch = reg.leader_epoch
                self.leso = self.log.log_end_offset
                try:
                    self.log.assign_epoch_start(reg.leader_epoch, self.leso)
                except STORAGE_ERRORS as e:  # the cache is updated in memory; the checkpoint write failed
                    self._failed("leader epoch checkpoint", e)
                self.followers = {
                    r: FollowerState(last_caught_up_time=now if r in reg.isr else 0) for r in reg.replicas if r != me
                }
            else:  # same epoch: a reassignment may have added replicas
                for r in reg.replicas:
                    if r != me and r not in self.followers:
                        self.followers[r] = FollowerState(last_caught_up_time=0)
            self.partition_epoch = reg.partition_epoch
            self._fail_pending_if_under_min_isr(ev)
            self.maybe_propose_recovered(image, now, ev)
            self.maybe_advance_hwm(now, ev)
        else:
            if self.role == LEADER or new_epoch:
                self._lose_leadership(ev, ErrorCode.not_leader_or_follower)
                if new_epoch and not self.s.guards.on(sg.EPOCH_TRUNCATION):
                    self._truncate(self.high_watermark, "hwm-on-become-follower")  # pre-KIP-101 becomeFollower
                self.fetch_backoff_until = 0
            self.role = FOLLOWER if reg.leader != NO_LEADER else OFFLINE
            self.leader_id = reg.leader
            self.leader_epoch = reg.leader_epoch
            self.partition_epoch = reg.partition_epoch
            self.isr = reg.isr
            self.maximal_isr = reg.isr
            self.followers = {}
            self.pending_alter = None

    def _lose_leadership(self, ev: ReplicaEvents, error: ErrorCode) -> None:
        for p in self.pending_produce:
            ev.produce_responses.append((p.client, ProduceResponse(p.correlation_id, self.tp, error, p.base_offset)))
        self.pending_produce = []
        for d in self.pending_deletes:
            ev.delete_responses.append((d.client, DeleteRecordsResponse(d.correlation_id, self.tp, error)))
        self.pending_deletes = []
        self.pending_alter = None
