"""The broker: lifecycle with the controller, metadata, and the replica manager.

Sans-IO. The shell creates `Broker(config, log_factory, incarnation_id,
previous_broker_epoch, hwm_checkpoint)`, calls `start(now)`, then `handle(src, msg, now)`
for every message and `tick(now)` whenever `next_deadline()` passes; each returns
`Actions` (messages to send, checkpoints to write, shutdown to perform).

Lifecycle (seed 003 section 8): STARTING (registering) -> RECOVERY (registered, fenced,
catching up with metadata) -> RUNNING (unfenced) -> PENDING_CONTROLLED_SHUTDOWN ->
SHUT_DOWN.

The Broker owns its partitions' replicas (replica.py) and the metadata image, and
delegates to components it owns: the follower fetchers (replica_fetchers.py, Kafka's
ReplicaFetcherManager: one fetch in flight per leader broker), the leader's fetch serving
and parked fetches (fetch_purgatory.py, Kafka's DelayedFetch), the AlterPartition channel
to the controller (alter_channel.py, Kafka's AlterPartitionManager) and the client-facing
queries (client_queries.py: ListOffsets, OffsetsForLeaderEpoch, DeleteRecords, Metadata,
GetReplicaLogInfo). Here: the lifecycle with the controller (registration, heartbeats,
metadata fetches), applying metadata to the replicas, produce, and what each replica call
asks of the components (`settle`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from kio.schema.errors import ErrorCode

from broker.core import safeguards as sg
from broker.core.alter_channel import AlterPartitionChannel
from broker.core.client_queries import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    ClientQueries,
    ListOffsetResult,
)
from broker.core.fetch_purgatory import FetchPurgatory, ParkedFetch
from broker.core.messages import (
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
    Endpoint,
    FetchRequest,
    FetchResponse,
    GetReplicaLogInfoRequest,
    MetadataFetchRequest,
    MetadataFetchResponse,
    MetadataRequest,
    OffsetsForLeaderEpochRequest,
    ProduceRequest,
    ProduceResponse,
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
from broker.core.replica_fetchers import Fetcher, ReplicaFetchers
from broker.core.replica_state import answer_clients, drain_failures
from broker.logapi import PartitionLog

# names imported from here before the components were split out
__all__ = ["EARLIEST_TIMESTAMP", "LATEST_TIMESTAMP", "MAX_TIMESTAMP", "Broker", "BrokerConfig", "BrokerState",
           "IllegalTransition", "ListOffsetResult", "PENDING_CONTROLLED_SHUTDOWN", "RECOVERY", "RUNNING", "SHUT_DOWN",
           "STARTING", "TRANSITIONS"]


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
        self._next_isr_check = 0
        self._next_checkpoint = 0
        self._want_shutdown = False
        self._producer_ids = ProducerIdAllocator()
        c = config
        self.fetchers = ReplicaFetchers(self, self.id, self._id, wait_max_ms=c.replica_fetch_wait_max_ms,
                                        backoff_ms=c.replica_fetch_backoff_ms, request_timeout_ms=c.request_timeout_ms)
        self.purgatory = FetchPurgatory(self)
        self.alter_channel = AlterPartitionChannel(c.controller_id, c.request_timeout_ms, self._alter_still_wanted)
        self.queries = ClientQueries(self, self.purgatory, c.controller_id)

    # what tests look into, under the names they had before the components were split out
    @property
    def _fetchers(self) -> dict[int, Fetcher]:
        return self.fetchers.by_leader

    @property
    def _parked(self) -> list[ParkedFetch]:
        return self.purgatory.parked

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
        self.fetchers.link_lost(node, now)
        if not outbound_only:
            self.purgatory.drop_from(node)
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
        return self.alter_channel.lost(now)

    def _alter_still_wanted(self, req: AlterPartitionRequest) -> bool:
        """The replica of `req.tp` still waits for `req` (a queued request goes only then)."""
        r = self.partitions.get(req.tp)
        return r is not None and r.pending_alter is not None and r.pending_alter.correlation_id == req.correlation_id

    def handle(self, src: int | str, msg: object, now: int) -> Actions:
        acts = Actions()
        if self.state == SHUT_DOWN:
            return acts
        if isinstance(msg, FetchRequest):
            self.purgatory.on_fetch(src, msg, now, acts)  # type: ignore[arg-type]
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
            acts.send(src, self.queries.metadata(msg))
        elif isinstance(msg, OffsetsForLeaderEpochRequest):
            acts.send(src, self.queries.offsets_for_leader_epoch(msg))
        elif isinstance(msg, GetReplicaLogInfoRequest):
            acts.send(src, self.queries.log_info(msg))
        elif isinstance(msg, DeleteRecordsRequest):
            self.queries.delete_records(src, msg, now, acts)
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
        self.fetchers.expire(now)
        self.purgatory.wake(now, acts, None, expired_only=True)
        ev = ReplicaEvents()
        if now >= self._next_isr_check:
            self._next_isr_check = now + c.replica_lag_time_max_ms // 2
            for r in self.partitions.values():
                r.maybe_shrink_isr(self.image, now, ev)
                self.settle(r, ev, now, acts)
                ev = ReplicaEvents()
        for r in self.partitions.values():
            if r.role == LEADER:
                ev.alter_partition = r.alter_timed_out(now, c.request_timeout_ms)
                r.maybe_propose_recovered(self.image, now, ev)  # again, after an answer that left it RECOVERING
                r.expire_produces(now, ev)
                r.expire_deletes(now, ev)
                if r.pending_alter is None:
                    r.maybe_advance_hwm(now, ev)
                self.settle(r, ev, now, acts)
                ev = ReplicaEvents()
        self.alter_channel.resend_timed_out(now, acts)
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
        ds.extend(self.fetchers.deadlines())
        ds.extend(self.purgatory.deadlines())
        ds.extend(self.alter_channel.deadlines())
        for r in self.partitions.values():
            if r.role == LEADER:
                if (d := r.alter_deadline(c.request_timeout_ms)) is not None:
                    ds.append(d)
                ds.extend(p.deadline for p in r.pending_produce)
                ds.extend(d.deadline for d in r.pending_deletes)
            elif r.role == FOLLOWER and r.fetch_backoff_until > 0 and self.fetchers.idle(r.leader_id):
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
            self.purgatory.wake(now, acts, set(touched))
            self._send_fetches(now, acts)

    def _remove_partition(self, tp: TopicPartition, now: int, acts: Actions, topic_deleted: bool = True) -> None:
        """The topic was deleted (or a reassignment moved the partition off this broker):
        fail what waits on the replica, forget it, delete its log."""
        r = self.partitions.pop(tp)
        ev = ReplicaEvents()
        r._lose_leadership(ev, ErrorCode.unknown_topic_or_partition if topic_deleted else ErrorCode.not_leader_or_follower)
        answer_clients(ev, acts)
        self._hwm_checkpoint.pop(tp, None)
        self.alter_channel.forget(tp)
        acts.other.append(DeletePartitionLog(tp, topic_deleted))
        self.purgatory.wake(now, acts, {tp})

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
        self.settle(r, ev, now, acts)

    # ------------------------------------------------------------ replica events
    def settle(self, r: PartitionReplica, ev: ReplicaEvents, now: int, acts: Actions) -> None:
        """A call of `r` is done: its storage failures and truncations to log, its clients'
        answers, its AlterPartition to the channel, and the parked fetches it makes worth
        answering (records appended or the HWM moved) served again."""
        drain_failures(r, acts)
        answer_clients(ev, acts)
        if ev.alter_partition is not None:
            self.alter_channel.send(ev.alter_partition, now, acts)
        if ev.hwm_changed or ev.appended:
            self.purgatory.wake(now, acts, {r.tp})

    def _on_alter_response(self, msg: AlterPartitionResponse, now: int, acts: Actions) -> None:
        self.alter_channel.answered(msg, now, acts)
        r = self.partitions.get(msg.tp)
        if r is None:
            return
        ev = ReplicaEvents()
        r.handle_alter_response(
            msg.correlation_id, msg.error, msg.isr, msg.partition_epoch, msg.leader_epoch, msg.leader_recovery_state, now, ev
        )
        self.settle(r, ev, now, acts)

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
        self.settle(r, ev, now, acts)

    # ------------------------------------------------------------ fetch: follower side
    def _send_fetches(self, now: int, acts: Actions) -> None:
        if self.broker_epoch < 0 or self.state == SHUT_DOWN:
            return
        self.fetchers.send(self.broker_epoch, now, acts)

    def _on_fetch_response(self, src: int, msg: FetchResponse, now: int, acts: Actions) -> None:
        if self.fetchers.on_response(src, msg, now, acts):
            self._send_fetches(now, acts)

    # ------------------------------------------------------------ small requests
    def init_producer_id(self) -> tuple[ErrorCode, int]:
        """InitProducerId without a transactional id: a new producer id (epoch 0) that no
        broker of the cluster ever handed out (see producers.ProducerIdAllocator)."""
        pid = self._producer_ids.allocate(self.broker_epoch if self.state in (RUNNING, RECOVERY) else -1)
        return (ErrorCode.none, pid) if pid is not None else (ErrorCode.coordinator_not_available, -1)

    def leader_error(self, tp: TopicPartition) -> ErrorCode:
        """Whether this broker leads `tp` now (what a produce with acks=0 would find)."""
        r = self.partitions.get(tp)
        if r is None:
            return self.queries.missing_error(tp)
        return ErrorCode.none if r.role == LEADER else ErrorCode.not_leader_or_follower

    def list_offset(self, tp: TopicPartition, current_leader_epoch: int, timestamp: int,
                    read_committed: bool = False, debug: bool = False) -> ListOffsetResult:
        """ListOffsets for one partition (client_queries.py `ClientQueries.list_offset`)."""
        return self.queries.list_offset(tp, current_leader_epoch, timestamp, read_committed, debug)
