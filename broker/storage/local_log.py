"""The segments of one partition's log and what the broker does with them every moment
(Kafka's LocalLog): append (as leader: offsets and the leader epoch stamped; as follower:
validated, as fetched), read, truncate, roll, flush, and the leader epoch cache.

Appends go to the last (active) segment, rolled when an append would take it past
`log.segment.bytes` (or fill an index); the rolled segment is then flushed in the
background (Kafka's default flush-on-roll) and the recovery point advances to the new
segment's base offset once it is durable. `flush()` makes everything durable at once. At
most MAX_OPEN_SEALED sealed segments keep their files open.

`LocalLog` is the base of `SegmentedLog` (log.py), which opens it (log_loader.py) and adds
retention and compaction (log_cleanup.py).
"""

from __future__ import annotations

import logging
import os
import threading
from bisect import bisect_right
from collections.abc import Callable
from typing import NamedTuple

from broker.core.messages import TopicPartition
from broker.logapi import OffsetOutOfRange
from broker.records import (
    MAGIC,
    BatchError,
    decode_records,
    iter_batches,
    stamped_prefix,
)
from broker.storage.checkpoints import LEADER_EPOCH_CHECKPOINT, write_epochs
from broker.storage.config import StorageConfig
from broker.storage.epoch_cache import EpochCache
from broker.storage.fileio import fsync_dir, fsync_path
from broker.storage.segment import Segment, StaleIndex, StorageError

MAX_OPEN_SEALED = 8

log_ = logging.getLogger("broker.storage.log")  # the name it had before log.py was split: what operators filter on


class TimestampOffset(NamedTuple):
    """What ListOffsets by timestamp answers: the first record at or after a timestamp."""

    offset: int
    timestamp: int
    leader_epoch: int


def partition_dir_name(tp: TopicPartition) -> str:
    return f"{tp.topic}-{tp.partition}"


def parse_partition_dir(name: str) -> TopicPartition | None:
    topic, sep, part = name.rpartition("-")
    if not sep or not topic or not part.isdigit():
        return None
    return TopicPartition(topic, int(part))


def _run_inline(fn: Callable[[], None]) -> None:
    fn()


