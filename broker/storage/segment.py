"""One log segment: `<20-digit base offset>.log` (batches back to back, as received and
stamped) with its `.index` and `.timeindex` (see index.py).

Appends are one pwritev of whole batches; the indexes grow per batch (never per record).
Reads find the batch containing an offset through the sparse index and return whole
batches with one pread (two when a batch is larger than the first read). Scans (recovery,
index rebuild, the tail check on open) walk batch headers in 1 MiB chunks; with
`validate` they also check magic and CRC-32C, and in every case that the base offsets
follow each other (the CRC does not cover the base offset).
"""

from __future__ import annotations

import os
import struct
from bisect import bisect_left, bisect_right
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from broker.logapi import LogStorageError
from broker.records import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    MIN_BATCH_LENGTH,
    BatchError,
    BatchHeader,
    check_batch,
    parse_header,
)
from broker.storage.fileio import pwrite_all
from broker.storage.index import OffsetIndex, TimeIndex

SCAN_CHUNK = 1 << 20
INT_MAX = 2147483647
_I32 = struct.Struct(">i")
_FIELDS = struct.Struct(">qi11xi")  # base offset, batch length, last offset delta


def segment_name(base: int) -> str:
    return f"{base:020d}"


class StorageError(LogStorageError):
    """The log on disk is not what the log in memory says (a file changed under us), or
    an append or read failed (answered KAFKA_STORAGE_ERROR)."""


class StaleIndex(Exception):
    """An index entry points at a batch with other offsets: the index must be rebuilt."""


@dataclass
class ScanResult:
    """What a walk over a segment found: the valid prefix and, if it stopped early, why."""

    start: int  # byte position the walk started at
    valid_end: int  # end of the last good batch (== start if none)
    batches: int
    first_offset: int | None
    next_offset: int  # offset after the last good batch
    error: BatchError | None  # the first bad batch (error.position is its byte position)
    error_header: BatchHeader | None  # its header if one could be read (offsets it claims)


