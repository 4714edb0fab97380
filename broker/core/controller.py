"""The controller: broker registrations, heartbeats and fencing, topics, ACLs, partition
changes, elections and unclean recovery, and the admin requests (new partitions, topic
configs, reassignments, elections; their rules in admin_rules.py), all written to the
metadata log.

Sans-IO: `handle(src, message, now_ms)` and `tick(now_ms)` return `Actions` (responses
and requests to send); `next_deadline()` says when `tick` must be called next. Records go
through a `MetadataQuorum`: `LocalMetadataQuorum` commits at once; on a quorum of
controllers it is the `RaftNode` and `quorum_controller.QuorumController` holds the
answers until their records are committed.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from kio.schema.errors import ErrorCode

from broker.core import acls
from broker.core import safeguards as sg
from broker.core.admin_rules import (
    AdminError,
    check_assignment,
    config_records,
    manual_partitions,
    new_partitions,
    new_topic_configs,
    placed_partitions,
)
from broker.core.election import (
    Assignment,
    ElectionPolicy,
    change_partition,
    reassignment_revert,
    reassignment_to,
)
from broker.core.messages import (
    NO_LEADER,
    PREFERRED_ELECTION,
    AclDeleteResult,
    AclResult,
    Actions,
    AlterConfigsRequest,
    AlterConfigsResponse,
    AlterPartitionRequest,
    AlterPartitionResponse,
    AlterReassignmentRequest,
    AlterReassignmentResponse,
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
    CreateAclsRequest,
    CreateAclsResponse,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreateTopicRequest,
    CreateTopicResponse,
    DeleteAclsRequest,
    DeleteAclsResponse,
    DeleteTopicRequest,
    DeleteTopicResponse,
    ElectLeadersRequest,
    ElectLeadersResponse,
    GetReplicaLogInfoRequest,
    GetReplicaLogInfoResponse,
    MetadataFetchRequest,
    MetadataFetchResponse,
    TopicPartition,
)
from broker.core.metadata import (
    RECOVERED,
    RECOVERING,
    TOPIC_RESOURCE,
    AccessControlEntryRecord,
    BrokerRegistrationChangeRecord,
    MetadataImage,
    MetadataLog,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    PartitionRegistration,
    RegisterBrokerRecord,
    RemoveAccessControlEntryRecord,
    RemoveTopicRecord,
    TopicRecord,
    acl_id_for,
)


@dataclass(frozen=True)
class ControllerConfig:
    node_id: int = 0
    broker_session_timeout_ms: int = 9000
    min_insync_replicas: int = 1
    unclean_leader_election_enable: bool = False
    unclean_recovery_strategy: str = "balanced"
    unclean_recovery_timeout_ms: int = 5000
    proactive_recovery_wait_ms: int = 1000
    max_metadata_records_per_fetch: int = 1000
    safeguards: sg.SafeguardSet = sg.ALL_ON


class MetadataQuorum(Protocol):
    """Where the controller's records go (`LocalMetadataQuorum`, or a `RaftNode`, which
    commits asynchronously)."""

    @property
    def end_offset(self) -> int: ...

    @property
    def committed_offset(self) -> int: ...

    def append(self, record: MetadataRecord) -> int: ...

    def read_from(self, offset: int, max_records: int) -> tuple[MetadataRecord, ...]: ...


class LocalMetadataQuorum:
    """A single voter: appended records are committed at once. `on_append(offset, record)`
    is where the shell persists each record (append `encode_record` to the metadata log
    file and fsync) before any action that depends on it is sent."""

    def __init__(
        self, log: MetadataLog | None = None, on_append: Callable[[int, MetadataRecord], None] | None = None
    ) -> None:
        self.log = log or MetadataLog()
        self.on_append = on_append

    @property
    def end_offset(self) -> int:
        return self.log.end_offset

    @property
    def committed_offset(self) -> int:
        return self.log.end_offset

    def append(self, record: MetadataRecord) -> int:
        off = self.log.append(record)
        if self.on_append is not None:
            self.on_append(off, record)
        return off

    def read_from(self, offset: int, max_records: int) -> tuple[MetadataRecord, ...]:
        return self.log.read_from(offset, max_records)


@dataclass
class _ParkedFetch:
    src: int
    request: MetadataFetchRequest
    deadline: int


@dataclass
class _RecoveryRound:
    """One unclean-recovery log inspection (KIP-966 GetReplicaLogInfo)."""

    strategy: str
    candidates: tuple[int, ...]
    deadline: int
    replies: dict[int, GetReplicaLogInfoResponse] = field(default_factory=dict)
    correlation: dict[int, int] = field(default_factory=dict)  # broker -> correlation id


@dataclass(frozen=True, slots=True)
class UncleanRecoveryEvent:
    """Reported (in `Controller.events`) for every unclean election: potential data loss."""

    time_ms: int
    tp: TopicPartition
    leader: int
    how: str


class Controller:
    """The active controller (the quorum leader's, see quorum_controller.py)."""

    def __init__(self, config: ControllerConfig, quorum: MetadataQuorum | None = None) -> None:
        self.config = config
        self.quorum: MetadataQuorum = quorum or LocalMetadataQuorum()
        self.image = MetadataImage()
        for off, rec in enumerate(self.quorum.read_from(0, 1 << 62)):
            self.image.apply(off, rec)
        self.last_heartbeat: dict[int, int] = {}
        self.shutdown_offset: dict[int, int] = {}
        self._parked: list[_ParkedFetch] = []
        self._recovery: dict[TopicPartition, _RecoveryRound] = {}
        self._next_correlation = 1
        self.events: list[UncleanRecoveryEvent] = []
        self._now = 0
        # Batches: the records one call (handle/tick) commits are one atomic batch, as a
        # KRaft controller event's records are. A metadata fetch is answered only between
        # batches and never cut inside one, so no broker ever shows half of a change (a
        # topic without all its partitions). `_batch_ends` lists the end offsets of this
        # controller's batches; records loaded from the log have no known boundaries.
        self._loaded_end = self.quorum.end_offset
        self._batch_ends: list[int] = []

    def start(self, now_ms: int) -> Actions:
        """Become active: every unfenced broker gets a fresh session (as on a KRaft
        controller failover)."""
        self._now = now_ms
        for bid, b in self.image.brokers.items():
            if not b.fenced:
                self.last_heartbeat[bid] = now_ms
        return Actions()

    # ------------------------------------------------------------ records
    def _commit(self, record: MetadataRecord, acts: Actions) -> int:
        off = self.quorum.append(record)
        self.image.apply(off, record)
        return off

    def _end_batch(self, acts: Actions) -> None:
        """Close the batch of the current call and answer the fetches it makes ready
        (before the call's response: a broker learns a change it caused, e.g. its
        unfencing, before the answer that reports it)."""
        end = self.quorum.end_offset
        if end > max(self._loaded_end, self._batch_ends[-1] if self._batch_ends else 0):
            self._batch_ends.append(end)
        self._answer_parked(acts, only_ready=True)

    def _policy(self, topic: str, replication_factor: int | None = None) -> ElectionPolicy:
        """Election rules of `topic`; min ISR is capped at the replication factor, as the
        leader's (Kafka's effective min ISR)."""
        guards = self.safeguards_for(topic)
        unclean = (
            self.image.topic_config(topic, "unclean.leader.election.enable", str(self.config.unclean_leader_election_enable).lower())
            == "true"
            or not guards.on(sg.CLEAN_ELECTION_ONLY)
        )
        min_isr = self.min_isr(topic)
        if replication_factor is not None:
            min_isr = min(min_isr, replication_factor)
        return ElectionPolicy(min_isr=min_isr, elr=guards.on(sg.ELR), unclean=unclean)

    def min_isr(self, topic: str) -> int:
        return int(self.image.topic_config(topic, "min.insync.replicas", str(self.config.min_insync_replicas)))

    def safeguards_for(self, topic: str) -> sg.SafeguardSet:
        value = self.image.topic_config(topic, "wrack.safeguards.off", "")
        if not value:
            return self.config.safeguards
        return self.config.safeguards.union(sg.parse_config(value))

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

    # ------------------------------------------------------------ entry points
    def handle(self, src: int | str, msg: object, now_ms: int) -> Actions:
        """Process one request (or a GetReplicaLogInfo response) from `src`."""
        self._now = now_ms
        acts = Actions()
        resp: object = None
        if isinstance(msg, MetadataFetchRequest):
            self._on_metadata_fetch(src, msg, now_ms, acts)  # type: ignore[arg-type]
        elif isinstance(msg, BrokerHeartbeatRequest):
            resp = self._on_heartbeat(msg, now_ms, acts)
        elif isinstance(msg, BrokerRegistrationRequest):
            resp = self._on_registration(msg, now_ms, acts)
        elif isinstance(msg, AlterPartitionRequest):
            resp = self._on_alter_partition(msg, acts)
        elif isinstance(msg, CreateTopicRequest):
            resp = self._on_create_topic(msg, acts)
        elif isinstance(msg, DeleteTopicRequest):
            resp = self._on_delete_topic(msg, acts)
        elif isinstance(msg, ElectLeadersRequest):
            resp = self._on_elect_leaders(msg, acts)
        elif isinstance(msg, CreatePartitionsRequest):
            resp = self._on_create_partitions(msg, acts)
        elif isinstance(msg, AlterConfigsRequest):
            resp = self._on_alter_configs(msg, acts)
        elif isinstance(msg, AlterReassignmentRequest):
            resp = self._on_alter_reassignment(msg, acts)
        elif isinstance(msg, GetReplicaLogInfoResponse):
            self._on_log_info(msg, acts)
        elif isinstance(msg, CreateAclsRequest):
            resp = self._on_create_acls(msg, acts)
        elif isinstance(msg, DeleteAclsRequest):
            resp = self._on_delete_acls(msg, acts)
        else:
            raise TypeError(f"controller cannot handle {type(msg).__name__}")
        self._maybe_start_recovery(now_ms, acts)
        self._end_batch(acts)
        if resp is not None:
            acts.send(src, resp)
        return acts

    def tick(self, now_ms: int) -> Actions:
        """Fence expired sessions, time out parked fetches and recovery rounds."""
        self._now = now_ms
        acts = Actions()
        for bid, b in sorted(self.image.brokers.items()):
            if not b.fenced and now_ms - self.last_heartbeat.get(bid, now_ms) > self.config.broker_session_timeout_ms:
                self._fence(bid, acts)
        for tp, rnd in list(self._recovery.items()):
            if now_ms >= rnd.deadline:
                self._finish_recovery(tp, rnd, acts, timed_out=True)
        self._maybe_start_recovery(now_ms, acts)
        self._end_batch(acts)
        self._answer_parked(acts, only_ready=False, now_ms=now_ms)
        return acts

    def committed(self, now_ms: int) -> Actions:
        """The quorum's high watermark may have moved: answer the metadata fetches it
        makes ready (a `LocalMetadataQuorum` commits at once and needs no such call)."""
        self._now = now_ms
        acts = Actions()
        if self._parked:
            self._answer_parked(acts, only_ready=True)
        return acts

    def next_deadline(self) -> int | None:
        ds = [p.deadline for p in self._parked] + [r.deadline for r in self._recovery.values()]
        for bid, b in self.image.brokers.items():
            if not b.fenced and bid in self.last_heartbeat:
                ds.append(self.last_heartbeat[bid] + self.config.broker_session_timeout_ms + 1)
        return min(ds) if ds else None

    # ------------------------------------------------------------ metadata fetch
    def _on_metadata_fetch(self, src: int, req: MetadataFetchRequest, now_ms: int, acts: Actions) -> None:
        if req.fetch_offset < self.quorum.committed_offset or req.max_wait_ms <= 0:
            acts.send(src, self._metadata_response(req))
        else:
            self._parked = [p for p in self._parked if p.src != src]
            self._parked.append(_ParkedFetch(src, req, now_ms + req.max_wait_ms))

    def _metadata_response(self, req: MetadataFetchRequest) -> MetadataFetchResponse:
        end = self.quorum.committed_offset
        stop = self._fetch_end(req.fetch_offset, min(end, req.fetch_offset + self.config.max_metadata_records_per_fetch))
        n = max(0, stop - req.fetch_offset)
        return MetadataFetchResponse(req.correlation_id, self.quorum.read_from(req.fetch_offset, n), end)

    def _fetch_end(self, start: int, limit: int) -> int:
        """Where a fetch from `start` capped at `limit` ends: the last batch boundary in
        (start, limit], else the end of the batch that crosses `limit` (a batch longer
        than the cap goes whole). Offsets up to `_loaded_end` all count as boundaries."""
        ends = self._batch_ends
        if limit <= self._loaded_end or not ends or limit >= ends[-1]:
            return limit
        i = bisect.bisect_right(ends, limit)  # ends[i - 1] <= limit < ends[i]
        if i > 0 and ends[i - 1] > start:
            return ends[i - 1]
        if self._loaded_end > start:
            return self._loaded_end
        return ends[i]

    def _answer_parked(self, acts: Actions, only_ready: bool, now_ms: int = 0) -> None:
        keep = []
        for p in self._parked:
            ready = p.request.fetch_offset < self.quorum.committed_offset
            if ready or (not only_ready and now_ms >= p.deadline):
                acts.send(p.src, self._metadata_response(p.request))
            else:
                keep.append(p)
        self._parked = keep

    # ------------------------------------------------------------ brokers
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

    # ------------------------------------------------------------ topics
    def _on_create_topic(self, req: CreateTopicRequest, acts: Actions) -> CreateTopicResponse:
        try:
            if req.name in self.image.topics:
                raise AdminError(ErrorCode.topic_already_exists, f"Topic '{req.name}' already exists.")
            configs = new_topic_configs(req.configs)
            if req.assignments:
                if req.num_partitions != -1 or req.replication_factor != -1:
                    raise AdminError(ErrorCode.invalid_request, "A manual partition assignment was specified, but "
                                                                "numPartitions or replicationFactor was not set to -1.")
                regs = manual_partitions(self.image, req.assignments, 0)
            else:
                if req.replication_factor <= 0:
                    raise AdminError(ErrorCode.invalid_replication_factor, "Replication factor must be larger than 0.")
                regs = placed_partitions(self.image, req.num_partitions, req.replication_factor, len(self.image.partitions))
        except AdminError as e:
            return CreateTopicResponse(req.correlation_id, req.name, e.code, e.message)
        if not req.validate_only:
            self._commit(TopicRecord(req.name, tuple(sorted(configs.items()))), acts)
            for i, reg in enumerate(regs):
                self._commit(PartitionRecord(TopicPartition(req.name, i), reg), acts)
        return CreateTopicResponse(req.correlation_id, req.name, ErrorCode.none)

    def _on_create_partitions(self, req: CreatePartitionsRequest, acts: Actions) -> CreatePartitionsResponse:
        have = sum(1 for tp in self.image.partitions if tp.topic == req.topic)
        try:
            regs = new_partitions(self.image, req.topic, req.count, req.assignments, len(self.image.partitions))
        except AdminError as e:
            return CreatePartitionsResponse(req.correlation_id, req.topic, e.code, e.message)
        if not req.validate_only:
            for i, reg in enumerate(regs):
                self._commit(PartitionRecord(TopicPartition(req.topic, have + i), reg), acts)
        return CreatePartitionsResponse(req.correlation_id, req.topic, ErrorCode.none)

    def _on_alter_configs(self, req: AlterConfigsRequest, acts: Actions) -> AlterConfigsResponse:
        def answer(code: ErrorCode, text: str = "") -> AlterConfigsResponse:
            return AlterConfigsResponse(req.correlation_id, req.resource_type, req.resource_name, code, text)

        try:
            records = config_records(self.image, req.resource_type, req.resource_name, req.changes, req.replace)
        except AdminError as e:
            return answer(e.code, e.message)
        if req.validate_only or not records:
            return answer(ErrorCode.none)
        for rec in records:
            self._commit(rec, acts)
        # e.g. unclean election newly allowed on a topic or as a broker default: elect where none leads
        for tp, reg in sorted(self.image.partitions.items()):
            if reg.leader == NO_LEADER and (req.resource_type != TOPIC_RESOURCE or tp.topic == req.resource_name):
                self._change(tp, acts)
        return answer(ErrorCode.none)

    def _on_delete_topic(self, req: DeleteTopicRequest, acts: Actions) -> DeleteTopicResponse:
        if req.name not in self.image.topics:
            return DeleteTopicResponse(req.correlation_id, req.name, ErrorCode.unknown_topic_or_partition, f"no topic {req.name!r}")
        for tp in [tp for tp in self._recovery if tp.topic == req.name]:
            del self._recovery[tp]
        self._commit(RemoveTopicRecord(req.name), acts)
        return DeleteTopicResponse(req.correlation_id, req.name, ErrorCode.none)

    # ------------------------------------------------------------ ACLs
    def _on_create_acls(self, req: CreateAclsRequest, acts: Actions) -> CreateAclsResponse:
        """Kafka's AclControlManager.createAcls: each binding checked on its own; one
        already stored (or earlier in the request) succeeds without a new record."""
        stored = set(self.image.acls.values())
        results = []
        for b in req.creations:
            why = acls.binding_error(b)
            if why is not None:
                results.append(AclResult(ErrorCode.invalid_request, why))
                continue
            if b not in stored:
                off = self.quorum.end_offset
                self._commit(AccessControlEntryRecord(acl_id_for(off), b.resource_type, b.resource_name, b.pattern_type,
                                                      b.principal, b.host, b.operation, b.permission_type), acts)
                stored.add(b)
            results.append(AclResult(ErrorCode.none))
        return CreateAclsResponse(req.correlation_id, tuple(results))

    def _on_delete_acls(self, req: DeleteAclsRequest, acts: Actions) -> DeleteAclsResponse:
        """Kafka's AclControlManager.deleteAcls: every filter lists every stored ACL it
        matches; each matched ACL is removed once."""
        gone: dict[str, None] = {}
        results = []
        for f in req.filters:
            why = acls.filter_error(f)
            if why is not None:
                results.append(AclDeleteResult(ErrorCode.invalid_request, why))
                continue
            hits = [(aid, b) for aid, b in self.image.acls.items() if acls.matches(f, b)]
            gone.update((aid, None) for aid, _ in hits)
            results.append(AclDeleteResult(ErrorCode.none, "", tuple(b for _, b in hits)))
        for aid in gone:
            self._commit(RemoveAccessControlEntryRecord(aid), acts)
        return DeleteAclsResponse(req.correlation_id, tuple(results))

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
            req.correlation_id, req.tp, ErrorCode.none, new.leader, new.leader_epoch, new.isr, new.leader_recovery_state, new.partition_epoch
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

    # ------------------------------------------------------------ elections and recovery
    def _on_elect_leaders(self, req: ElectLeadersRequest, acts: Actions) -> ElectLeadersResponse:
        """Kafka's electLeader: PREFERRED moves the leadership to the first replica (when it
        is in the ISR and usable); UNCLEAN elects where no leader is, uncleanly if it must."""
        reg = self.image.partitions.get(req.tp)
        if reg is None:
            return ElectLeadersResponse(req.correlation_id, req.tp, ErrorCode.unknown_topic_or_partition)
        if req.election_type == PREFERRED_ELECTION:
            if reg.replicas and reg.leader == reg.replicas[0]:
                return ElectLeadersResponse(req.correlation_id, req.tp, ErrorCode.election_not_needed, reg.leader)
            new = self._change(req.tp, acts, preferred=True)
            code = ErrorCode.none if new != reg else ErrorCode.preferred_leader_not_available
            return ElectLeadersResponse(req.correlation_id, req.tp, code, new.leader)
        if reg.leader != NO_LEADER:
            return ElectLeadersResponse(req.correlation_id, req.tp, ErrorCode.election_not_needed, reg.leader)
        new = self._change(req.tp, acts)
        if new.leader == NO_LEADER:
            for r in reg.replicas:
                if self.image.is_usable(r):
                    new = self._change(req.tp, acts, force_leader=r, how="manual unclean election")
                    break
        code = ErrorCode.none if new.leader != NO_LEADER else ErrorCode.eligible_leaders_not_available
        return ElectLeadersResponse(req.correlation_id, req.tp, code, new.leader)

    # ------------------------------------------------------------ reassignments
    def _on_alter_reassignment(self, req: AlterReassignmentRequest, acts: Actions) -> AlterReassignmentResponse:
        """Start, replace or cancel the reassignment of one partition (KRaft's
        alterPartitionReassignment): the target replicas join, and once they are all in the
        ISR the replicas they replace leave (election.py, completed by any later change)."""
        try:
            self._reassign(req, acts)
        except AdminError as e:
            return AlterReassignmentResponse(req.correlation_id, req.tp, e.code, e.message)
        return AlterReassignmentResponse(req.correlation_id, req.tp, ErrorCode.none)

    def _reassign(self, req: AlterReassignmentRequest, acts: Actions) -> None:
        reg = self.image.partitions.get(req.tp)
        if reg is None:
            raise AdminError(ErrorCode.unknown_topic_or_partition, f"Unable to find partition {req.tp.topic}:{req.tp.partition}.")
        if req.replicas is None:
            if not reg.reassigning:
                raise AdminError(ErrorCode.no_reassignment_in_progress, "No partition reassignment is in progress.")
            original, isr, unclean = reassignment_revert(reg)
            if unclean and not self._policy(req.tp.topic).unclean:
                raise AdminError(ErrorCode.invalid_replica_assignment, f"Unable to revert partition assignment for "
                                 f"{req.tp.topic}:{req.tp.partition} because it would require an unclean leader election.")
            self._change(req.tp, acts, target_isr=isr, assignment=original)
            return
        check_assignment(self.image, req.replicas)
        if not req.allow_rf_change and len(req.replicas) != len(reg.target_replicas):
            raise AdminError(ErrorCode.invalid_replication_factor, f"The replication factor is changed from "
                             f"{len(reg.target_replicas)} to {len(req.replicas)}, which is not allowed.")
        self._change(req.tp, acts, assignment=reassignment_to(reg, req.replicas))

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
        rnd = _RecoveryRound(strategy, cands, deadline)
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

    def _finish_recovery(self, tp: TopicPartition, rnd: _RecoveryRound, acts: Actions, timed_out: bool) -> None:
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
