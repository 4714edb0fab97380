"""The follower side of a partition replica (seed 003 2.3-2.5; docs/protocol-rules.md
"Fetch", "Truncation by leader epoch"): what it asks its leader for, and what it does with
the answer: append, truncate on a diverging epoch or out of range, follow the leader's HWM
and log start offset. One method a rule (Kafka's Partition.scala and its fetcher thread);
the state is replica_state.py's.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from broker.core import safeguards as sg
from broker.core.messages import FetchPartition, FetchPartitionResponse
from broker.core.producers import scan
from broker.core.replica_state import FOLLOWER, ReplicaState
from broker.core.truncation import truncation_offset
from broker.logapi import STORAGE_ERRORS


class FollowerRules(ReplicaState):
    """The follower's rules."""

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
