"""The leader side of a partition replica serving requests (seed 003 2.2-2.7;
docs/protocol-rules.md "Fetch", "High watermark and acks"): a follower's fetch (its
divergence check and the follower state it updates), a consumer's read below the HWM or
LSO, produce with the idempotent producer checks and acks, DeleteRecords waiting for the
low watermark, and OffsetsForLeaderEpoch. One method a rule (Kafka's Partition.scala);
the ISR and HWM rules they call are replica_isr.py's.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from broker.core import safeguards as sg
from broker.core.messages import (
    DeleteRecordsResponse,
    EpochEndOffset,
    FetchPartition,
    FetchPartitionResponse,
    ProduceResponse,
)
from broker.core.metadata import MetadataImage
from broker.core.producers import TXN_DATA, BatchMeta, ProducerBatch, scan
from broker.core.replica_isr import IsrRules
from broker.core.replica_state import LEADER, FollowerState, PendingDelete, PendingProduce, ReplicaEvents
from broker.core.truncation import find_divergence
from broker.logapi import STORAGE_ERRORS, OffsetOutOfRange


class LeaderRules(IsrRules):
    """The leader's rules for fetches, produce and DeleteRecords."""

    # ------------------------------------------------------------ fetch
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

    def debug_read(self, offset: int, max_bytes: int) -> FetchPartitionResponse:
        """A fetch with Kafka's debugging replica id (-2, ReplicaVerificationTool's): any
        replica, leader or follower, answers with its own log up to its log end and its own
        high watermark, so a tool can compare the replicas' logs. No follower state changes."""
        if offset > self.log.log_end_offset or offset < self.log.log_start_offset:
            return self._error(ErrorCode.offset_out_of_range)
        try:
            records = self.log.read(offset, max_bytes) if offset < self.log.log_end_offset else b""
        except OffsetOutOfRange:
            return self._error(ErrorCode.offset_out_of_range)
        except STORAGE_ERRORS as e:
            self._failed("read for a debugging fetch", e)
            return self._error(ErrorCode.kafka_storage_error)
        return FetchPartitionResponse(self.tp, ErrorCode.none, self.high_watermark, self.log.log_start_offset, None,
                                      records, log_end_offset=self.log.log_end_offset)

    # ------------------------------------------------------------ produce
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
                ev.produce_responses.append((p.client, ProduceResponse(p.correlation_id, self.tp, ErrorCode.request_timed_out,
                                                                       p.base_offset)))
            else:
                keep.append(p)
        self.pending_produce = keep

    # ------------------------------------------------------------ DeleteRecords
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

    # ------------------------------------------------------------ OffsetsForLeaderEpoch
    def end_offset_for_epoch(self, current_leader_epoch: int, epoch: int) -> tuple[ErrorCode, EpochEndOffset]:
        """OffsetsForLeaderEpoch (served by the leader, with epoch fencing)."""
        err = self.check_leader_epoch(current_leader_epoch)
        if err is not ErrorCode.none:
            return err, EpochEndOffset(-1, -1)
        e, o = self.log.end_offset_for_epoch(epoch)
        return ErrorCode.none, EpochEndOffset(e, o)
