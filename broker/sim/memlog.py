"""An in-memory `PartitionLog` (broker/logapi.py) whose unsynced suffix can be lost.

Batches are kept whole, as bytes, with their base offset, last offset and leader epoch.
`flush()` moves the recovery point to the LEO; `lose_unsynced()` models a power loss:
everything at or after the recovery point disappears and the epoch cache is rebuilt from
the surviving batches (as Kafka's recovery does).
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass

from broker.logapi import OffsetOutOfRange
from broker.sim.batches import header, split_batches, stamp
from broker.storage.epoch_cache import EpochCache


@dataclass(frozen=True, slots=True)
class StoredBatch:
    base: int
    last: int
    epoch: int
    crc: int
    data: bytes


class InMemoryPartitionLog:
    """One replica's log, in memory."""

    def __init__(self) -> None:
        self._batches: list[StoredBatch] = []
        self._bases: list[int] = []
        self._epochs = EpochCache()
        self._start = 0
        self._recovery_point = 0
        self.truncation_mark: int | None = None  # the lowest offset truncated since the oracle last looked

    # ---- PartitionLog
    @property
    def log_start_offset(self) -> int:
        return self._start

    @property
    def log_end_offset(self) -> int:
        return self._batches[-1].last + 1 if self._batches else self._start

    @property
    def recovery_point(self) -> int:
        return self._recovery_point

    def _add(self, b: StoredBatch) -> None:
        self._batches.append(b)
        self._bases.append(b.base)
        e = self._epochs.entries
        if not e or b.epoch > e[-1][0]:  # the common case (same epoch) without a call
            self._epochs.assign(b.epoch, b.base)

    def append_as_leader(self, batches: bytes, leader_epoch: int) -> tuple[int, int]:
        parts = split_batches(batches)
        if not parts:
            raise ValueError("no batch to append")
        first = self.log_end_offset
        off = first
        for raw in parts:
            _, delta, _, crc = header(raw)
            self._add(StoredBatch(off, off + delta, leader_epoch, crc, stamp(raw, off, leader_epoch)))
            off += delta + 1
        return first, off - 1

    def append_as_follower(self, batches: bytes) -> int:
        for raw in split_batches(batches):
            base, delta, epoch, crc = header(raw)
            if base != self.log_end_offset:
                raise ValueError(f"follower append at offset {base}, LEO is {self.log_end_offset}")
            self._add(StoredBatch(base, base + delta, epoch, crc, raw))
        return self.log_end_offset

    def _index(self, offset: int) -> int:
        """Index of the batch containing `offset` (offset within the log)."""
        return bisect_right(self._bases, offset) - 1

    def read(self, offset: int, max_bytes: int, upper_bound: int | None = None) -> bytes:
        leo = self.log_end_offset
        if offset < self._start or offset > leo:
            raise OffsetOutOfRange(f"offset {offset} outside [{self._start}, {leo}]")
        if offset == leo:
            return b""
        out, size = [], 0
        for b in self._batches[self._index(offset) :]:
            if upper_bound is not None and b.last >= upper_bound:
                break
            if out and size + len(b.data) > max_bytes:
                break
            out.append(b.data)
            size += len(b.data)
        return b"".join(out)

    def truncate_to(self, offset: int) -> None:
        if offset >= self.log_end_offset:
            # Kafka truncates the epoch cache even then: an epoch a leader assigned at its
            # LEO without writing anything must not survive as a fetch's last epoch.
            self._epochs.truncate_from_end(offset)
            return
        i = max(self._index(offset), 0)  # batches go whole: the one containing `offset` too
        del self._batches[i:]
        del self._bases[i:]
        leo = self.log_end_offset
        self._epochs.truncate_from_end(leo)
        self._recovery_point = min(self._recovery_point, leo)
        self._mark(leo)

    def _mark(self, offset: int) -> None:
        self.truncation_mark = offset if self.truncation_mark is None else min(self.truncation_mark, offset)

    def flush(self) -> None:
        self._recovery_point = self.log_end_offset

    def maybe_increment_log_start_offset(self, offset: int) -> bool:
        offset = min(offset, self.log_end_offset)
        if offset <= self._start:
            return False
        self._start = offset
        i = max(self._index(offset), 0)
        del self._batches[:i]
        del self._bases[:i]
        self._epochs.truncate_from_start(offset)
        self._recovery_point = max(self._recovery_point, offset)
        return True

    def truncate_fully_and_start_at(self, offset: int) -> None:
        self._batches, self._bases, self._epochs = [], [], EpochCache()
        self._start = self._recovery_point = offset
        self._mark(offset)

    def latest_epoch(self) -> int:
        return self._epochs.latest_epoch()

    def epoch_entries(self) -> list[tuple[int, int]]:
        return list(self._epochs.entries)

    def assign_epoch_start(self, epoch: int, start_offset: int) -> None:
        self._epochs.assign(epoch, start_offset)

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        return self._epochs.end_offset_for(epoch, self.log_end_offset)

    # ---- simulation-only
    def lose_unsynced(self) -> None:
        """Power loss: drop everything at or after the recovery point; rebuild the cache."""
        keep = [b for b in self._batches if b.last < self._recovery_point]
        lost = len(keep) != len(self._batches)
        self._batches, self._bases, self._epochs = [], [], EpochCache()
        for b in keep:
            self._add(b)
        if lost:
            self._mark(self.log_end_offset)

    def batches(self) -> list[StoredBatch]:
        return self._batches

    def batch_at(self, offset: int) -> StoredBatch | None:
        if offset < self._start or offset >= self.log_end_offset:
            return None
        return self._batches[self._index(offset)]

    def pop_truncation_mark(self) -> int | None:
        """The lowest offset truncated since the last call (None if none)."""
        m, self.truncation_mark = self.truncation_mark, None
        return m
