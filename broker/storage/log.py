"""`SegmentedLog`: one partition's on-disk log, a `broker.logapi.PartitionLog`.

A directory `<topic>-<partition>/` of segments (segment.py) plus `leader-epoch-checkpoint`.
Appends go to the last (active) segment, rolled when an append would take it past
`log.segment.bytes` (or fill an index); the rolled segment is then flushed in the
background (Kafka's default flush-on-roll) and the recovery point advances to the new
segment's base offset once it is durable. `flush()` makes everything durable at once.

Opening a log (`SegmentedLog.open`) loads its segments; after an unclean shutdown every
segment from the one holding the recovery point onwards is scanned and validated (CRC,
magic, framing, offsets following each other), a torn or corrupt tail is cut at the last
good batch, later segments are deleted, and the report says exactly what was cut.

Compaction (`clean`, cleaner.py) rewrites groups of closed segments into one each: the
group's cleaned data is written to `<base>.<end>.cleaned`, fsynced and renamed to
`<base>.<end>.swap` (the commit point); then the segments based in [base, end) are
deleted and the swap file becomes `<base>.log`. Opening a log finishes a swap left
half-done and deletes a `.cleaned` file. A cleaned batch keeps its base and last offset
(records go; emptied batches of one leader epoch become one bare header, as Kafka's
format allows), so batches and segments still follow each other exactly and recovery's
checks stay strict.

Threading: every method is called from one thread (the broker's event loop); only the
background roll flush runs elsewhere, touching files by name and the recovery point
under a lock.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

from broker.core.messages import TopicPartition
from broker.core.properties import LONG_MAX
from broker.logapi import OffsetOutOfRange
from broker.records import (
    MAGIC,
    BatchError,
    decode_records,
    iter_batches,
    stamped_prefix,
)
from broker.storage import cleaner
from broker.storage.checkpoints import LEADER_EPOCH_CHECKPOINT, CheckpointError, read_epochs, write_epochs
from broker.storage.config import StorageConfig
from broker.storage.epoch_cache import EpochCache
from broker.storage.fileio import fsync_dir, fsync_path
from broker.storage.segment import Segment, StaleIndex, StorageError, segment_name

_SEGMENT_FILE = re.compile(r"^(\d{20})\.log$")
_SWAP_FILE = re.compile(r"^(\d{20})\.(\d{20})\.swap$")  # a cleaned group: replaces the segments based in [first, second)
_INDEX_FILE = re.compile(r"^(\d{20})\.(index|timeindex)$")
_STRAY_SUFFIXES = (".tmp", ".deleted", ".cleaned", ".swap")
MAX_OPEN_SEALED = 8

log_ = logging.getLogger(__name__)


class TimestampOffset(NamedTuple):
    """What ListOffsets by timestamp answers: the first record at or after a timestamp."""

    offset: int
    timestamp: int
    leader_epoch: int


@dataclass
class Truncation:
    """A cut made by recovery (or by the tail check when opening a segment)."""

    segment: str  # the .log file cut
    position: int  # byte position of the cut (start of the first bad batch)
    bytes_dropped: int  # bytes removed from that file
    next_offset: int  # offsets from here on are gone (the new log end offset)
    reason: str  # why the batch at `position` was rejected
    claimed_offsets: tuple[int, int] | None  # what the bad batch's header claimed, if readable
    deleted_segments: list[str] = field(default_factory=list)

    def describe(self, tp: TopicPartition) -> str:
        claim = f"; the bad batch's header claims offsets {self.claimed_offsets[0]}..{self.claimed_offsets[1]}" if self.claimed_offsets else ""
        later = f"; deleted later segments {', '.join(os.path.basename(s) for s in self.deleted_segments)}" if self.deleted_segments else ""
        return (
            f"{tp.topic}-{tp.partition}: truncated {os.path.basename(self.segment)} at byte {self.position} "
            f"({self.bytes_dropped} bytes dropped): {self.reason}{claim}; offsets from {self.next_offset} on are gone, "
            f"log end offset now {self.next_offset}{later}"
        )


@dataclass
class PartitionRecovery:
    """What opening one partition's log did."""

    tp: TopicPartition
    scanned: bool  # True: segments were validated (unclean shutdown)
    recovery_point: int  # the checkpointed recovery point the scan started from
    scanned_segments: list[str] = field(default_factory=list)
    scanned_bytes: int = 0
    scanned_batches: int = 0
    truncations: list[Truncation] = field(default_factory=list)
    index_rebuilds: list[tuple[str, str]] = field(default_factory=list)  # (index file, why)
    notes: list[str] = field(default_factory=list)
    log_start_offset: int = 0
    log_end_offset: int = 0

    def lines(self) -> list[str]:
        name = f"{self.tp.topic}-{self.tp.partition}"
        out = []
        if self.scanned:
            out.append(
                f"{name}: recovery scanned {len(self.scanned_segments)} segment(s) from recovery point "
                f"{self.recovery_point} ({', '.join(os.path.basename(s) for s in self.scanned_segments) or 'none'}): "
                f"{self.scanned_batches} valid batches, {self.scanned_bytes} bytes; "
                f"{'nothing truncated' if not self.truncations else f'{len(self.truncations)} truncation(s)'}; "
                f"log end offset {self.log_end_offset}"
            )
        out.extend(t.describe(self.tp) for t in self.truncations)
        out.extend(f"{name}: index {os.path.basename(p)} rebuilt from the log: {why}" for p, why in self.index_rebuilds)
        out.extend(f"{name}: {n}" for n in self.notes)
        return out