class Segment:
    """A segment's files and in-memory state. Not thread-safe (the log's owner serialises)."""

    __slots__ = (
        "base",
        "directory",
        "log_path",
        "index",
        "time_index",
        "size",
        "next_offset",
        "max_ts",
        "offset_of_max_ts",
        "bytes_since_entry",
        "fd",
        "index_interval",
        "max_entries",
        "max_time_entries",
    )

    def __init__(self, directory: str, base: int, index_interval: int, index_max_bytes: int) -> None:
        name = os.path.join(directory, segment_name(base))
        self.base = base
        self.directory = directory
        self.log_path = name + ".log"
        self.index = OffsetIndex(name + ".index", base)
        self.time_index = TimeIndex(name + ".timeindex", base)
        self.size = 0
        self.next_offset = base
        self.max_ts = -1
        self.offset_of_max_ts = base
        self.bytes_since_entry = 0
        self.fd = -1
        self.index_interval = index_interval
        self.max_entries = max(1, index_max_bytes // 8)
        self.max_time_entries = max(1, index_max_bytes // 12)

    # ---------------------------------------------------------------- files
    @classmethod
    def create(cls, directory: str, base: int, index_interval: int, index_max_bytes: int) -> Segment:
        """A new empty segment (files created or emptied; the caller fsyncs the directory)."""
        seg = cls(directory, base, index_interval, index_max_bytes)
        seg.fd = os.open(seg.log_path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        seg.index.reset()
        seg.time_index.reset()
        return seg

    @classmethod
    def existing(cls, directory: str, base: int, index_interval: int, index_max_bytes: int) -> Segment:
        seg = cls(directory, base, index_interval, index_max_bytes)
        seg.size = os.stat(seg.log_path).st_size
        return seg

    def open_fd(self) -> int:
        if self.fd < 0:
            self.fd = os.open(self.log_path, os.O_RDWR)
        return self.fd

    def close_fd(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def paths(self) -> list[str]:
        return [self.log_path, self.index.path, self.time_index.path]

    def delete(self) -> None:
        self.close_fd()
        for p in self.paths():
            try:
                os.unlink(p)
            except FileNotFoundError:
                pass

    def write_indexes(self) -> None:
        self.index.write_pending()
        self.time_index.write_pending()

    def seal(self) -> None:
        """No more appends (rolled or closing): final time-index entry, indexes written."""
        self.time_index.maybe_append(self.max_ts, self.offset_of_max_ts)
        self.write_indexes()

    def fdatasync(self) -> None:
        os.fdatasync(self.open_fd())

    # ---------------------------------------------------------------- appends
    def would_overflow(self, append_bytes: int, last_offset: int, segment_bytes: int) -> bool:
        """Kafka's shouldRoll for one append: size, full index, relative offset overflow."""
        if self.size == 0:
            return False
        return (
            self.size + append_bytes > segment_bytes
            or len(self.index) >= self.max_entries
            or len(self.time_index) >= self.max_time_entries
            or last_offset - self.base > INT_MAX
        )

    def note_batch(self, position: int, last_offset: int, max_ts: int, size: int) -> None:
        """Index bookkeeping for a batch appended (or found by a scan) at `position`."""
        if max_ts > self.max_ts:
            self.max_ts = max_ts
            self.offset_of_max_ts = last_offset
        if self.bytes_since_entry > self.index_interval:
            self.index.append(last_offset, position)
            self.time_index.maybe_append(self.max_ts, self.offset_of_max_ts)
            self.bytes_since_entry = 0
        self.bytes_since_entry += size
        self.next_offset = last_offset + 1

    def append(self, buffers: Sequence[bytes | memoryview], batches: Sequence[tuple[int, int, int]]) -> None:
        """Write `buffers` (whole batches) at the end; `batches` = (last offset, max
        timestamp, size) of each, in order."""
        pos = self.size
        fd = self.open_fd()
        try:
            written = pwrite_all(fd, buffers, pos)
        except OSError as e:  # e.g. ENOSPC: leave no partial batch behind
            try:
                os.ftruncate(fd, pos)
            except OSError:
                pass
            raise StorageError(f"{self.log_path}: append at byte {pos} failed: {e}") from e
        for last, ts, size in batches:
            self.note_batch(pos, last, ts, size)
            pos += size
        if pos != self.size + written:
            raise StorageError(f"{self.log_path}: wrote {written} bytes for batches of {pos - self.size}")
        self.size = pos

    # ---------------------------------------------------------------- scans
    def walk(self, start: int, *, validate: bool) -> Iterator[tuple[int, BatchHeader]]:
        """(position, header) of each batch from byte `start` to the end of the file.
        Raises BatchError (position = the bad batch's byte position) at the first batch
        that is torn or (with `validate`) has a bad magic or CRC-32C."""
        fd = self.open_fd()
        end = self.size
        pos = start
        buf = b""
        buf_start = start
        while pos < end:
            rel = pos - buf_start
            if len(buf) - rel < HEADER_SIZE:
                buf = os.pread(fd, min(SCAN_CHUNK, end - pos), pos)
                buf_start, rel = pos, 0
                if len(buf) < HEADER_SIZE:
                    raise BatchError(f"truncated batch header at byte {pos} ({len(buf)} of {HEADER_SIZE} bytes)", position=pos)
            length = _I32.unpack_from(buf, rel + 8)[0]
            if length < MIN_BATCH_LENGTH:
                raise BatchError(f"bad batch length {length} at byte {pos}", position=pos)
            bend = pos + LOG_OVERHEAD + length
            if bend > end:
                raise BatchError(f"truncated batch at byte {pos}: {bend - pos} bytes claimed, {end - pos} left", position=pos)
            h = parse_header(buf, rel)
            if validate:
                if bend - buf_start > len(buf):
                    buf = os.pread(fd, max(SCAN_CHUNK, bend - pos), pos)
                    buf_start, rel = pos, 0
                    if len(buf) < bend - pos:
                        raise BatchError(f"truncated batch at byte {pos} (file shrank)", position=pos)
                check_batch(buf, rel, rel + bend - pos, h, position=pos)
            yield pos, h
            pos = bend

    def scan(
        self, start: int, expected_offset: int | None, *, validate: bool, epochs: list[tuple[int, int]] | None = None
    ) -> ScanResult:
        """Walk from `start`, feeding the indexes and checking offsets follow on from
        `expected_offset` (None: the first batch may have any base offset). With `epochs`,
        append (epoch, base offset) for each batch whose epoch is above the last there."""
        res = ScanResult(start, start, 0, None, expected_offset if expected_offset is not None else self.base, None, None)
        try:
            for pos, h in self.walk(start, validate=validate):
                if expected_offset is not None and h.base_offset != expected_offset:
                    raise BatchError(
                        f"batch at byte {pos} has base offset {h.base_offset}, expected {expected_offset}",
                        position=pos,
                    )
                if h.last_offset - self.base > INT_MAX or h.base_offset < self.base:
                    raise BatchError(f"batch at byte {pos} has offsets {h.base_offset}..{h.last_offset} outside the segment", position=pos)
                self.note_batch(pos, h.last_offset, h.max_timestamp, h.size)
                if epochs is not None and h.partition_leader_epoch > (epochs[-1][0] if epochs else -1):
                    epochs.append((h.partition_leader_epoch, h.base_offset))
                if res.first_offset is None:
                    res.first_offset = h.base_offset
                res.batches += 1
                res.valid_end = pos + h.size
                res.next_offset = expected_offset = h.last_offset + 1
        except BatchError as e:
            res.error = e
            res.error_header = self._header_at(e.position)
        return res

    def _header_at(self, pos: int) -> BatchHeader | None:
        data = os.pread(self.open_fd(), HEADER_SIZE, pos)
        return parse_header(data) if len(data) == HEADER_SIZE else None

    def reset_state(self) -> None:
        self.index.reset()
        self.time_index.reset()
        self.next_offset = self.base
        self.max_ts = -1
        self.offset_of_max_ts = self.base
        self.bytes_since_entry = 0

    def rebuild(self, *, validate: bool, epochs: list[tuple[int, int]] | None = None) -> ScanResult:
        """Rebuild both indexes from the whole file (recovery when `validate`)."""
        self.reset_state()
        return self.scan(0, self.base, validate=validate, epochs=epochs)

    def load(self) -> tuple[ScanResult, str | None]:
        """Open an existing segment: load its index files, or rebuild them if they are not
        sane (the reason is returned), then walk the unindexed tail to find the next offset.
        The ScanResult's error, if any, is a torn or inconsistent tail: the caller truncates."""
        reason = self.index.load(self.size) or self.time_index.load(INT_MAX)
        if reason is None:
            res, reason = self._walk_tail()
            if reason is None and res.error is None and len(self.time_index):
                last = self.base + self.time_index.rel[-1]
                if last >= res.next_offset:
                    reason = f"time index entry for offset {last} is past the segment's last offset {res.next_offset - 1}"
            if reason is None:
                return res, None
        return self.rebuild(validate=False), reason

    def _walk_tail(self) -> tuple[ScanResult, str | None]:
        """From the last index entry to the end of the file (bytes since the entry, the next
        offset, the max timestamp); a reason if the entry does not match the file."""
        self.max_ts = self.time_index.last_timestamp()
        self.offset_of_max_ts = self.base + self.time_index.rel[-1] if len(self.time_index) else self.base
        self.bytes_since_entry = 0
        if not len(self.index):
            self.next_offset = self.base
            return self.scan(0, self.base, validate=False), None
        start, last = self.index.pos[-1], self.base + self.index.rel[-1]
        h = self._header_at(start)
        if h is None or h.last_offset != last or h.batch_length < MIN_BATCH_LENGTH or start + h.size > self.size:
            return ScanResult(start, start, 0, None, self.base, None, None), (
                f"last index entry ({last}, byte {start}) does not match the batch there"
            )
        if h.max_timestamp > self.max_ts:
            self.max_ts, self.offset_of_max_ts = h.max_timestamp, h.last_offset
        self.bytes_since_entry = h.size
        self.next_offset = h.last_offset + 1
        rest = self.scan(start + h.size, h.last_offset + 1, validate=False)
        rest.start = start
        rest.batches += 1
        if rest.first_offset is None:
            rest.first_offset = h.base_offset
        return rest, None

    def truncate_to(self, position: int, next_offset: int) -> None:
        """Cut the file at byte `position`, the start of the batch with base offset
        `next_offset` (or the end); fix the indexes and the tail state."""
        if position < self.size:
            os.ftruncate(self.open_fd(), position)
            self.size = position
        self.index.truncate_to_position(position)
        self.time_index.truncate_to_offset(next_offset)
        res, reason = self._walk_tail()
        if reason is not None or res.error is not None or res.next_offset != next_offset:
            raise StorageError(
                f"{self.log_path}: inconsistent after truncation to byte {position}: "
                f"{reason or res.error or f'next offset {res.next_offset}, expected {next_offset}'}"
            )

    # ---------------------------------------------------------------- reads
    def locate(self, offset: int) -> tuple[int, BatchHeader] | None:
        """(position, header) of the batch containing `offset` (None past the end).
        Raises StaleIndex if the index entry used does not match the file."""
        i, pos = self.index.start_position(offset)
        for p, h in self._headers_from(pos):
            if p == pos and i >= 0 and h.last_offset != self.base + self.index.rel[i]:
                raise StaleIndex(f"{self.index.path}: entry {i} says offset {self.base + self.index.rel[i]} at byte {pos}, "
                                 f"the batch there ends at {h.last_offset}")
            if h.last_offset >= offset:
                return p, h
        return None

    def _headers_from(self, pos: int) -> Iterator[tuple[int, BatchHeader]]:
        """Headers without validation (the data was validated on append or recovery)."""
        try:
            yield from self.walk(pos, validate=False)
        except BatchError as e:
            raise StorageError(f"{self.log_path}: {e}") from None

    def read(self, offset: int, max_bytes: int, upper_bound: int | None, min_one: bool) -> tuple[bytes, int, bool]:
        """Whole batches from the one containing `offset`: at most `max_bytes` (but one
        batch if `min_one`), none whose last offset reaches `upper_bound`.
        Returns (data, offset after the data, stopped before the end of the segment).

        One pread of `max_bytes` plus an index interval from the index entry at or before
        `offset`; the batches between the start and the last index entry that fits are
        skipped through the index, so the header walk is at most about two index intervals
        whatever `max_bytes` is."""
        i, start = self.index.start_position(offset)
        fd = self.open_fd()
        size = self.size
        if upper_bound is not None and upper_bound >= self.next_offset:
            upper_bound = None
        buf = os.pread(fd, min(size - start, max(max_bytes, 0) + self.index_interval + 2 * HEADER_SIZE), start)
        blen = len(buf)

        def fields(p: int) -> tuple[int, int, int]:
            r = p - start
            if r + _FIELDS.size <= blen:
                return _FIELDS.unpack_from(buf, r)
            data = os.pread(fd, _FIELDS.size, p)
            if len(data) < _FIELDS.size:
                raise StorageError(f"{self.log_path}: truncated batch header at byte {p}")
            return _FIELDS.unpack_from(data, 0)

        pos = start
        base, length, delta = fields(pos)
        if i >= 0 and base + delta != self.base + self.index.rel[i]:
            raise StaleIndex(
                f"{self.index.path}: entry {i} says offset {self.base + self.index.rel[i]} at byte {pos}, "
                f"the batch there ends at {base + delta}"
            )
        while base + delta < offset:
            pos += length + LOG_OVERHEAD
            if pos >= size:
                return b"", self.next_offset, False
            base, length, delta = fields(pos)
        first = pos
        total = 0
        # skip whole batches through the index: every batch before the last entry that
        # starts within max_bytes (and ends below upper_bound) is in
        ix = self.index
        j = bisect_right(ix.pos, first + max(max_bytes, 0)) - 1
        if upper_bound is not None:
            j = min(j, bisect_left(ix.rel, upper_bound - self.base) - 1)
        if j >= 0 and ix.pos[j] > first:
            pos = ix.pos[j]
            total = pos - first
            base, length, delta = fields(pos)
        next_offset = base
        stopped = False
        while True:
            bsize = length + LOG_OVERHEAD
            if length < MIN_BATCH_LENGTH or pos + bsize > size:
                raise StorageError(f"{self.log_path}: bad batch at byte {pos}")
            if upper_bound is not None and base + delta >= upper_bound:
                stopped = True
                break
            if total + bsize > max_bytes and (total or not min_one):
                stopped = True
                break
            total += bsize
            pos += bsize
            next_offset = base + delta + 1
            if pos >= size:
                break
            if total + HEADER_SIZE > max_bytes:
                stopped = True
                break
            base, length, delta = fields(pos)
        if total == 0:
            return b"", next_offset, stopped
        return self._cut(buf, first - start, fd, first, total), next_offset, stopped

    def _cut(self, buf: bytes, r: int, fd: int, first: int, total: int) -> bytes:
        """The `total` bytes at byte `first` of the file: from `buf` (read from `first - r`)
        when they are in it, else read again."""
        if r + total <= len(buf):
            return buf if (r == 0 and total == len(buf)) else buf[r : r + total]
        data = os.pread(fd, total, first)
        if len(data) != total:
            raise StorageError(f"{self.log_path}: short read at byte {first}")
        return data
