"""The client-facing queries a broker answers from its replicas and its metadata image,
sans-IO: ListOffsets, OffsetsForLeaderEpoch, DeleteRecords, Metadata, and the
GetReplicaLogInfo the controller's unclean recovery asks (KIP-966). Each is served by the
partition's leader with epoch fencing, except ListOffsets for a debug follower (any
replica answers), GetReplicaLogInfo (any replica) and Metadata (any broker).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from kio.schema.errors import ErrorCode

from broker.core.fetch_purgatory import FetchPurgatory
from broker.core.messages import (
    Actions,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    GetReplicaLogInfoRequest,
    GetReplicaLogInfoResponse,
    MetadataRequest,
    MetadataResponse,
    OffsetsForLeaderEpochRequest,
    OffsetsForLeaderEpochResponse,
    PartitionMetadata,
    TopicPartition,
)
from broker.core.metadata import MetadataImage
from broker.core.replica import PartitionReplica, ReplicaEvents
from broker.logapi import STORAGE_ERRORS, PartitionLog

# ListOffsets special timestamps (Kafka's ListOffsetsRequest).
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3


class QueryHost(Protocol):
    """What the queries need of the broker that owns the replicas (broker.py `Broker`)."""

    @property
    def id(self) -> int: ...

    @property
    def broker_epoch(self) -> int: ...

    @property
    def partitions(self) -> dict[TopicPartition, PartitionReplica]: ...

    @property
    def image(self) -> MetadataImage: ...

    def settle(self, r: PartitionReplica, ev: ReplicaEvents, now: int, acts: Actions) -> None:
        """A call of `r` is done: act on what `ev` holds (broker.py `Broker.settle`)."""


@dataclass(frozen=True, slots=True)
class ListOffsetResult:
    """ListOffsets for one partition: the offset (-1 if none matches), the timestamp of
    the record found (-1 unless looked up by timestamp) and its leader epoch."""

    error: ErrorCode
    offset: int = -1
    timestamp: int = -1
    leader_epoch: int = -1


class ClientQueries:
    """The queries of one broker (`host`); DeleteRecords answers the parked fetches of
    `purgatory` at once (its followers learn the new log start)."""

    def __init__(self, host: QueryHost, purgatory: FetchPurgatory, controller_id: int) -> None:
        self._host = host
        self._purgatory = purgatory
        self.controller_id = controller_id

    def missing_error(self, tp: TopicPartition) -> ErrorCode:
        """The error for a partition without a local replica."""
        return ErrorCode.not_leader_or_follower if tp in self._host.image.partitions else ErrorCode.unknown_topic_or_partition

    def offsets_for_leader_epoch(self, msg: OffsetsForLeaderEpochRequest) -> OffsetsForLeaderEpochResponse:
        r = self._host.partitions.get(msg.tp)
        if r is None:
            return OffsetsForLeaderEpochResponse(msg.correlation_id, msg.tp, ErrorCode.not_leader_or_follower)
        err, eo = r.end_offset_for_epoch(msg.current_leader_epoch, msg.leader_epoch)
        return OffsetsForLeaderEpochResponse(msg.correlation_id, msg.tp, err, eo.epoch, eo.end_offset)

    def list_offset(self, tp: TopicPartition, current_leader_epoch: int, timestamp: int,
                    read_committed: bool = False, debug: bool = False) -> ListOffsetResult:
        """ListOffsets (consumer view, served by the leader with epoch fencing): earliest
        (-2), latest (-1: the HWM, or the LSO for `read_committed`) or the first offset
        with a timestamp >= `timestamp` below the HWM (the log's `offset_for_timestamp`,
        if it has one). `debug` (Kafka's DEBUG_FOLLOWER_ID, replica id -2): any replica
        answers, and latest is its log end offset."""
        r = self._host.partitions.get(tp)
        if r is None:
            return ListOffsetResult(self.missing_error(tp))
        err = ErrorCode.none if debug else r.check_leader_epoch(current_leader_epoch)
        if err is not ErrorCode.none:
            return ListOffsetResult(err)
        log = r.log
        if timestamp == EARLIEST_TIMESTAMP:
            return ListOffsetResult(ErrorCode.none, log.log_start_offset, -1, epoch_at(log, log.log_start_offset))
        if timestamp == LATEST_TIMESTAMP:
            end = log.log_end_offset if debug else r.last_stable_offset() if read_committed else r.high_watermark
            return ListOffsetResult(ErrorCode.none, end, -1, epoch_at(log, end - 1))
        lookup = getattr(log, "offset_for_timestamp", None)
        if timestamp < 0 or lookup is None:
            return ListOffsetResult(ErrorCode.invalid_request if timestamp < 0 else ErrorCode.unsupported_version)
        try:
            found = lookup(timestamp)  # (offset, timestamp, leader_epoch) of the first record at or after it
        except STORAGE_ERRORS:
            return ListOffsetResult(ErrorCode.kafka_storage_error)
        if found is None or found.offset >= (r.last_stable_offset() if read_committed else r.high_watermark):
            return ListOffsetResult(ErrorCode.none)
        return ListOffsetResult(ErrorCode.none, found.offset, found.timestamp, epoch_at(log, found.offset))

    def delete_records(self, src: int | str, msg: DeleteRecordsRequest, now: int, acts: Actions) -> None:
        """DeleteRecords for one partition (served by the leader): the log start moves, the
        followers' parked fetches are answered at once (they learn the new log start), and
        the answer waits for the low watermark (Kafka's DelayedDeleteRecords)."""
        r = self._host.partitions.get(msg.tp)
        if r is None:
            acts.send(src, DeleteRecordsResponse(msg.correlation_id, msg.tp, self.missing_error(msg.tp)))
            return
        err, start = r.delete_records(msg.offset)
        if err is not ErrorCode.none:
            acts.send(src, DeleteRecordsResponse(msg.correlation_id, msg.tp, err))
            return
        ev = ReplicaEvents()
        r.await_low_watermark(src, msg.correlation_id, start, now + msg.timeout_ms, self._host.image, ev)
        self._host.settle(r, ev, now, acts)
        self._purgatory.wake(now, acts, {msg.tp})

    def log_info(self, msg: GetReplicaLogInfoRequest) -> GetReplicaLogInfoResponse:
        h = self._host
        r = h.partitions.get(msg.tp)
        if r is None:
            return GetReplicaLogInfoResponse(msg.correlation_id, msg.tp, h.id, h.broker_epoch, -1, -1, ErrorCode.unknown_topic_or_partition)
        return GetReplicaLogInfoResponse(msg.correlation_id, msg.tp, h.id, h.broker_epoch, r.log.latest_epoch(), r.log.log_end_offset)

    def metadata(self, msg: MetadataRequest) -> MetadataResponse:
        image = self._host.image
        parts = tuple(
            PartitionMetadata(tp, reg.leader, reg.leader_epoch, reg.replicas, reg.isr, reg.elr)
            for tp, reg in image.partitions.items()
            if msg.topics is None or tp.topic in msg.topics
        )
        brokers = tuple(sorted(b for b, info in image.brokers.items() if not info.fenced))
        return MetadataResponse(msg.correlation_id, brokers, parts, self.controller_id)


def epoch_at(log: PartitionLog, offset: int) -> int:
    """The leader epoch of the record at `offset` per the epoch cache (-1 if unknown)."""
    epoch = -1
    for e, start in log.epoch_entries():
        if start > offset:
            break
        epoch = e
    return epoch
