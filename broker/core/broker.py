"""The broker: lifecycle with the controller, metadata, and the replica manager.

Sans-IO. The shell creates `Broker(config, log_factory, incarnation_id,
previous_broker_epoch, hwm_checkpoint)`, calls `start(now)`, then `handle(src, msg, now)`
for every message and `tick(now)` whenever `next_deadline()` passes; each returns
`Actions` (messages to send, checkpoints to write, shutdown to perform).

Lifecycle (seed 003 section 8): STARTING (registering) -> RECOVERY (registered, fenced,
catching up with metadata) -> RUNNING (unfenced) -> PENDING_CONTROLLED_SHUTDOWN ->
SHUT_DOWN. Replica fetching: one fetch in flight per leader broker, covering every
partition this broker follows on it; the leader parks a fetch that has nothing to return
until records arrive, the HWM moves, or `max_wait_ms` passes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum

from kio.schema.errors import ErrorCode

from broker.core import safeguards as sg
from broker.core.messages import (
    NO_LEADER,
    Actions,
    AlterPartitionRequest,
    AlterPartitionResponse,
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
    CheckpointHighWatermarks,
    DeletePartitionLog,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    Endpoint,
    FetchPartition,
    FetchPartitionResponse,
    FetchRequest,
    FetchResponse,
    GetReplicaLogInfoRequest,
    GetReplicaLogInfoResponse,
    LogFailure,
    MetadataFetchRequest,
    MetadataFetchResponse,
    MetadataRequest,
    MetadataResponse,
    OffsetsForLeaderEpochRequest,
    OffsetsForLeaderEpochResponse,
    PartitionMetadata,
    ProduceRequest,
    ProduceResponse,
    ReplicaTruncated,
    ShutdownComplete,
    TopicPartition,
)
from broker.core.metadata import (
    TOPIC_RESOURCE,
    ConfigRecord,
    MetadataImage,
    PartitionChangeRecord,
    PartitionRecord,
    RemoveTopicRecord,
)
from broker.core.producers import ProducerIdAllocator
from broker.core.replica import FOLLOWER, LEADER, PartitionReplica, ReplicaEvents, ReplicaSettings
from broker.logapi import STORAGE_ERRORS, PartitionLog

# ListOffsets special timestamps (Kafka's ListOffsetsRequest).
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3

class BrokerState(StrEnum):
    """The broker's lifecycle (seed 003 section 8; the module docstring)."""

    STARTING = "STARTING"
    RECOVERY = "RECOVERY"
    RUNNING = "RUNNING"
    PENDING_CONTROLLED_SHUTDOWN = "PENDING_CONTROLLED_SHUTDOWN"
    SHUT_DOWN = "SHUT_DOWN"


STARTING, RECOVERY, RUNNING = BrokerState.STARTING, BrokerState.RECOVERY, BrokerState.RUNNING
PENDING_CONTROLLED_SHUTDOWN, SHUT_DOWN = BrokerState.PENDING_CONTROLLED_SHUTDOWN, BrokerState.SHUT_DOWN

# every move the lifecycle makes, and why (a move not listed is a bug: IllegalTransition)
TRANSITIONS: dict[BrokerState, frozenset[BrokerState]] = {
    STARTING: frozenset({RECOVERY,  # registered (fenced until caught up)
                         PENDING_CONTROLLED_SHUTDOWN,  # registered while a shutdown was wanted
                         SHUT_DOWN}),  # shut down before it ever registered
    RECOVERY: frozenset({RUNNING,  # unfenced
                         STARTING,  # STALE_BROKER_EPOCH: register again
                         PENDING_CONTROLLED_SHUTDOWN}),
    RUNNING: frozenset({RECOVERY,  # fenced again
                        STARTING, PENDING_CONTROLLED_SHUTDOWN}),
    PENDING_CONTROLLED_SHUTDOWN: frozenset({SHUT_DOWN,  # the controller moved leadership away
                                            STARTING}),
    SHUT_DOWN: frozenset(),
}


class IllegalTransition(AssertionError):
    """A lifecycle move that TRANSITIONS does not allow."""


@dataclass(frozen=True)
class BrokerConfig:
    node_id: int
    controller_id: int = 0
    broker_heartbeat_interval_ms: int = 2000
    replica_lag_time_max_ms: int = 30000
    replica_fetch_wait_max_ms: int = 500
    replica_fetch_backoff_ms: int = 1000
    # After a broken link to the controller, registration and metadata fetches are sent
    # again after retry_backoff_ms, doubling per failure up to retry_backoff_max_ms
    # (Kafka's retry.backoff.ms / retry.backoff.max.ms, KIP-580; its lifecycle manager
    # also starts at 100 ms): a broker started before its controller registers ~100 ms
    # after the controller is up, not a full second later.
    retry_backoff_ms: int = 100
    retry_backoff_max_ms: int = 1000
    request_timeout_ms: int = 30000
    metadata_max_wait_ms: int = 500
    hw_checkpoint_interval_ms: int = 5000
    min_insync_replicas: int = 1
    safeguards: sg.SafeguardSet = sg.ALL_ON
    listeners: tuple[Endpoint, ...] = ()
    # Heartbeat as soon as the metadata covers our registration (as Kafka's lifecycle
    # manager) instead of at the next interval; the real shell sets it, the simulation's
    # seeded schedules keep the plain interval.
    unfence_when_caught_up: bool = False