def partition_dir_name(tp: TopicPartition) -> str:
    return f"{tp.topic}-{tp.partition}"


def parse_partition_dir(name: str) -> TopicPartition | None:
    topic, sep, part = name.rpartition("-")
    if not sep or not topic or not part.isdigit():
        return None
    return TopicPartition(topic, int(part))


def _run_inline(fn: Callable[[], None]) -> None:
    fn()


class SegmentedLog:
    """One replica's log of one topic-partition on disk (see the module docstring)."""

    def __init__(
        self,
        directory: str,
        tp: TopicPartition,
        config: StorageConfig,
        *,
        logger: logging.Logger | None = None,
        after_append: Callable[[SegmentedLog, int], None] | None = None,
        on_truncate: Callable[[SegmentedLog], None] | None = None,
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

    # ================================================================ opening
    @classmethod
    def open(
        cls,
        directory: str,
        tp: TopicPartition,
        config: StorageConfig,
        *,
        recovery_point: int = 0,
        log_start_offset: int = 0,
        recover: bool = False,
        logger: logging.Logger | None = None,
        after_append: Callable[[SegmentedLog, int], None] | None = None,
        on_truncate: Callable[[SegmentedLog], None] | None = None,
        background: Callable[[Callable[[], None]], None] | None = None,
    ) -> tuple[SegmentedLog, PartitionRecovery]:
        """Open (or create) the log in `directory`. With `recover` (an unclean shutdown),
        validate every segment from the one holding `recovery_point` on and cut a bad tail;
        otherwise only load indexes (rebuilding bad ones) and check each segment's tail."""
        log = cls(directory, tp, config, logger=logger, after_append=after_append, on_truncate=on_truncate, background=background)
        report = PartitionRecovery(tp, recover, recovery_point)
        created = not os.path.isdir(directory)
        os.makedirs(directory, exist_ok=True)
        if created:
            fsync_dir(os.path.dirname(os.path.abspath(directory)))
        log._load(report, recovery_point, log_start_offset, recover)
        report.log_start_offset = log._start
        report.log_end_offset = log.log_end_offset
        for line in report.lines():
            (log.logger.warning if report.truncations or report.index_rebuilds else log.logger.info)(line)
        return log, report

    def _seg(self, base: int) -> Segment:
        c = self.config
        return Segment(self.dir, base, c.index_interval_bytes, c.index_max_bytes)

    def _load(self, report: PartitionRecovery, recovery_point: int, log_start_offset: int, recover: bool) -> None:
        c = self.config
        bases = []
        index_bases = set()
        for name in sorted(os.listdir(self.dir)):
            if m := _SWAP_FILE.match(name):
                self._finish_swap(int(m.group(1)), int(m.group(2)))
                report.notes.append(f"finished an interrupted compaction swap ({name})")
        for name in os.listdir(self.dir):
            path = os.path.join(self.dir, name)
            if name.endswith(_STRAY_SUFFIXES):
                os.unlink(path)
                report.notes.append(f"removed leftover file {name}")
            elif m := _SEGMENT_FILE.match(name):
                bases.append(int(m.group(1)))
            elif m := _INDEX_FILE.match(name):
                index_bases.add(int(m.group(1)))
        for b in sorted(index_bases - set(bases)):
            for ext in (".index", ".timeindex"):
                try:
                    os.unlink(os.path.join(self.dir, segment_name(b) + ext))
                except FileNotFoundError:
                    pass
            report.notes.append(f"removed index files of missing segment {segment_name(b)}.log")
        bases.sort()
        if not bases:
            seg = Segment.create(self.dir, max(log_start_offset, 0), c.index_interval_bytes, c.index_max_bytes)
            self._segments, self._bases = [seg], [seg.base]
            self._dir_dirty = True
            self._start = seg.base
            self._load_epochs(report, [])
            self._rp = seg.base
            return

        first_scanned = 0
        if recover:
            first_scanned = max(bisect_right(bases, recovery_point) - 1, 0)
        scanned_epochs: list[tuple[int, int]] = []  # (epoch, base offset) of scanned batches, in order
        segs: list[Segment] = []
        stop_at: int | None = None  # index into bases: this segment and later ones are dropped
        for i, base in enumerate(bases):
            seg = Segment.existing(self.dir, base, c.index_interval_bytes, c.index_max_bytes)
            if segs and base != segs[-1].next_offset:
                prev = segs[-1]
                report.truncations.append(
                    Truncation(
                        seg.log_path, 0, seg.size, prev.next_offset,
                        f"segment base offset {base} does not follow the previous segment, whose next offset is {prev.next_offset}",
                        None,
                    )
                )
                stop_at = i
                break
            if i >= first_scanned and recover:
                res = seg.rebuild(validate=True, epochs=scanned_epochs)
                report.scanned_segments.append(seg.log_path)
                report.scanned_batches += res.batches
                report.scanned_bytes += res.valid_end
            else:
                res, why = seg.load()
                if why is not None:
                    report.index_rebuilds.append((seg.index.path, why))
            segs.append(seg)
            if res.error is not None:
                dropped_bytes = seg.size - res.valid_end
                seg.truncate_to(res.valid_end, res.next_offset)
                h = res.error_header
                claimed = (h.base_offset, h.last_offset) if h is not None and h.last_offset_delta >= 0 else None
                report.truncations.append(
                    Truncation(seg.log_path, res.valid_end, dropped_bytes, res.next_offset, str(res.error), claimed)
                )
                stop_at = i + 1
                break
        if stop_at is not None and stop_at < len(bases):
            deleted = []
            for base in bases[stop_at:]:
                victim = self._seg(base)
                victim.delete()
                if victim.log_path != report.truncations[-1].segment:
                    deleted.append(victim.log_path)
            report.truncations[-1].deleted_segments.extend(deleted)
            self._dir_dirty = True
        self._segments = segs
        self._bases = [s.base for s in segs]
        rebuilt = {p for p, _ in report.index_rebuilds} | {s.index.path for s in segs[first_scanned:]} if recover else {
            p for p, _ in report.index_rebuilds}
        for s in segs[:-1]:
            if s.index.path in rebuilt:
                s.seal()  # a sealed segment's rebuilt indexes go to disk now (the active one's on roll/close)
            s.close_fd()
        leo = self.log_end_offset
        self._start = min(max(log_start_offset, segs[0].base), leo)
        self._load_epochs(report, scanned_epochs)
        if recover:
            # what the scan validated is made durable, so the recovery point can move to the LEO
            for s in segs[first_scanned:]:
                fsync_path(s.log_path)
            fsync_dir(self.dir)
            self._dir_dirty = False
            self._rp = leo
        else:
            self._rp = min(recovery_point, leo) if recovery_point >= segs[0].base else segs[0].base

    @staticmethod
    def _collect_epochs(seg: Segment, out: list[tuple[int, int]]) -> None:
        for _pos, h in seg.walk(0, validate=False):
            if h.partition_leader_epoch > (out[-1][0] if out else -1):
                out.append((h.partition_leader_epoch, h.base_offset))

    def _load_epochs(self, report: PartitionRecovery, scanned: list[tuple[int, int]]) -> None:
        """The epoch cache: the checkpoint (written before any batch of a new epoch, so it
        holds every epoch in the data) cut at the LEO, plus any newer epoch a scan found
        (a checkpoint that lagged). Rebuilt from the whole log if the checkpoint is
        unreadable, or missing while the log has data."""
        entries: list[tuple[int, int]] | None
        try:
            entries = read_epochs(self._epoch_path)
        except CheckpointError as e:
            report.notes.append(f"leader-epoch-checkpoint unreadable ({e}); rebuilt from the log")
            entries = None
        leo = self.log_end_offset
        if entries is None and leo > self._start:
            scanned = []
            for seg in self._segments:
                self._collect_epochs(seg, scanned)
        cache = EpochCache(entries or [])
        cache.truncate_from_end(leo)
        for e, o in scanned:
            cache.assign(e, o)
        self._epochs = cache
        if cache.entries != (entries or []) or not os.path.exists(self._epoch_path):
            self._save_epochs()

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

    def apply_retention(self, now_ms: int, upper_bound: int | None = None) -> list[str]:
        """Delete whole sealed segments below the log start offset and, with
        `cleanup.policy` delete, past `retention.ms` (by their newest record's timestamp)
        or beyond `retention.bytes`; the log start offset moves up. Never the active
        segment, nor (given the high watermark as `upper_bound`) a segment holding records
        at or above it, as Kafka's deletableSegments. Returns the deleted files."""
        c = self.config
        deleted = []
        total = self.size_in_bytes
        while len(self._segments) > 1:
            seg = self._segments[0]
            if upper_bound is not None and seg.next_offset > upper_bound:
                break
            too_old = c.delete and c.retention_ms is not None and seg.max_ts >= 0 and now_ms - seg.max_ts > c.retention_ms
            too_big = c.delete and c.retention_bytes is not None and total - seg.size >= c.retention_bytes
            if not (too_old or too_big or seg.next_offset <= self._start):
                break
            self._forget_open(seg)
            seg.delete()
            self._segments.pop(0)
            self._bases.pop(0)
            total -= seg.size
            deleted.append(seg.log_path)
        if deleted:
            self._move_start(self._segments[0].base)
            self._dir_dirty = True
            self.logger.info(f"{partition_dir_name(self.tp)}: retention deleted {len(deleted)} segment(s); log start offset now {self._start}")
        return deleted

    def _move_start(self, offset: int) -> None:
        """The log start offset moves up to `offset` (never down, never past the LEO)."""
        self._start = max(self._start, min(offset, self.log_end_offset))
        with self._rp_lock:
            self._rp = max(self._rp, self._start)
        if self._epochs.truncate_from_start(self._start):
            self._save_epochs()

    def maybe_increment_log_start_offset(self, offset: int) -> bool:
        """DeleteRecords on a leader, or a follower following its leader's log start
        offset: the log start moves up to `offset` (at most the LEO); segments wholly
        below it are deleted at the next retention pass. True if it moved."""
        if offset <= self._start:
            return False
        self._move_start(offset)
        self.logger.info(f"{partition_dir_name(self.tp)}: log start offset now {self._start}")
        return True

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

    # ---------------------------------------------------------------- compaction
    def clean(self, now_ms: int, upper_bound: int) -> int:
        """With `cleanup.policy` compact: compact the closed segments whose records all lie
        below `upper_bound` (the high watermark: never the active segment, never what a
        follower may still truncate). Returns how many groups were rewritten."""
        if not self.config.compact:
            return 0
        segs = self._cleanable(upper_bound)
        if not segs:
            return 0
        key, until = self._clean_state
        if key == [(s.base, s.size) for s in segs] and now_ms < until:
            return 0  # nothing new since the last clean, and no tombstone of it has expired
        latest = cleaner.latest_offsets(b for seg in segs for b in self._batches(seg))
        rewritten = 0
        expiry = [LONG_MAX]
        for group in self._groups(segs):
            rewritten += self._clean_group(group, latest, now_ms, expiry)
        self._clean_state = ([(s.base, s.size) for s in self._cleanable(upper_bound)], expiry[0])
        return rewritten

    def _cleanable(self, upper_bound: int) -> list[Segment]:
        """The closed segments whose records all lie below `upper_bound`."""
        n = 0
        while n < len(self._segments) - 1 and self._segments[n].next_offset <= upper_bound:
            n += 1
        return self._segments[:n]

    def _batches(self, seg: Segment):
        self._touch(seg)
        fd = seg.open_fd()
        for pos, h in seg.walk(0, validate=False):
            yield os.pread(fd, h.size, pos), h

    def _groups(self, segs: list[Segment]) -> list[list[Segment]]:
        """Consecutive segments whose sizes add up to at most `segment.bytes` (Kafka's
        groupSegmentsBySize), so cleaning merges small cleaned segments."""
        out: list[list[Segment]] = []
        for seg in segs:
            if out and sum(s.size for s in out[-1]) + seg.size <= self.config.segment_bytes and \
                    seg.next_offset - out[-1][0].base <= 2**31 - 1:
                out[-1].append(seg)
            else:
                out.append([seg])
        return out

    def _clean_group(self, group: list[Segment], latest: dict[bytes, int], now_ms: int, expiry: list[int]) -> int:
        parts: list[bytes] = []
        changed = len(group) > 1
        for seg in group:
            for batch, h in self._batches(seg):
                kept, expires = cleaner.filter_batch(batch, h, latest, now_ms, self.config.delete_retention_ms)
                changed |= kept is not batch and kept != batch
                if expires is not None:
                    expiry[0] = min(expiry[0], expires)
                parts.append(kept)
        if not changed:
            return 0
        parts = cleaner.coalesce_empty(parts)
        base, i = group[0].base, self._segments.index(group[0])
        end = self._segments[i + len(group)].base
        tmp = os.path.join(self.dir, f"{segment_name(base)}.{segment_name(end)}")
        with open(tmp + ".cleaned", "wb") as f:
            f.write(b"".join(parts))
            f.flush()
            os.fsync(f.fileno())
        os.rename(tmp + ".cleaned", tmp + ".swap")  # the commit point
        fsync_dir(self.dir)
        for seg in group:
            self._forget_open(seg)
            seg.close_fd()
        self._finish_swap(base, end)
        new = Segment.existing(self.dir, base, self.config.index_interval_bytes, self.config.index_max_bytes)
        res = new.rebuild(validate=False)
        if res.error is not None:
            raise StorageError(f"{new.log_path}: cleaned segment does not read back: {res.error}")
        new.seal()
        new.close_fd()
        self._segments[i : i + len(group)] = [new]
        self._bases[i : i + len(group)] = [base]
        self.logger.info(f"{partition_dir_name(self.tp)}: compacted {len(group)} segment(s) from offset {base} into "
                         f"{new.size} bytes")
        return 1

    def _finish_swap(self, base: int, end: int) -> None:
        """Replace the segments based in [base, end) with the swap file (idempotent: a
        crash anywhere in it is finished by the next open)."""
        for name in os.listdir(self.dir):
            m = _SEGMENT_FILE.match(name) or _INDEX_FILE.match(name)
            if m and base <= int(m.group(1)) < end:
                os.unlink(os.path.join(self.dir, name))
        os.rename(os.path.join(self.dir, f"{segment_name(base)}.{segment_name(end)}.swap"),
                  os.path.join(self.dir, segment_name(base) + ".log"))
        fsync_dir(self.dir)

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
