"""One partition's replica on one broker: leader or follower state, fetch handling, HWM,
ISR changes and acks (seed 003 sections 2.2-2.10; docs/protocol-rules.md "Fetch", "Truncation
by leader epoch", "High watermark and acks", "ISR changes").

`PartitionReplica` is driven by the `Broker` (broker.py), which owns the network side:
it routes fetches, produce requests and metadata here and sends what these methods
return. Methods take `now` in ms; nothing here does I/O except through the injected
`PartitionLog`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum

from kio.schema.errors import ErrorCode

from broker.core import safeguards as sg
from broker.core.messages import (
    NO_LEADER,
    UNDEFINED_OFFSET,
    AlterPartitionRequest,
    BrokerIdAndEpoch,
    DeleteRecordsResponse,
    EpochEndOffset,
    FetchPartition,
    FetchPartitionResponse,
    ProduceResponse,
    TopicPartition,
)
from broker.core.metadata import RECOVERED, RECOVERING, MetadataImage, PartitionRegistration
from broker.core.producers import TXN_DATA, BatchMeta, ProducerBatch, ProducerStateTable, scan
from broker.core.transactions import AbortedTxn, TxnIndex
from broker.core.truncation import find_divergence, truncation_offset
from broker.logapi import STORAGE_ERRORS, OffsetOutOfRange, PartitionLog
from broker.records import BatchError

REBUILD_ERRORS: tuple[type[BaseException], ...] = (*STORAGE_ERRORS, BatchError)  # what stops a rebuilding scan


class ReplicaRole(StrEnum):
    """A replica's role, from the partition's registration in the metadata image: any role
    may follow any other (a new registration decides), so there is no transition table."""

    LEADER = "leader"
    FOLLOWER = "follower"
    OFFLINE = "offline"


LEADER, FOLLOWER, OFFLINE = ReplicaRole.LEADER, ReplicaRole.FOLLOWER, ReplicaRole.OFFLINE


@dataclass(slots=True)
class FollowerState:
    """What the leader knows of one follower (reset on every new leader epoch)."""

    log_end_offset: int = UNDEFINED_OFFSET
    broker_epoch: int = -1
    last_fetch_time: int = -1
    last_caught_up_time: int = 0
    fetched_in_epoch: bool = False
    last_fetch_leader_leo: int = -1
    log_start_offset: int = UNDEFINED_OFFSET  # as its last fetch said


@dataclass(slots=True)
class PendingDelete:
    """A DeleteRecords waiting for the low watermark (Kafka's DelayedDeleteRecords)."""

    client: int | str
    correlation_id: int
    required_offset: int
    deadline: int


@dataclass(slots=True)
class PendingProduce:
    client: int | str
    correlation_id: int
    required_offset: int
    base_offset: int
    deadline: int


@dataclass(slots=True)
class PendingAlter:
    """The ISR change in flight. It stays pending (the Maximal ISR in force) until it is
    answered or newer metadata arrives, as in Kafka: an unanswered request may still be
    applied, so the leader may not act as if it were lost (`alter_timed_out` sends it again)."""

    correlation_id: int
    proposed_isr: tuple[int, ...]
    recovery_state: int
    sent_at: int
    request: AlterPartitionRequest | None = None
    outdated: bool = False  # answered "the controller has newer state": wait for that metadata


@dataclass(slots=True)
class ReplicaEvents:
    """Side effects of one call, for the Broker to turn into messages."""

    produce_responses: list[tuple[int | str, ProduceResponse]] = field(default_factory=list)
    delete_responses: list[tuple[int | str, DeleteRecordsResponse]] = field(default_factory=list)
    alter_partition: AlterPartitionRequest | None = None
    hwm_changed: bool = False
    appended: bool = False


@dataclass(frozen=True, slots=True)
class ReplicaSettings:
    broker_id: int
    replica_lag_time_max_ms: int
    min_isr: int
    guards: sg.SafeguardSet


class PartitionReplica:
    """The local replica of one partition."""

    def __init__(
        self, tp: TopicPartition, log: PartitionLog, settings: ReplicaSettings, next_id: Callable[[], int], hwm: int = 0
    ) -> None:
        self.tp = tp
        self._next_id = next_id
        self.log = log
        self.s = settings
        self.role: ReplicaRole = OFFLINE
        self.leader_id = NO_LEADER
        self.leader_epoch = -1
        self.partition_epoch = -1
        self.replicas: tuple[int, ...] = ()
        self.isr: tuple[int, ...] = ()
        self.maximal_isr: tuple[int, ...] = ()
        self.recovery_state = RECOVERED
        self.high_watermark = min(hwm, log.log_end_offset)
        self.leso = 0
        self.followers: dict[int, FollowerState] = {}
        self.pending_alter: PendingAlter | None = None
        self.pending_produce: list[PendingProduce] = []
        self.pending_deletes: list[PendingDelete] = []
        self.fetch_backoff_until = 0
        self.failures: list[tuple[str, str]] = []  # (operation, error) of storage failures, drained by the Broker
        self.truncations: list[tuple[int, int, str]] = []  # (from LEO, to, reason), drained by the Broker
        self.producers = ProducerStateTable()  # idempotent producers (broker/core/producers.py)
        self.txns = TxnIndex()  # transactions (broker/core/transactions.py)

    def load_producer_state(self) -> None:
        """Rebuild the producer state and the transaction index from the log: the index
        from the log start, the producer state from `log.producer_state_start` (the
        on-disk log's active segment) or the log start, both to the LEO."""
        log = self.log
        self.producers = ProducerStateTable()
        self.txns = TxnIndex()
        pstart = max(getattr(log, "producer_state_start", log.log_start_offset), log.log_start_offset)
        off = log.log_start_offset
        try:
            while off < log.log_end_offset:
                batches, end = scan(log.read(off, 1 << 20))
                for b in batches:
                    self.txns.apply(b)
                    if b.last_offset >= pstart:
                        self.producers.record(b)
                if end <= off:
                    break
                off = end
        except REBUILD_ERRORS as e:  # what was read stays; later producers count as unknown
            self._failed("producer state rebuild", e)

    def _record_batches(self, batches: list[ProducerBatch]) -> None:
        for b in batches:
            self.producers.record(b)
            self.txns.apply(b)

    def last_stable_offset(self) -> int:
        """The LSO: below the oldest ongoing transaction and the HWM (transactions.py)."""
        return self.txns.last_stable_offset(self.high_watermark)

    def aborted_between(self, start: int, end: int) -> list[AbortedTxn]:
        """The aborted transactions with records in [start, end) (a read_committed fetch's
        answer); those wholly below the log start are forgotten first, wherever it moved."""
        self.txns.forget_before(self.log.log_start_offset)
        return self.txns.aborted_between(start, end)

    def _truncate(self, offset: int, reason: str) -> None:
        leo = self.log.log_end_offset
        self.log.truncate_to(offset)
        self.producers.truncate(offset)
        if self.txns.seen:  # a marker may be gone: rebuild the transaction index
            self.load_producer_state()
        if self.log.log_end_offset < leo:
            self.truncations.append((leo, self.log.log_end_offset, reason))

    def _failed(self, operation: str, e: BaseException) -> None:
        self.failures.append((operation, f"{type(e).__name__}: {e}"))

    # ------------------------------------------------------------ metadata
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

    # ------------------------------------------------------------ leader: fetch
    def check_leader_epoch(self, current_leader_epoch: int) -> ErrorCode:
        if self.role != LEADER:
            return ErrorCode.not_leader_or_follower
        if current_leader_epoch >= 0 and current_leader_epoch < self.leader_epoch:
            return ErrorCode.fenced_leader_epoch
        if current_leader_epoch > self.leader_epoch:
            return ErrorCode.unknown_leader_epoch
        return ErrorCode.none

    def _error(self, code: ErrorCode, **kw: object) -> FetchPartitionResponse:
        return FetchPartitionResponse(self.tp, code, self.high_watermark, self.log.log_start_offset, **kw)  # type: ignore[arg-type]

    def handle_follower_fetch(
        self, replica_id: int, replica_epoch: int, p: FetchPartition, image: MetadataImage, now: int, ev: ReplicaEvents
    ) -> FetchPartitionResponse:
        """Leader side of one partition of a replica fetch (Partition.fetchRecords)."""
        err = self.check_leader_epoch(p.current_leader_epoch)
        if err is not ErrorCode.none:
            return self._error(err)
        follower = self.followers.get(replica_id)
        if follower is None:
            return self._error(ErrorCode.not_leader_or_follower)
        if self.s.guards.on(sg.BROKER_EPOCH_CHECK) and replica_epoch < image.broker_epoch(replica_id):
            return self._error(ErrorCode.not_leader_or_follower)
        leo = self.log.log_end_offset
        if p.fetch_offset < self.log.log_start_offset:
            return self._error(ErrorCode.offset_out_of_range, log_end_offset=leo)
        if self.s.guards.on(sg.EPOCH_TRUNCATION):
            div = find_divergence(self.log, p.fetch_offset, p.last_fetched_epoch)
            if div is not None:  # KAFKA-13141: no follower state update on divergence
                return self._error(ErrorCode.none, diverging_epoch=div)
        if p.fetch_offset > leo:
            return self._error(ErrorCode.offset_out_of_range, log_end_offset=leo)
        try:
            records = self.log.read(p.fetch_offset, p.partition_max_bytes) if p.fetch_offset < leo else b""
        except STORAGE_ERRORS as e:
            self._failed("read for a follower", e)
            return self._error(ErrorCode.kafka_storage_error)
        follower.log_start_offset = p.log_start_offset
        self._update_follower(replica_id, follower, replica_epoch, p.fetch_offset, leo, now, image, ev)
        self._complete_deletes(image, ev)
        return FetchPartitionResponse(self.tp, ErrorCode.none, self.high_watermark, self.log.log_start_offset, None, records,
                                      last_stable_offset=self.last_stable_offset())

    def _update_follower(
        self, rid: int, f: FollowerState, epoch: int, fetch_offset: int, leo: int, now: int, image: MetadataImage, ev: ReplicaEvents
    ) -> None:
        if fetch_offset >= leo:
            f.last_caught_up_time = now
        elif f.last_fetch_leader_leo >= 0 and fetch_offset >= f.last_fetch_leader_leo:
            f.last_caught_up_time = max(f.last_caught_up_time, f.last_fetch_time)
        f.log_end_offset = fetch_offset
        f.broker_epoch = epoch
        f.last_fetch_time = now
        f.last_fetch_leader_leo = leo
        f.fetched_in_epoch = True
        self.maybe_expand_isr(rid, f, image, now, ev)
        self.maybe_advance_hwm(now, ev)

    def consumer_read(self, offset: int, max_bytes: int, read_committed: bool = False) -> FetchPartitionResponse:
        """A consumer fetch: records below the HWM only (below the LSO with
        `read_committed`).

        As in Kafka, only an offset outside [log start, LEO] is OFFSET_OUT_OF_RANGE; an offset
        between the HWM and the LEO gets an empty answer. (A new leader's HWM can lag behind
        the old leader's until its followers fetch: a consumer positioned at the old HWM must
        wait, not be told its offset is gone, which makes clients reset to the start.)"""
        if self.role != LEADER:
            return self._error(ErrorCode.not_leader_or_follower)
        if offset > self.log.log_end_offset or offset < self.log.log_start_offset:
            return self._error(ErrorCode.offset_out_of_range)
        limit = self.last_stable_offset() if read_committed else self.high_watermark
        try:
            records = self.log.read(offset, max_bytes, limit) if offset < limit else b""
        except OffsetOutOfRange:
            return self._error(ErrorCode.offset_out_of_range)
        except STORAGE_ERRORS as e:
            self._failed("read for a consumer", e)
            return self._error(ErrorCode.kafka_storage_error)
        return FetchPartitionResponse(self.tp, ErrorCode.none, self.high_watermark, self.log.log_start_offset, None, records,
                                      last_stable_offset=self.last_stable_offset())

    # ------------------------------------------------------------ leader: ISR and HWM
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

    # ------------------------------------------------------------ leader: produce
    def append_produce(
        self, client: int | str, correlation_id: int, acks: int, records: bytes, timeout_ms: int, now: int, ev: ReplicaEvents
    ) -> ProduceResponse | None:
        """Append as leader. Returns the immediate response (None when it waits for the HWM)."""
        if self.role != LEADER:
            return ProduceResponse(correlation_id, self.tp, ErrorCode.not_leader_or_follower)
        if acks == -1 and not self._effective_isr_ok():
            return ProduceResponse(correlation_id, self.tp, ErrorCode.not_enough_replicas)
        idempotent, _ = scan(records)
        for b in idempotent:  # Produce v3+: one batch (a marker: one control batch)
            err, dup = self._check_producer(b)
            if err is not ErrorCode.none:
                return ProduceResponse(correlation_id, self.tp, err)
            if dup is not None:  # a retry: the first copy's offsets, acknowledged as it would be
                return self._ack(client, correlation_id, acks, dup.first_offset, dup.last_offset, timeout_ms, now, ev)
        try:
            first, last = self.log.append_as_leader(records, self.leader_epoch)
        except STORAGE_ERRORS as e:
            self._failed("append", e)
            return ProduceResponse(correlation_id, self.tp, ErrorCode.kafka_storage_error)
        except ValueError as e:  # a bad batch: records.BatchError names the Kafka error
            code = getattr(e, "error_code", ErrorCode.corrupt_message)
            return ProduceResponse(correlation_id, self.tp, code if isinstance(code, ErrorCode) else ErrorCode.corrupt_message)
        ev.appended = True
        self._record_batches([ProducerBatch(b.producer_id, b.epoch, b.first_seq, b.last_seq, first + b.first_offset,
                                            first + b.last_offset, b.txn) for b in idempotent])
        return self._ack(client, correlation_id, acks, first, last, timeout_ms, now, ev)

    def _check_producer(self, b: ProducerBatch) -> tuple[ErrorCode, BatchMeta | None]:
        """A leader's producer checks of one batch (producers.py): (error, cached batch
        of a retry or None)."""
        if b.is_marker:
            return self.producers.check_marker(b.producer_id, b.epoch), None
        if b.first_seq < 0 or b.epoch < 0:
            return ErrorCode.invalid_record, None
        fence = b.txn != TXN_DATA or self.s.guards.on(sg.PRODUCER_EPOCH_FENCE)
        return self.producers.check(b.producer_id, b.epoch, b.first_seq, b.last_seq, fence)

    def _ack(self, client: int | str, correlation_id: int, acks: int, first: int, last: int, timeout_ms: int, now: int,
             ev: ReplicaEvents) -> ProduceResponse | None:
        """Acknowledge records at [first, last]: now (acks 0/1), or once the HWM passes them."""
        resp = None
        if acks == -1:
            if self.high_watermark > last:
                resp = ProduceResponse(correlation_id, self.tp, ErrorCode.none, first)
            else:
                self.pending_produce.append(PendingProduce(client, correlation_id, last + 1, first, now + timeout_ms))
        else:
            resp = ProduceResponse(correlation_id, self.tp, ErrorCode.none, first)
        self.maybe_advance_hwm(now, ev)
        return resp

    def expire_produces(self, now: int, ev: ReplicaEvents) -> None:
        keep = []
        for p in self.pending_produce:
            if now >= p.deadline:
                ev.produce_responses.append((p.client, ProduceResponse(p.correlation_id, self.tp, ErrorCode.request_timed_out, p.base_offset)))
            else:
                keep.append(p)
        self.pending_produce = keep

    # ------------------------------------------------------------ follower
    def fetch_partition(self) -> FetchPartition:
        return FetchPartition(
            self.tp, self.leader_epoch, self.log.log_end_offset,
            self.log.latest_epoch() if self.s.guards.on(sg.EPOCH_TRUNCATION) else -1, self.log.log_start_offset,
        )

    def handle_fetch_response(self, sent: FetchPartition, r: FetchPartitionResponse, now: int, backoff_ms: int) -> None:
        """Follower side of one partition of a fetch response."""
        if self.role != FOLLOWER or sent.current_leader_epoch != self.leader_epoch or sent.fetch_offset != self.log.log_end_offset:
            return  # stale response (the fetch state moved on)
        try:
            self._apply_fetched(r, now, backoff_ms)
        except STORAGE_ERRORS as e:  # the log stays as it is; fetch again after the backoff
            self._failed("follower append or truncation", e)
            self.fetch_backoff_until = now + backoff_ms
        except ValueError as e:  # a batch from the leader that does not validate (CRC, offsets)
            self._failed("follower append (bad batch from the leader)", e)
            self.fetch_backoff_until = now + backoff_ms

    def _apply_fetched(self, r: FetchPartitionResponse, now: int, backoff_ms: int) -> None:
        if r.error is ErrorCode.offset_out_of_range:
            if 0 <= r.log_end_offset < self.log.log_end_offset:
                self._truncate(r.log_end_offset, "out-of-range")
                self.high_watermark = min(self.high_watermark, self.log.log_end_offset)
            elif r.log_start_offset > self.log.log_end_offset:
                self._truncate_fully(r.log_start_offset)
            else:
                self.fetch_backoff_until = now + backoff_ms
            return
        if r.error is not ErrorCode.none:
            self.fetch_backoff_until = now + backoff_ms
            return
        if r.diverging_epoch is not None:  # KAFKA-14704: truncate, ignore records and HWM
            offset, _final = truncation_offset(self.log, r.diverging_epoch)
            self._truncate(offset, "diverging-epoch")
            self.high_watermark = min(self.high_watermark, self.log.log_end_offset)
            return
        if r.records:
            self.log.append_as_follower(r.records)
            self._record_batches(scan(r.records)[0])
        self.high_watermark = min(r.high_watermark, self.log.log_end_offset)
        if r.log_start_offset > self.log.log_start_offset:  # follow the leader's (retention, DeleteRecords)
            self.log.maybe_increment_log_start_offset(min(r.log_start_offset, self.high_watermark))

    def _truncate_fully(self, leader_log_start: int) -> None:
        """The leader's log starts past our LEO (retention or DeleteRecords removed what we
        lack): start empty at its log start offset, as Kafka's truncateFullyAndStartAt."""
        leo = self.log.log_end_offset
        self.log.truncate_fully_and_start_at(leader_log_start)
        self.producers.truncate(0)
        self.high_watermark = leader_log_start
        self.truncations.append((leo, leader_log_start, "below-leader-log-start"))

    def delete_records(self, offset: int) -> tuple[ErrorCode, int]:
        """DeleteRecords on the leader (Partition.deleteRecordsOnLeader): the log start
        offset moves up to `offset` (-1: the high watermark). Returns the error and the
        leader's new log start offset, which `await_low_watermark` then waits for."""
        if self.role != LEADER:
            return ErrorCode.not_leader_or_follower, -1
        if offset == -1:
            offset = self.high_watermark
        if offset < 0 or offset > self.high_watermark:
            return ErrorCode.offset_out_of_range, -1
        try:
            self.log.maybe_increment_log_start_offset(offset)
        except STORAGE_ERRORS as e:
            self._failed("delete records", e)
            return ErrorCode.kafka_storage_error, -1
        return ErrorCode.none, self.log.log_start_offset

    def low_watermark(self, image: MetadataImage) -> int:
        """The lowest log start offset of the replicas on live brokers, this leader's
        included (Partition.lowWatermarkIfLeader; -1 while a follower has not said)."""
        low = self.log.log_start_offset
        for rid, f in self.followers.items():
            b = image.brokers.get(rid)
            if b is not None and not b.fenced:
                low = min(low, f.log_start_offset)
        return low

    def await_low_watermark(self, client: int | str, correlation_id: int, offset: int, deadline: int,
                            image: MetadataImage, ev: ReplicaEvents) -> None:
        """Answer DeleteRecords (in `ev`) once the low watermark reaches `offset`: now, after
        a follower's fetch, NOT_LEADER_OR_FOLLOWER when leadership goes, or REQUEST_TIMED_OUT
        at `deadline` (`expire_deletes`)."""
        self.pending_deletes.append(PendingDelete(client, correlation_id, offset, deadline))
        self._complete_deletes(image, ev)

    def _complete_deletes(self, image: MetadataImage, ev: ReplicaEvents) -> None:
        if not self.pending_deletes:
            return
        low = self.low_watermark(image)
        keep = []
        for d in self.pending_deletes:
            if low >= d.required_offset:
                ev.delete_responses.append((d.client, DeleteRecordsResponse(d.correlation_id, self.tp, ErrorCode.none, low)))
            else:
                keep.append(d)
        self.pending_deletes = keep

    def expire_deletes(self, now: int, ev: ReplicaEvents) -> None:
        keep = []
        for d in self.pending_deletes:
            if now >= d.deadline:
                ev.delete_responses.append((d.client, DeleteRecordsResponse(d.correlation_id, self.tp, ErrorCode.request_timed_out)))
            else:
                keep.append(d)
        self.pending_deletes = keep

    def end_offset_for_epoch(self, current_leader_epoch: int, epoch: int) -> tuple[ErrorCode, EpochEndOffset]:
        """OffsetsForLeaderEpoch (served by the leader, with epoch fencing)."""
        err = self.check_leader_epoch(current_leader_epoch)
        if err is not ErrorCode.none:
            return err, EpochEndOffset(-1, -1)
        e, o = self.log.end_offset_for_epoch(epoch)
        return ErrorCode.none, EpochEndOffset(e, o)