class LocalLog:
    """One replica's segments of one topic-partition on disk (see the module docstring)."""

    def __init__(
        self,
        directory: str,
        tp: TopicPartition,
        config: StorageConfig,
        *,
        logger: logging.Logger | None = None,
        after_append: Callable[[LocalLog, int], None] | None = None,
        on_truncate: Callable[[LocalLog], None] | None = None,
        background: Callable[[Callable[[], None]], None] | None = None,
    ) -> None:
        self.dir = directory
        self.tp = tp
        self.config = config
        self.logger = logger or log_
        self._after_append = after_append
        self._on_truncate = on_truncate
        self._background = background or _run_inline
        self._segments: list[Segment] = []
        self._bases: list[int] = []
        self._start = 0
        self._rp = 0
        self._rp_lock = threading.Lock()
        self._truncations = 0
        self._epochs = EpochCache()
        self._epoch_path = os.path.join(directory, LEADER_EPOCH_CHECKPOINT)
        self._dir_dirty = False
        self._open_sealed: list[Segment] = []
        self._closed = False
        # what the last clean left ((base, size) of the cleanable segments) and when one of
        # the tombstones it kept expires: until then, the same segments need no new clean
        self._clean_state: tuple[list[tuple[int, int]], int] = ([], 0)

    # ================================================================ PartitionLog
    @property
    def log_start_offset(self) -> int:
        return self._start

    @property
    def log_end_offset(self) -> int:
        return self._segments[-1].next_offset

    @property
    def recovery_point(self) -> int:
        with self._rp_lock:
            return self._rp

    @property
    def size_in_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    def append_as_leader(self, batches: bytes, leader_epoch: int) -> tuple[int, int]:
        """Assign offsets from the LEO and stamp `leader_epoch` (the CRC does not cover
        either, so it stays valid), append with one pwritev. Checks framing and magic;
        the CRC is the Produce handler's `records.validate_for_append` (one CRC pass)."""
        view = memoryview(batches).cast("B") if not isinstance(batches, bytes) else memoryview(batches)
        hs = list(iter_batches(view, validate=False))
        if not hs:
            raise BatchError("no batch to append")
        for pos, _end, h in hs:
            if h.magic != MAGIC:
                raise BatchError(f"batch at byte {pos} has magic {h.magic}, only magic 2 is supported")
        first = off = self.log_end_offset
        iov: list[bytes | memoryview] = []
        meta: list[tuple[int, int, int]] = []
        messages = 0
        for pos, end, h in hs:
            iov.append(stamped_prefix(view, pos, off, leader_epoch))
            iov.append(view[pos + 16 : end])
            last = off + h.last_offset_delta
            meta.append((last, h.max_timestamp, end - pos))
            messages += h.records_count
            off = last + 1
        seg = self._active_for(len(view), off - 1)
        if self._epochs.assign(leader_epoch, first):
            self._save_epochs()  # before the data: a batch's epoch is always in the checkpoint
        seg.append(iov, meta)
        if self._after_append is not None:
            self._after_append(self, messages)
        return first, off - 1

    def append_as_follower(self, batches: bytes) -> int:
        """Append fetched batches as they are (validated: framing, magic, CRC-32C; the
        first must start at the LEO and each follow the previous). Returns the new LEO."""
        view = memoryview(batches).cast("B") if not isinstance(batches, bytes) else memoryview(batches)
        hs = list(iter_batches(view, validate=True))
        if not hs:
            return self.log_end_offset
        expected = self.log_end_offset
        meta: list[tuple[int, int, int]] = []
        messages = 0
        changed = False
        for _pos, _end, h in hs:
            if h.base_offset != expected:
                raise ValueError(f"follower append at offset {h.base_offset}, LEO is {expected}")
            changed |= self._epochs.assign(h.partition_leader_epoch, h.base_offset)
            meta.append((h.last_offset, h.max_timestamp, h.size))
            messages += h.records_count
            expected = h.last_offset + 1
        seg = self._active_for(len(view), expected - 1)
        if changed:
            self._save_epochs()
        seg.append([view], meta)
        if self._after_append is not None:
            self._after_append(self, messages)
        return expected

    def read(self, offset: int, max_bytes: int, upper_bound: int | None = None) -> bytes:
        leo = self.log_end_offset
        if offset < self._start or offset > leo:
            raise OffsetOutOfRange(f"offset {offset} outside [{self._start}, {leo}]")
        if offset == leo:
            return b""
        i = bisect_right(self._bases, offset) - 1
        parts: list[bytes] = []
        budget = max_bytes
        while i < len(self._segments):
            seg = self._segments[i]
            data, offset, stopped = self._segment_read(seg, offset, budget, upper_bound, not parts)
            if data:
                parts.append(data)
                budget -= len(data)
            if stopped or budget <= 0 or offset >= leo:
                break
            i += 1
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def _segment_read(self, seg: Segment, offset: int, max_bytes: int, upper_bound: int | None, min_one: bool):
        self._touch(seg)
        try:
            return seg.read(offset, max_bytes, upper_bound, min_one)
        except StaleIndex as e:
            self._rebuild_index(seg, str(e))
            return seg.read(offset, max_bytes, upper_bound, min_one)

    def _rebuild_index(self, seg: Segment, why: str) -> None:
        self.logger.warning(f"{partition_dir_name(self.tp)}: index {os.path.basename(seg.index.path)} rebuilt from the log: {why}")
        active = seg is self._segments[-1]
        res = seg.rebuild(validate=False)
        if res.error is not None:
            raise StorageError(f"{seg.log_path}: {res.error}")
        if not active:
            seg.seal()

    def truncate_to(self, offset: int) -> None:
        leo = self.log_end_offset
        if offset >= leo:
            if self._epochs.truncate_from_end(offset):
                self._save_epochs()
            return
        if offset < self._start:
            offset = self._start
        i = bisect_right(self._bases, offset) - 1
        seg = self._segments[i]
        self._touch(seg)
        try:
            loc = seg.locate(offset)
        except StaleIndex as e:
            self._rebuild_index(seg, str(e))
            loc = seg.locate(offset)
        if loc is None:
            return
        pos, h = loc
        new_leo = max(h.base_offset, seg.base)
        for victim in self._segments[i + 1 :]:
            self._forget_open(victim)
            victim.delete()
        del self._segments[i + 1 :]
        del self._bases[i + 1 :]
        seg.truncate_to(pos, new_leo)
        self._start = min(self._start, new_leo)
        if seg.fd < 0:
            seg.open_fd()
        self._forget_open(seg)
        self._dir_dirty = True
        with self._rp_lock:
            self._truncations += 1
            self._rp = min(self._rp, new_leo)
        if self._epochs.truncate_from_end(new_leo):
            self._save_epochs()
        if self._on_truncate is not None:
            self._on_truncate(self)

    def flush(self) -> None:
        """fsync every segment holding data past the recovery point (and the directory if
        a segment was created or deleted since); the recovery point becomes the LEO."""
        leo = self.log_end_offset
        with self._rp_lock:
            rp = self._rp
        if rp < leo:
            first = max(bisect_right(self._bases, rp) - 1, 0)
            for seg in self._segments[first:]:
                if seg is self._segments[-1]:
                    seg.fdatasync()
                else:
                    for p in seg.paths():
                        fsync_path(p)
        if self._dir_dirty:
            fsync_dir(self.dir)
            self._dir_dirty = False
        with self._rp_lock:
            self._rp = max(self._rp, leo)

    def latest_epoch(self) -> int:
        return self._epochs.latest_epoch()

    def epoch_entries(self) -> list[tuple[int, int]]:
        return list(self._epochs.entries)

    def assign_epoch_start(self, epoch: int, start_offset: int) -> None:
        if self._epochs.assign(epoch, start_offset):
            self._save_epochs()

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        return self._epochs.end_offset_for(epoch, self.log_end_offset)

    # ================================================================ beyond PartitionLog
    def offset_for_timestamp(self, timestamp: int) -> TimestampOffset | None:
        """The first record (offset >= log start) with a timestamp >= `timestamp`
        (ListOffsets by timestamp), or None. Records of batches compressed with a codec
        other than gzip are not decoded: the batch's first offset and max timestamp stand
        for them."""
        for seg in self._segments[max(bisect_right(self._bases, self._start) - 1, 0) :]:
            if seg.max_ts < timestamp:
                continue
            self._touch(seg)
            found = self._find_timestamp(seg, timestamp)
            if found is not None:
                return found
        return None

    def _find_timestamp(self, seg: Segment, timestamp: int) -> TimestampOffset | None:
        below = seg.time_index.floor_below(timestamp)
        start = seg.index.start_position(below)[1] if below >= 0 else 0
        for pos, h in seg.walk(start, validate=False):
            if h.max_timestamp < timestamp or h.last_offset < self._start:
                continue
            if h.is_log_append_time:
                return TimestampOffset(max(h.base_offset, self._start), h.max_timestamp, h.partition_leader_epoch)
            batch = os.pread(seg.open_fd(), h.size, pos)
            try:
                records = decode_records(batch, validate=False)
            except BatchError:
                return TimestampOffset(max(h.base_offset, self._start), h.max_timestamp, h.partition_leader_epoch)
            for r in records:
                if r.timestamp >= timestamp and r.offset >= self._start:
                    return TimestampOffset(r.offset, r.timestamp, h.partition_leader_epoch)
        return None

    def reconfigure(self, config: StorageConfig) -> None:
        """Run with `config` from now on (a topic config changed): the segment size at the
        next append, retention and compaction at their next pass."""
        self.config = config

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Drop the whole log and start it empty at `offset` (a follower whose LEO is below
        its leader's log start offset, Kafka's truncateFullyAndStartAt): the epoch cache
        is emptied, the recovery point and log start become `offset`."""
        for seg in self._segments:
            self._forget_open(seg)
            seg.delete()
        c = self.config
        new = Segment.create(self.dir, offset, c.index_interval_bytes, c.index_max_bytes)
        self._segments, self._bases = [new], [offset]
        self._start = offset
        self._dir_dirty = True
        with self._rp_lock:
            self._truncations += 1
            self._rp = offset
        self._epochs = EpochCache()
        self._save_epochs()
        self.logger.warning(f"{partition_dir_name(self.tp)}: truncated fully, log now starts at {offset}")
        if self._on_truncate is not None:
            self._on_truncate(self)

    @property
    def producer_state_start(self) -> int:
        """Where the core's producer-state rebuild starts reading (the active segment's
        base offset: what Kafka scans after its last producer snapshot, taken at a roll;
        this engine keeps no snapshots, so producers last seen in older segments are
        unknown after a restart and any sequence of theirs is accepted, KIP-360)."""
        return max(self._segments[-1].base, self._start)

    def segment_files(self) -> list[tuple[int, str, int]]:
        """(base offset, .log path, size) of each segment, oldest first."""
        return [(s.base, s.log_path, s.size) for s in self._segments]

    def close(self, *, write_indexes: bool = True, sync: bool = False) -> None:
        """Close every file. With `write_indexes` the active segment's indexes are written
        (a clean close; with `sync` also fsynced); without, nothing is written (as a killed
        process leaves it)."""
        if self._closed:
            return
        if write_indexes:
            active = self._segments[-1]
            active.seal()
            if sync:
                fsync_path(active.index.path)
                fsync_path(active.time_index.path)
        for s in self._segments:
            s.close_fd()
        self._open_sealed.clear()
        self._closed = True

    # ================================================================ internals
    def _active_for(self, append_bytes: int, last_offset: int) -> Segment:
        seg = self._segments[-1]
        if seg.would_overflow(append_bytes, last_offset, self.config.segment_bytes):
            seg = self._roll()
        return seg

    def _roll(self) -> Segment:
        """Start a new segment at the LEO; flush the old ones in the background (Kafka's
        flush on roll), then move the recovery point up to the new segment's base."""
        old = self._segments[-1]
        old.seal()
        c = self.config
        new = Segment.create(self.dir, old.next_offset, c.index_interval_bytes, c.index_max_bytes)
        self._segments.append(new)
        self._bases.append(new.base)
        self._dir_dirty = True
        self._touch(old)
        with self._rp_lock:
            rp, gen = self._rp, self._truncations
        first = max(bisect_right(self._bases, rp) - 1, 0)
        paths = [p for s in self._segments[first:-1] for p in s.paths()]
        target = new.base
        directory = self.dir

        def flush_rolled() -> None:
            try:
                for p in paths:
                    fsync_path(p)
                fsync_dir(directory)
            except FileNotFoundError:
                return  # the partition was deleted meanwhile
            except OSError as e:
                self.logger.error(f"{partition_dir_name(self.tp)}: background flush on roll failed: {e}")
                return
            with self._rp_lock:
                if gen == self._truncations and target > self._rp:
                    self._rp = target

        self._background(flush_rolled)
        return new

    def _touch(self, seg: Segment) -> None:
        """Keep at most MAX_OPEN_SEALED sealed segments' files open."""
        if seg is self._segments[-1]:
            return
        if seg in self._open_sealed:
            self._open_sealed.remove(seg)
        self._open_sealed.append(seg)
        while len(self._open_sealed) > MAX_OPEN_SEALED:
            self._open_sealed.pop(0).close_fd()

    def _forget_open(self, seg: Segment) -> None:
        if seg in self._open_sealed:
            self._open_sealed.remove(seg)

    def _save_epochs(self) -> None:
        write_epochs(self._epoch_path, self._epochs.entries)