@dataclass(frozen=True, slots=True)
class ListOffsetResult:
    """ListOffsets for one partition: the offset (-1 if none matches), the timestamp of
    the record found (-1 unless looked up by timestamp) and its leader epoch."""

    error: ErrorCode
    offset: int = -1
    timestamp: int = -1
    leader_epoch: int = -1


@dataclass(slots=True)
class _Fetcher:
    correlation_id: int = -1
    sent_at: int = 0
    sent: dict[TopicPartition, FetchPartition] = field(default_factory=dict)


@dataclass(slots=True)
class _Parked:
    src: int
    request: FetchRequest
    deadline: int


@dataclass(slots=True)
class _InFlightAlter:
    """An AlterPartition request sent and not yet answered, and when it last went out."""

    request: AlterPartitionRequest
    sent_at: int


class Broker:
    """One broker's protocol state (all its partitions)."""

    def __init__(
        self,
        config: BrokerConfig,
        log_factory: Callable[[TopicPartition], PartitionLog],
        incarnation_id: str,
        previous_broker_epoch: int = -1,
        hwm_checkpoint: dict[TopicPartition, int] | None = None,
    ) -> None:
        self.config = config
        self.id = config.node_id
        self._log_factory = log_factory
        self.incarnation_id = incarnation_id
        self.previous_broker_epoch = previous_broker_epoch
        self._hwm_checkpoint = dict(hwm_checkpoint or {})
        self.state: BrokerState = STARTING
        self.broker_epoch = -1
        self.image = MetadataImage()
        self.partitions: dict[TopicPartition, PartitionReplica] = {}
        self._cid = 0
        self._registration_at: int | None = None  # in flight since / retry at
        self._registration_cid = -1
        self._heartbeats: list[int] = []  # correlation ids of heartbeats in flight
        self._next_heartbeat = 0
        self._metadata_cid = -1
        self._metadata_sent = 0
        self._metadata_retry_at = 0
        self._controller_failures = 0  # consecutive broken links to the controller
        self._fetchers: dict[int, _Fetcher] = {}
        self._parked: list[_Parked] = []
        self._next_isr_check = 0
        self._next_checkpoint = 0
        self._want_shutdown = False
        self._producer_ids = ProducerIdAllocator()
        # Kafka's AlterPartitionManager over its own controller channel: one request per
        # partition in flight until answered (sent again, unchanged, after every disconnect,
        # also when the partition has moved on since), a newer proposal queued behind it
        self._alter_inflight: dict[TopicPartition, _InFlightAlter] = {}
        self._alter_queued: dict[TopicPartition, AlterPartitionRequest] = {}

    def _id(self) -> int:
        self._cid += 1
        return self._cid

    # ------------------------------------------------------------ entry points
    def start(self, now: int) -> Actions:
        acts = Actions()
        self._register(now, acts)
        self._next_checkpoint = now + self.config.hw_checkpoint_interval_ms
        self._next_isr_check = now + self.config.replica_lag_time_max_ms // 2
        return acts

    def _move(self, to: BrokerState) -> None:
        if to is not self.state and to not in TRANSITIONS[self.state]:
            raise IllegalTransition(f"broker {self.id}: {self.state} -> {to}")
        self.state = to

    def begin_controlled_shutdown(self, now: int) -> Actions:
        """Ask the controller to move leadership away; ShutdownComplete follows."""
        acts = Actions()
        self._want_shutdown = True
        if self.state in (RECOVERY, RUNNING):
            self._move(PENDING_CONTROLLED_SHUTDOWN)
            self._send_heartbeat(now, acts)
        elif self.state == STARTING:
            self._move(SHUT_DOWN)
            acts.other.append(ShutdownComplete(self.broker_epoch))
        return acts

    def connection_lost(self, node: int, now: int, outbound_only: bool = False) -> Actions:
        """The shell's connection to `node` broke: the fetch in flight to it will not be
        answered. Its partitions back off `replica_fetch_backoff_ms`, then fetch again
        (from whoever leads them by then) instead of waiting for the request timeout.

        Unless `outbound_only`, the link `node` opened to this broker (the one its fetches
        came on) is gone too, and the fetches of `node` parked here are dropped: nobody could
        get their answers. With `outbound_only` (only the link this broker opened to `node`
        broke) they stay and are answered as usual: that link says nothing about the other
        one. A follower whose parked fetch is dropped sends no other fetch to this leader
        until the request timeout (30 s), and meanwhile leaves the ISR; this happened after a
        follower's restart, when the leader found its link to the old incarnation dead only
        once the new incarnation's fetch was parked."""
        f = self._fetchers.get(node)
        if f is not None and f.correlation_id >= 0:
            f.correlation_id = -1
            for tp in f.sent:
                r = self.partitions.get(tp)
                if r is not None and r.role == FOLLOWER:
                    r.fetch_backoff_until = now + self.config.replica_fetch_backoff_ms
        if not outbound_only:
            self._parked = [p for p in self._parked if p.src != node]
        return Actions()

    def controller_connection_lost(self, now: int) -> Actions:
        """The shell's connection to the controller broke: the metadata fetch (and a
        registration) in flight will not be answered; send them again after
        `retry_backoff_ms` (doubling per consecutive failure, at most
        `retry_backoff_max_ms`) instead of after the request timeout. Heartbeats need
        nothing: they go out on their own schedule. Every unanswered AlterPartition is sent
        again at once, unchanged (the shell queues it until a new link connects), as Kafka's
        controller channel does on a disconnect, even if newer metadata has replaced the
        proposal since: it may arrive after the controller changed the partition, which is
        what the partition-epoch and broker-epoch checks are for."""
        c = self.config
        delay = min(c.retry_backoff_ms << min(self._controller_failures, 16), c.retry_backoff_max_ms)
        self._controller_failures += 1
        if self._metadata_cid >= 0:
            self._metadata_cid = -1
            self._metadata_retry_at = now + delay
        if self.state == STARTING and self._registration_at is not None:
            self._registration_at = min(self._registration_at, now + delay)
        return self.alter_channel_lost(now)

    def alter_channel_lost(self, now: int) -> Actions:
        """The link that carries AlterPartition broke (its own, as Kafka's alter-partition
        channel): every unanswered request again, unchanged, whatever the partition did since."""
        acts = Actions()
        for f in self._alter_inflight.values():
            f.sent_at = now
            acts.send(self.config.controller_id, f.request)
        return acts

    def _resend_timed_out_alters(self, now: int, acts: Actions) -> None:
        """An unanswered request is sent again after the request timeout (Kafka's network
        client disconnects then, and the channel sends it again)."""
        for f in self._alter_inflight.values():
            if now - f.sent_at >= self.config.request_timeout_ms:
                f.sent_at = now
                acts.send(self.config.controller_id, f.request)

    def _send_alter(self, req: AlterPartitionRequest, now: int, acts: Actions) -> None:
        """Send `req` unless another request of its partition is in flight (then it waits
        for that answer; a newer proposal replaces a queued one)."""
        cur = self._alter_inflight.get(req.tp)
        if cur is not None and cur.request.correlation_id != req.correlation_id:
            self._alter_queued[req.tp] = req
            return
        self._alter_inflight[req.tp] = _InFlightAlter(req, now)
        acts.send(self.config.controller_id, req)

    def _alter_answered(self, msg: AlterPartitionResponse, now: int, acts: Actions) -> None:
        """The in-flight request of `msg.tp` is answered: send the queued one if its replica
        still waits for it."""
        cur = self._alter_inflight.get(msg.tp)
        if cur is None or cur.request.correlation_id != msg.correlation_id:
            return
        del self._alter_inflight[msg.tp]
        nxt = self._alter_queued.pop(msg.tp, None)
        r = self.partitions.get(msg.tp)
        if nxt is not None and r is not None and r.pending_alter is not None and r.pending_alter.correlation_id == nxt.correlation_id:
            self._send_alter(nxt, now, acts)

    def handle(self, src: int | str, msg: object, now: int) -> Actions:
        acts = Actions()
        if self.state == SHUT_DOWN:
            return acts
        if isinstance(msg, FetchRequest):
            self._on_fetch(src, msg, now, acts)  # type: ignore[arg-type]
        elif isinstance(msg, FetchResponse):
            self._on_fetch_response(src, msg, now, acts)  # type: ignore[arg-type]
        elif isinstance(msg, ProduceRequest):
            self._on_produce(src, msg, now, acts)
        elif isinstance(msg, MetadataFetchResponse):
            self._on_metadata(msg, now, acts)
        elif isinstance(msg, BrokerHeartbeatResponse):
            self._on_heartbeat_response(msg, now, acts)
        elif isinstance(msg, BrokerRegistrationResponse):
            self._on_registration_response(msg, now, acts)
        elif isinstance(msg, AlterPartitionResponse):
            self._on_alter_response(msg, now, acts)
        elif isinstance(msg, MetadataRequest):
            acts.send(src, self._metadata_for_client(msg))
        elif isinstance(msg, OffsetsForLeaderEpochRequest):
            acts.send(src, self._on_offsets_for_leader_epoch(msg))
        elif isinstance(msg, GetReplicaLogInfoRequest):
            acts.send(src, self._on_log_info(msg))
        elif isinstance(msg, DeleteRecordsRequest):
            self._on_delete_records(src, msg, now, acts)
        else:
            raise TypeError(f"broker cannot handle {type(msg).__name__}")
        return acts

    def tick(self, now: int) -> Actions:
        acts = Actions()
        if self.state == SHUT_DOWN:
            return acts
        c = self.config
        if self.state == STARTING:
            if self._registration_at is not None and now >= self._registration_at:
                self._register(now, acts)
            return acts
        if now >= self._next_heartbeat:
            self._send_heartbeat(now, acts)
        if (now >= self._metadata_retry_at if self._metadata_cid < 0 else now - self._metadata_sent >= c.request_timeout_ms):
            self._send_metadata_fetch(now, acts)
        for leader, f in self._fetchers.items():
            if f.correlation_id >= 0 and now - f.sent_at >= c.request_timeout_ms:
                f.correlation_id = -1
                for tp in f.sent:
                    r = self.partitions.get(tp)
                    if r is not None and r.leader_id == leader:
                        r.fetch_backoff_until = now
        self._wake_parked(now, acts, None, expired_only=True)
        ev = ReplicaEvents()
        if now >= self._next_isr_check:
            self._next_isr_check = now + c.replica_lag_time_max_ms // 2
            for r in self.partitions.values():
                r.maybe_shrink_isr(self.image, now, ev)
                self._flush(r, ev, now, acts)
                ev = ReplicaEvents()
        for r in self.partitions.values():
            if r.role == LEADER:
                ev.alter_partition = r.alter_timed_out(now, c.request_timeout_ms)
                r.maybe_propose_recovered(self.image, now, ev)  # again, after an answer that left it RECOVERING
                r.expire_produces(now, ev)
                r.expire_deletes(now, ev)
                if r.pending_alter is None:
                    r.maybe_advance_hwm(now, ev)
                self._flush(r, ev, now, acts)
                ev = ReplicaEvents()
        self._resend_timed_out_alters(now, acts)
        if now >= self._next_checkpoint:
            self._next_checkpoint = now + c.hw_checkpoint_interval_ms
            acts.other.append(CheckpointHighWatermarks({tp: r.high_watermark for tp, r in self.partitions.items()}))
        self._send_fetches(now, acts)
        return acts

    def next_deadline(self) -> int | None:
        if self.state == SHUT_DOWN:
            return None
        c = self.config
        if self.state == STARTING:
            return self._registration_at
        ds = [self._next_checkpoint, self._next_isr_check]
        ds.append(self._next_heartbeat)
        ds.append(self._metadata_sent + c.request_timeout_ms if self._metadata_cid >= 0 else self._metadata_retry_at)
        for f in self._fetchers.values():
            if f.correlation_id >= 0:
                ds.append(f.sent_at + c.request_timeout_ms)
        ds.extend(p.deadline for p in self._parked)
        ds.extend(f.sent_at + c.request_timeout_ms for f in self._alter_inflight.values())
        for r in self.partitions.values():
            if r.role == LEADER:
                if (d := r.alter_deadline(c.request_timeout_ms)) is not None:
                    ds.append(d)
                ds.extend(p.deadline for p in r.pending_produce)
                ds.extend(d.deadline for d in r.pending_deletes)
            elif r.role == FOLLOWER and r.fetch_backoff_until > 0:
                fetcher = self._fetchers.get(r.leader_id)
                if fetcher is None or fetcher.correlation_id < 0:
                    ds.append(r.fetch_backoff_until)
        return min(ds)

    # ------------------------------------------------------------ controller: registration, heartbeat
    def _register(self, now: int, acts: Actions) -> None:
        self._registration_cid = self._id()
        self._registration_at = now + self.config.request_timeout_ms
        acts.send(
            self.config.controller_id,
            BrokerRegistrationRequest(
                self._registration_cid, self.id, self.incarnation_id, self.previous_broker_epoch, self.config.listeners
            ),
        )

    def _on_registration_response(self, msg: BrokerRegistrationResponse, now: int, acts: Actions) -> None:
        if msg.correlation_id != self._registration_cid or self.state != STARTING:
            return
        self._controller_failures = 0
        if msg.error is not ErrorCode.none:
            self._registration_at = now + self.config.broker_heartbeat_interval_ms
            return
        self.broker_epoch = msg.broker_epoch
        self._registration_at = None
        self._move(PENDING_CONTROLLED_SHUTDOWN if self._want_shutdown else RECOVERY)
        self._send_heartbeat(now, acts)
        self._send_metadata_fetch(now, acts)

    def _send_heartbeat(self, now: int, acts: Actions) -> None:
        cid = self._id()
        self._heartbeats = [*self._heartbeats[-7:], cid]  # heartbeats go on a schedule, in flight or not
        self._next_heartbeat = now + self.config.broker_heartbeat_interval_ms
        acts.send(
            self.config.controller_id,
            BrokerHeartbeatRequest(
                cid, self.id, self.broker_epoch, self.image.next_offset - 1,
                want_fence=False, want_shut_down=self.state == PENDING_CONTROLLED_SHUTDOWN,
            ),
        )

    def _on_heartbeat_response(self, msg: BrokerHeartbeatResponse, now: int, acts: Actions) -> None:
        if msg.correlation_id not in self._heartbeats or self.state in (STARTING, SHUT_DOWN):
            return  # an answer to a heartbeat of an earlier registration
        self._heartbeats = [c for c in self._heartbeats if c > msg.correlation_id]
        if msg.error is ErrorCode.stale_broker_epoch:
            self._move(STARTING)
            self._heartbeats = []
            self._register(now, acts)
            return
        if msg.error is not ErrorCode.none:
            return
        if self.state == PENDING_CONTROLLED_SHUTDOWN:
            if msg.should_shut_down:
                self._move(SHUT_DOWN)
                acts.other.append(ShutdownComplete(self.broker_epoch))
            else:
                self._next_heartbeat = min(self._next_heartbeat, now + 50)
            return
        self._move(RECOVERY if msg.is_fenced else RUNNING)
        if msg.is_fenced and msg.is_caught_up:
            self._next_heartbeat = min(self._next_heartbeat, now + 50)  # ask to be unfenced soon

    # ------------------------------------------------------------ metadata
    def _send_metadata_fetch(self, now: int, acts: Actions) -> None:
        self._metadata_cid = self._id()
        self._metadata_sent = now
        acts.send(
            self.config.controller_id,
            MetadataFetchRequest(self._metadata_cid, self.id, self.image.next_offset, self.config.metadata_max_wait_ms),
        )

    def _on_metadata(self, msg: MetadataFetchResponse, now: int, acts: Actions) -> None:
        if msg.correlation_id != self._metadata_cid:
            return
        self._metadata_cid = -1
        self._controller_failures = 0
        touched: dict[TopicPartition, None] = {}
        off = self.image.next_offset
        for rec in msg.records:
            self.image.apply(off, rec)
            off += 1
            if isinstance(rec, PartitionRecord | PartitionChangeRecord):
                touched[rec.tp] = None
            elif isinstance(rec, RemoveTopicRecord):
                for tp in [tp for tp in self.partitions if tp.topic == rec.name]:
                    self._remove_partition(tp, now, acts)
                    touched.pop(tp, None)
            elif isinstance(rec, ConfigRecord):  # a topic's config, or a dynamic broker default
                for tp, r in self.partitions.items():
                    if rec.resource_type != TOPIC_RESOURCE or tp.topic == rec.resource_name:
                        r.s = self._replica_settings(tp.topic)
        for tp in touched:
            self._apply_partition(tp, now, acts)
        if self.config.unfence_when_caught_up and self.state == RECOVERY and msg.records and self.image.next_offset > self.broker_epoch:
            # caught up with our registration: ask to be unfenced now, not at the next
            # heartbeat (Kafka's lifecycle manager does the same)
            self._next_heartbeat = min(self._next_heartbeat, now + 10)
        if self.state in (RECOVERY, RUNNING, PENDING_CONTROLLED_SHUTDOWN):
            self._send_metadata_fetch(now, acts)
        if touched:
            self._wake_parked(now, acts, set(touched))
            self._send_fetches(now, acts)

    def _remove_partition(self, tp: TopicPartition, now: int, acts: Actions, topic_deleted: bool = True) -> None:
        """The topic was deleted (or a reassignment moved the partition off this broker):
        fail what waits on the replica, forget it, delete its log."""
        r = self.partitions.pop(tp)
        ev = ReplicaEvents()
        r._lose_leadership(ev, ErrorCode.unknown_topic_or_partition if topic_deleted else ErrorCode.not_leader_or_follower)
        self._answer_clients(ev, acts)
        self._hwm_checkpoint.pop(tp, None)
        self._alter_inflight.pop(tp, None)
        self._alter_queued.pop(tp, None)
        acts.other.append(DeletePartitionLog(tp, topic_deleted))
        self._wake_parked(now, acts, {tp})

    def partition_guards(self, topic: str) -> sg.SafeguardSet:
        return self.config.safeguards.union(sg.parse_config(self.image.topic_config(topic, "wrack.safeguards.off", "", self.id)))

    def _replica_settings(self, topic: str) -> ReplicaSettings:
        """The settings of `topic`'s replicas (its configs over the broker's)."""
        min_isr = int(self.image.topic_config(topic, "min.insync.replicas", str(self.config.min_insync_replicas), self.id))
        return ReplicaSettings(self.id, self.config.replica_lag_time_max_ms, min_isr, self.partition_guards(topic))

    def _apply_partition(self, tp: TopicPartition, now: int, acts: Actions) -> None:
        reg = self.image.partitions[tp]
        r = self.partitions.get(tp)
        if r is not None and self.id not in reg.replicas:
            self._remove_partition(tp, now, acts, topic_deleted=False)  # reassigned away (Kafka's StopReplica, delete)
            return
        if r is None:
            if self.id not in reg.replicas:
                return
            settings = self._replica_settings(tp.topic)
            guards = settings.guards
            log = self._log_factory(tp)
            hwm = self._hwm_checkpoint.get(tp, 0)
            leo = log.log_end_offset
            if not guards.on(sg.EPOCH_TRUNCATION):
                log.truncate_to(hwm)  # pre-KIP-101: truncate to the checkpointed HW on restart
            r = self.partitions[tp] = PartitionReplica(tp, log, settings, self._id, hwm)
            if log.log_end_offset < leo:
                r.truncations.append((leo, log.log_end_offset, "hwm-on-restart"))
            r.load_producer_state()
        ev = ReplicaEvents()
        r.apply_registration(reg, self.image, now, ev)
        self._flush(r, ev, now, acts)

    # ------------------------------------------------------------ replica events
    @staticmethod
    def _drain_failures(r: PartitionReplica, acts: Actions) -> None:
        """Storage failures and truncations of `r`, for the shell to log."""
        if r.failures:
            acts.other.extend(LogFailure(r.tp, op, err) for op, err in r.failures)
            r.failures.clear()
        if r.truncations:
            acts.other.extend(ReplicaTruncated(r.tp, a, b, why, r.leader_epoch, r.role) for a, b, why in r.truncations)
            r.truncations.clear()

    @staticmethod
    def _answer_clients(ev: ReplicaEvents, acts: Actions) -> None:
        """The produce and DeleteRecords answers a replica's call gave."""
        for client, resp in (*ev.produce_responses, *ev.delete_responses):
            acts.send(client, resp)

    def _flush(self, r: PartitionReplica, ev: ReplicaEvents, now: int, acts: Actions) -> None:
        self._drain_failures(r, acts)
        self._answer_clients(ev, acts)
        if ev.alter_partition is not None:
            self._send_alter(ev.alter_partition, now, acts)
        if ev.hwm_changed or ev.appended:
            self._wake_parked(now, acts, {r.tp})

    def _on_alter_response(self, msg: AlterPartitionResponse, now: int, acts: Actions) -> None:
        self._alter_answered(msg, now, acts)
        r = self.partitions.get(msg.tp)
        if r is None:
            return
        ev = ReplicaEvents()
        r.handle_alter_response(
            msg.correlation_id, msg.error, msg.isr, msg.partition_epoch, msg.leader_epoch, msg.leader_recovery_state, now, ev
        )
        self._flush(r, ev, now, acts)

    # ------------------------------------------------------------ produce
    def _on_produce(self, src: int | str, msg: ProduceRequest, now: int, acts: Actions) -> None:
        r = self.partitions.get(msg.tp)
        if r is None:
            acts.send(src, ProduceResponse(msg.correlation_id, msg.tp, ErrorCode.not_leader_or_follower))
            return
        ev = ReplicaEvents()
        resp = r.append_produce(src, msg.correlation_id, msg.acks, msg.records, msg.timeout_ms, now, ev)
        if resp is not None and msg.acks != 0:
            acts.send(src, resp)
        self._flush(r, ev, now, acts)

    def _missing_error(self, tp: TopicPartition) -> ErrorCode:
        """The error for a partition without a local replica."""
        return ErrorCode.not_leader_or_follower if tp in self.image.partitions else ErrorCode.unknown_topic_or_partition

    # ------------------------------------------------------------ fetch: leader side
    def _serve_fetch(self, req: FetchRequest, now: int, acts: Actions) -> tuple[FetchResponse, bool]:
        """Evaluate a fetch; returns (response, worth sending now)."""
        out = []
        interesting = req.max_wait_ms <= 0
        budget = req.max_bytes  # consumer fetches: total records bytes (KIP-74: at least one batch)
        got = 0
        for p in req.partitions:
            r = self.partitions.get(p.tp)
            if r is None:
                out.append(FetchPartitionResponse(p.tp, ErrorCode.not_leader_or_follower))
                interesting = True
                continue
            if req.replica_id < 0:
                err = r.check_leader_epoch(p.current_leader_epoch)
                if err is not ErrorCode.none:
                    out.append(r._error(err))
                    interesting = True
                    continue
                if got and budget <= 0:  # the response is full: the partition's state only
                    out.append(FetchPartitionResponse(p.tp, ErrorCode.none, r.high_watermark, r.log.log_start_offset,
                                                      last_stable_offset=r.last_stable_offset()))
                    continue
                resp = r.consumer_read(p.fetch_offset, max(1, min(p.partition_max_bytes, budget)), req.isolation_level == 1)
                self._drain_failures(r, acts)
                out.append(resp)
                got += len(resp.records)
                budget -= len(resp.records)
                if resp.error is not ErrorCode.none:
                    interesting = True
                continue
            ev = ReplicaEvents()
            resp = r.handle_follower_fetch(req.replica_id, req.replica_epoch, p, self.image, now, ev)
            self._flush(r, ev, now, acts)
            out.append(resp)
            if resp.error is not ErrorCode.none or resp.records or resp.diverging_epoch is not None:
                interesting = True
        if req.replica_id < 0 and got >= max(req.min_bytes, 1):
            interesting = True
        return FetchResponse(req.correlation_id, tuple(out)), interesting

    def _on_fetch(self, src: int, req: FetchRequest, now: int, acts: Actions) -> None:
        self._parked = [p for p in self._parked if p.src != src or req.replica_id < 0]
        resp, send_now = self._serve_fetch(req, now, acts)
        if send_now:
            acts.send(src, resp)
        else:
            self._parked.append(_Parked(src, req, now + req.max_wait_ms))

    def _wake_parked(self, now: int, acts: Actions, tps: set[TopicPartition] | None, expired_only: bool = False) -> None:
        if not self._parked:
            return
        keep: list[_Parked] = []
        wake: list[_Parked] = []
        for p in self._parked:
            hit = now >= p.deadline if expired_only else any(fp.tp in tps for fp in p.request.partitions)  # type: ignore[operator]
            (wake if hit else keep).append(p)
        self._parked = keep
        for p in wake:
            resp, interesting = self._serve_fetch(p.request, now, acts)
            if p.request.replica_id < 0 and not interesting and now < p.deadline:
                self._parked.append(p)  # a consumer waits for min_bytes (or its deadline)
                continue
            acts.send(p.src, resp)

    # ------------------------------------------------------------ fetch: follower side
    def _send_fetches(self, now: int, acts: Actions) -> None:
        if self.broker_epoch < 0 or self.state == SHUT_DOWN:
            return
        by_leader: dict[int, dict[TopicPartition, FetchPartition]] = {}
        for tp, r in self.partitions.items():
            if r.role == FOLLOWER and r.leader_id not in (NO_LEADER, self.id) and now >= r.fetch_backoff_until:
                by_leader.setdefault(r.leader_id, {})[tp] = r.fetch_partition()
                r.fetch_backoff_until = 0
        for leader, parts in by_leader.items():
            f = self._fetchers.setdefault(leader, _Fetcher())
            if f.correlation_id >= 0:
                continue
            f.correlation_id, f.sent_at, f.sent = self._id(), now, parts
            acts.send(
                leader,
                FetchRequest(f.correlation_id, self.id, self.broker_epoch, tuple(parts.values()), self.config.replica_fetch_wait_max_ms),
            )

    def _on_fetch_response(self, src: int, msg: FetchResponse, now: int, acts: Actions) -> None:
        f = self._fetchers.get(src)
        if f is None or f.correlation_id != msg.correlation_id:
            return
        f.correlation_id = -1
        for pr in msg.partitions:
            r = self.partitions.get(pr.tp)
            sent = f.sent.get(pr.tp)
            if r is not None and sent is not None and r.leader_id == src:
                r.handle_fetch_response(sent, pr, now, self.config.replica_fetch_backoff_ms)
                self._drain_failures(r, acts)
        self._send_fetches(now, acts)

    # ------------------------------------------------------------ small requests
    def _on_offsets_for_leader_epoch(self, msg: OffsetsForLeaderEpochRequest) -> OffsetsForLeaderEpochResponse:
        r = self.partitions.get(msg.tp)
        if r is None:
            return OffsetsForLeaderEpochResponse(msg.correlation_id, msg.tp, ErrorCode.not_leader_or_follower)
        err, eo = r.end_offset_for_epoch(msg.current_leader_epoch, msg.leader_epoch)
        return OffsetsForLeaderEpochResponse(msg.correlation_id, msg.tp, err, eo.epoch, eo.end_offset)

    def init_producer_id(self) -> tuple[ErrorCode, int]:
        """InitProducerId without a transactional id: a new producer id (epoch 0) that no
        broker of the cluster ever handed out (see producers.ProducerIdAllocator)."""
        pid = self._producer_ids.allocate(self.broker_epoch if self.state in (RUNNING, RECOVERY) else -1)
        return (ErrorCode.none, pid) if pid is not None else (ErrorCode.coordinator_not_available, -1)

    def leader_error(self, tp: TopicPartition) -> ErrorCode:
        """Whether this broker leads `tp` now (what a produce with acks=0 would find)."""
        r = self.partitions.get(tp)
        if r is None:
            return self._missing_error(tp)
        return ErrorCode.none if r.role == LEADER else ErrorCode.not_leader_or_follower

    def list_offset(self, tp: TopicPartition, current_leader_epoch: int, timestamp: int,
                    read_committed: bool = False, debug: bool = False) -> ListOffsetResult:
        """ListOffsets (consumer view, served by the leader with epoch fencing): earliest
        (-2), latest (-1: the HWM, or the LSO for `read_committed`) or the first offset
        with a timestamp >= `timestamp` below the HWM (the log's `offset_for_timestamp`,
        if it has one). `debug` (Kafka's DEBUG_FOLLOWER_ID, replica id -2): any replica
        answers, and latest is its log end offset."""
        r = self.partitions.get(tp)
        if r is None:
            return ListOffsetResult(self._missing_error(tp))
        err = ErrorCode.none if debug else r.check_leader_epoch(current_leader_epoch)
        if err is not ErrorCode.none:
            return ListOffsetResult(err)
        log = r.log
        if timestamp == EARLIEST_TIMESTAMP:
            return ListOffsetResult(ErrorCode.none, log.log_start_offset, -1, _epoch_at(log, log.log_start_offset))
        if timestamp == LATEST_TIMESTAMP:
            end = log.log_end_offset if debug else r.last_stable_offset() if read_committed else r.high_watermark
            return ListOffsetResult(ErrorCode.none, end, -1, _epoch_at(log, end - 1))
        lookup = getattr(log, "offset_for_timestamp", None)
        if timestamp < 0 or lookup is None:
            return ListOffsetResult(ErrorCode.invalid_request if timestamp < 0 else ErrorCode.unsupported_version)
        try:
            found = lookup(timestamp)  # (offset, timestamp, leader_epoch) of the first record at or after it
        except STORAGE_ERRORS:
            return ListOffsetResult(ErrorCode.kafka_storage_error)
        if found is None or found.offset >= (r.last_stable_offset() if read_committed else r.high_watermark):
            return ListOffsetResult(ErrorCode.none)
        return ListOffsetResult(ErrorCode.none, found.offset, found.timestamp, _epoch_at(log, found.offset))

    def _on_delete_records(self, src: int | str, msg: DeleteRecordsRequest, now: int, acts: Actions) -> None:
        """DeleteRecords for one partition (served by the leader): the log start moves, the
        followers' parked fetches are answered at once (they learn the new log start), and
        the answer waits for the low watermark (Kafka's DelayedDeleteRecords)."""
        r = self.partitions.get(msg.tp)
        if r is None:
            acts.send(src, DeleteRecordsResponse(msg.correlation_id, msg.tp, self._missing_error(msg.tp)))
            return
        err, start = r.delete_records(msg.offset)
        if err is not ErrorCode.none:
            acts.send(src, DeleteRecordsResponse(msg.correlation_id, msg.tp, err))
            return
        ev = ReplicaEvents()
        r.await_low_watermark(src, msg.correlation_id, start, now + msg.timeout_ms, self.image, ev)
        self._flush(r, ev, now, acts)
        self._wake_parked(now, acts, {msg.tp})

    def _on_log_info(self, msg: GetReplicaLogInfoRequest) -> GetReplicaLogInfoResponse:
        r = self.partitions.get(msg.tp)
        if r is None:
            return GetReplicaLogInfoResponse(msg.correlation_id, msg.tp, self.id, self.broker_epoch, -1, -1, ErrorCode.unknown_topic_or_partition)
        return GetReplicaLogInfoResponse(msg.correlation_id, msg.tp, self.id, self.broker_epoch, r.log.latest_epoch(), r.log.log_end_offset)

    def _metadata_for_client(self, msg: MetadataRequest) -> MetadataResponse:
        parts = tuple(
            PartitionMetadata(tp, reg.leader, reg.leader_epoch, reg.replicas, reg.isr, reg.elr)
            for tp, reg in self.image.partitions.items()
            if msg.topics is None or tp.topic in msg.topics
        )
        brokers = tuple(sorted(b for b, info in self.image.brokers.items() if not info.fenced))
        return MetadataResponse(msg.correlation_id, brokers, parts, self.config.controller_id)


def _epoch_at(log: PartitionLog, offset: int) -> int:
    """The leader epoch of the record at `offset` per the epoch cache (-1 if unknown)."""
    epoch = -1
    for e, start in log.epoch_entries():
        if start > offset:
            break
        epoch = e
    return epoch
