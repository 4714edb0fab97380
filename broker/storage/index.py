"""A segment's sparse indexes, kept in memory and persisted in Kafka's file formats.

`.index` (OffsetIndex): 8-byte entries (relative offset int32, file position int32),
big-endian; an entry maps the *last* offset of a batch to the batch's byte position, as
Kafka writes them. `.timeindex` (TimeIndex): 12-byte entries (max timestamp so far int64,
relative offset int32). An entry is added when more than `log.index.interval.bytes`
bytes were appended since the previous one.

Files are written lazily (on segment roll, truncation and close), like Kafka's mmapped
indexes whose pages the OS writes back: an index is a cache of the log, so what is on
disk may lag. On load, entries are checked (sizes, monotonic, inside the log) and a bad
file is rebuilt from the log rather than trusted.
"""

from __future__ import annotations

import os
import struct
import sys
from array import array
from bisect import bisect_right

_SWAP = sys.byteorder == "little"
_TIME_ENTRY = struct.Struct(">qi")


def _be_array(typecode: str, data: bytes) -> array:
    a = array(typecode)
    a.frombytes(data)
    if _SWAP:
        a.byteswap()
    return a


def _be_bytes(a: array) -> bytes:
    if _SWAP:
        a = array(a.typecode, a)
        a.byteswap()
    return a.tobytes()


def _write_tail(path: str, data: bytes, at: int) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        os.pwrite(fd, data, at)
        os.ftruncate(fd, at + len(data))
    finally:
        os.close(fd)


def _truncate_file(path: str, size: int) -> None:
    try:
        os.truncate(path, size)
    except FileNotFoundError:
        pass


class OffsetIndex:
    """(relative last offset, position) entries, ascending in both."""

    __slots__ = ("path", "base", "rel", "pos", "persisted")

    def __init__(self, path: str, base: int) -> None:
        self.path = path
        self.base = base
        self.rel = array("i")
        self.pos = array("i")
        self.persisted = 0  # entries already in the file

    def __len__(self) -> int:
        return len(self.rel)

    def append(self, last_offset: int, position: int) -> None:
        self.rel.append(last_offset - self.base)
        self.pos.append(position)

    def floor(self, offset: int) -> int:
        """Index of the last entry with offset <= `offset`, or -1."""
        return bisect_right(self.rel, offset - self.base) - 1

    def start_position(self, offset: int) -> tuple[int, int]:
        """(entry number or -1, byte position) to start scanning from for `offset`."""
        i = bisect_right(self.rel, offset - self.base) - 1
        return (i, self.pos[i]) if i >= 0 else (-1, 0)

    def truncate_entries(self, count: int) -> None:
        """Keep the first `count` entries (memory and file)."""
        if count < len(self.rel):
            del self.rel[count:]
            del self.pos[count:]
        if self.persisted > count:
            self.persisted = count
            _truncate_file(self.path, count * 8)

    def truncate_to_position(self, position: int) -> None:
        """Drop entries at or after byte `position` (the log is cut there)."""
        self.truncate_entries(bisect_right(self.pos, position - 1))

    def reset(self) -> None:
        self.rel = array("i")
        self.pos = array("i")
        self.persisted = 0
        _write_tail(self.path, b"", 0)

    def load(self, log_size: int) -> str | None:
        """Read the file; None if it is sane, else why not (entries are then cleared)."""
        try:
            with open(self.path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            data = b""
        if len(data) % 8:
            return f"size {len(data)} is not a multiple of 8"
        both = _be_array("i", data)
        rel, pos = both[0::2], both[1::2]
        for i in range(len(rel)):
            if rel[i] < 0 or pos[i] < 0 or pos[i] >= log_size:
                return f"entry {i} ({rel[i]}, {pos[i]}) is outside the log ({log_size} bytes)"
            if i and (rel[i] <= rel[i - 1] or pos[i] <= pos[i - 1]):
                return f"entry {i} ({rel[i]}, {pos[i]}) does not follow ({rel[i - 1]}, {pos[i - 1]})"
        self.rel, self.pos, self.persisted = rel, pos, len(rel)
        return None

    def write_pending(self) -> None:
        """Write the entries not yet in the file."""
        n = len(self.rel)
        if n == self.persisted:
            return
        both = array("i", bytes(8 * (n - self.persisted)))
        both[0::2] = self.rel[self.persisted :]
        both[1::2] = self.pos[self.persisted :]
        _write_tail(self.path, _be_bytes(both), self.persisted * 8)
        self.persisted = n


class TimeIndex:
    """(max timestamp so far, relative offset of that timestamp) entries, strictly ascending timestamps."""

    __slots__ = ("path", "base", "ts", "rel", "persisted")

    def __init__(self, path: str, base: int) -> None:
        self.path = path
        self.base = base
        self.ts = array("q")
        self.rel = array("i")
        self.persisted = 0

    def __len__(self) -> int:
        return len(self.ts)

    def last_timestamp(self) -> int:
        return self.ts[-1] if self.ts else -1

    def maybe_append(self, timestamp: int, offset: int) -> None:
        if timestamp > (self.ts[-1] if self.ts else -1):
            self.ts.append(timestamp)
            self.rel.append(offset - self.base)

    def floor_below(self, timestamp: int) -> int:
        """Offset of the last entry with a timestamp < `timestamp` (-1 if none): every
        record up to it is older than `timestamp`."""
        i = bisect_right(self.ts, timestamp - 1) - 1
        return self.base + self.rel[i] if i >= 0 else -1

    def truncate_to_offset(self, offset: int) -> None:
        """Drop entries for offsets >= `offset`."""
        keep = len(self.rel)
        while keep and self.base + self.rel[keep - 1] >= offset:
            keep -= 1
        if keep < len(self.ts):
            del self.ts[keep:]
            del self.rel[keep:]
        if self.persisted > keep:
            self.persisted = keep
            _truncate_file(self.path, keep * 12)

    def reset(self) -> None:
        self.ts = array("q")
        self.rel = array("i")
        self.persisted = 0
        _write_tail(self.path, b"", 0)

    def load(self, max_relative_offset: int) -> str | None:
        try:
            with open(self.path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            data = b""
        if len(data) % 12:
            return f"size {len(data)} is not a multiple of 12"
        ts, rel = array("q"), array("i")
        for t, r in _TIME_ENTRY.iter_unpack(data):
            if r < 0 or r > max_relative_offset:
                return f"entry ({t}, {r}) is outside the segment (relative offsets 0..{max_relative_offset})"
            if ts and (t <= ts[-1] or r < rel[-1]):
                return f"entry ({t}, {r}) does not follow ({ts[-1]}, {rel[-1]})"
            ts.append(t)
            rel.append(r)
        self.ts, self.rel, self.persisted = ts, rel, len(ts)
        return None

    def write_pending(self) -> None:
        n = len(self.ts)
        if n == self.persisted:
            return
        data = b"".join(_TIME_ENTRY.pack(self.ts[i], self.rel[i]) for i in range(self.persisted, n))
        _write_tail(self.path, data, self.persisted * 12)
        self.persisted = n
