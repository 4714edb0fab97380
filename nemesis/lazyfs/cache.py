"""The page cache of one file: dirty extents over a backing file, a logical size, and what
a power loss keeps. Pure data structures plus three functions that take the backing fd.

`Extents` holds dirty bytes as sorted, non-overlapping `bytearray` runs; touching or
overlapping writes merge, so an appending writer keeps one run that grows in place (no
per-byte Python work, one copy per write).

`FileCache` is the state of one inode (keyed by the backing inode number, so hard links
and renames share it):

- `durable_size`: the backing file's size, which is also its durable content: the backing
  file only ever holds fsynced data (or data written back because the cache was full);
- `size`: the size the application sees;
- `valid`: backing bytes `[0, valid)` are still part of the file; a truncate below the
  durable size lowers it, so a later extension reads zeros there, not the old bytes;
- `last_write`: `(offset, length)` of the last run of sequential writes since the last
  sync, for torn writes. The kernel splits one write(2) into several FUSE write requests
  (at `max_write`, 1 MiB here, and after a partial page it had not cached), so the file
  system cannot see write(2) boundaries: a write that starts where the previous one ended
  extends the run instead of starting a new one. For an appending log, a torn write thus
  keeps a prefix of the data appended since the last fsync.

`flush(fd, ...)` makes the backing file equal to the cached view (truncate, pwrite,
truncate, then fsync/fdatasync when asked); `lose(fd, keep)` drops everything unsynced,
optionally keeping the first `keep` bytes of the last unsynced write (a torn write).
"""

from __future__ import annotations

import os
import threading
from bisect import bisect_right
from dataclasses import dataclass, field


class Extents:
    """Dirty byte runs of one file (see module docstring)."""

    __slots__ = ("starts", "bufs", "nbytes")

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.bufs: list[bytearray] = []
        self.nbytes = 0

    def __bool__(self) -> bool:
        return bool(self.starts)

    def ranges(self) -> list[tuple[int, int]]:
        return [(s, s + len(b)) for s, b in zip(self.starts, self.bufs, strict=True)]

    def write(self, off: int, data: bytes | bytearray | memoryview) -> int:
        """Record `data` at `off`; returns the change in dirty bytes."""
        n = len(data)
        if n == 0:
            return 0
        end = off + n
        starts, bufs = self.starts, self.bufs
        before = self.nbytes
        i = bisect_right(starts, off) - 1
        if i >= 0 and starts[i] + len(bufs[i]) >= off:
            first = i
        else:
            first = i + 1
        # fast paths: append to the run that ends at `off`, or overwrite inside one run
        if first < len(starts) and starts[first] <= off:
            s, b = starts[first], bufs[first]
            nxt = starts[first + 1] if first + 1 < len(starts) else None
            if end <= s + len(b):
                b[off - s:end - s] = data
                return 0
            if nxt is None or end < nxt:
                old = len(b)
                del b[off - s:]
                b += data
                self.nbytes += len(b) - old
                return len(b) - old
        # general case: merge every run touching [off, end]
        last = bisect_right(starts, end) - 1
        if last < first:
            starts.insert(first, off)
            bufs.insert(first, bytearray(data))
            self.nbytes += n
            return n
        s0 = min(off, starts[first])
        e_last = starts[last] + len(bufs[last])
        merged = bytearray()
        if starts[first] < off:
            merged += memoryview(bufs[first])[: off - starts[first]]
        merged += data
        if e_last > end:
            merged += memoryview(bufs[last])[end - starts[last]:]
        del starts[first:last + 1]
        del bufs[first:last + 1]
        starts.insert(first, s0)
        bufs.insert(first, merged)
        self._recount()
        return self.nbytes - before

    def _recount(self) -> None:
        self.nbytes = sum(len(b) for b in self.bufs)

    def truncate(self, size: int) -> int:
        """Drop dirty bytes at or beyond `size`; returns the change in dirty bytes."""
        before = self.nbytes
        while self.starts and self.starts[-1] >= size:
            self.starts.pop()
            self.bufs.pop()
        if self.starts and self.starts[-1] + len(self.bufs[-1]) > size:
            del self.bufs[-1][size - self.starts[-1]:]
        self._recount()
        return self.nbytes - before

    def overlay(self, off: int, out: bytearray) -> None:
        """Copy the dirty bytes inside `[off, off + len(out))` into `out`."""
        end = off + len(out)
        starts = self.starts
        i = max(0, bisect_right(starts, off) - 1)
        while i < len(starts) and starts[i] < end:
            s, b = starts[i], self.bufs[i]
            lo, hi = max(s, off), min(s + len(b), end)
            if lo < hi:
                out[lo - off:hi - off] = memoryview(b)[lo - s:hi - s]
            i += 1

    def covers(self, off: int, end: int) -> bool:
        """True when one run holds all of `[off, end)`."""
        i = bisect_right(self.starts, off) - 1
        return i >= 0 and self.starts[i] + len(self.bufs[i]) >= end

    def overlaps(self, off: int, end: int) -> bool:
        i = bisect_right(self.starts, off) - 1
        if i >= 0 and self.starts[i] + len(self.bufs[i]) > off:
            return True
        return i + 1 < len(self.starts) and self.starts[i + 1] < end

    def clear(self) -> int:
        before = self.nbytes
        self.starts.clear()
        self.bufs.clear()
        self.nbytes = 0
        return -before


@dataclass
class FileCache:
    """One inode's cached state (see module docstring). `fd` is an O_RDWR fd of the backing
    inode, held for the state's whole life (so the inode number cannot be reused)."""

    ino: int
    fd: int
    durable_size: int
    path: str = ""
    size: int = -1
    valid: int = -1
    extents: Extents = field(default_factory=Extents)
    last_write: tuple[int, int] | None = None
    mtime_ns: int | None = None
    handles: int = 0
    lock: threading.RLock = field(default_factory=threading.RLock)

    def __post_init__(self) -> None:
        if self.size < 0:
            self.size = self.durable_size
        if self.valid < 0:
            self.valid = self.durable_size

    @property
    def dirty(self) -> bool:
        return bool(self.extents) or self.size != self.durable_size or self.valid < self.durable_size

    # ------------------------------------------------------------------ data ops

    def write(self, off: int, data: bytes | bytearray | memoryview, now_ns: int) -> int:
        """Cache a write; returns the change in dirty bytes."""
        delta = self.extents.write(off, data)
        end = off + len(data)
        if end > self.size:
            self.size = end
        lw = self.last_write
        if lw is not None and lw[0] + lw[1] == off:
            self.last_write = (lw[0], lw[1] + len(data))  # a sequential run (see module docstring)
        else:
            self.last_write = (off, len(data))
        self.mtime_ns = now_ns
        return delta

    def truncate(self, size: int, now_ns: int) -> int:
        """Cache a truncate; returns the change in dirty bytes."""
        delta = 0
        if size < self.size:
            delta = self.extents.truncate(size)
            if size < self.valid:
                self.valid = size
            if self.last_write is not None:
                o, n = self.last_write
                self.last_write = (o, max(0, min(n, size - o))) if o < size else None
        self.size = size
        self.mtime_ns = now_ns
        return delta

    def read(self, off: int, n: int) -> bytes | bytearray:
        """The application's view of `[off, off + n)` (clipped at the size)."""
        end = min(off + n, self.size)
        if off >= end:
            return b""
        if end <= self.valid and not self.extents.overlaps(off, end):
            return os.pread(self.fd, end - off, off)
        out = bytearray(end - off)
        if off < self.valid:
            base = os.pread(self.fd, min(end, self.valid) - off, off)
            out[: len(base)] = base
        self.extents.overlay(off, out)
        return out

    # ------------------------------------------------------------------ sync / lose

    def flush(self, *, sync: bool, datasync: bool = False) -> int:
        """Write the cached view to the backing file (and fsync/fdatasync it when `sync`);
        returns the change in dirty bytes."""
        fd = self.fd
        if self.valid < self.durable_size:
            os.ftruncate(fd, self.valid)
        for s, b in zip(self.extents.starts, self.extents.bufs, strict=True):
            mv = memoryview(b)
            done = 0
            while done < len(b):
                done += os.pwrite(fd, mv[done:], s + done)
        if os.fstat(fd).st_size != self.size:
            os.ftruncate(fd, self.size)
        if sync:
            (os.fdatasync if datasync else os.fsync)(fd)
        delta = self.extents.clear()
        self.durable_size = self.valid = self.size
        self.last_write = None
        return delta

    def lose(self, keep: int | None = None) -> dict[str, int | str]:
        """Drop unsynced data; with `keep`, the first `keep` bytes of the last unsynced write
        survive (written to the backing file). Returns what happened, for the report."""
        rep: dict[str, int | str] = {"path": self.path, "ino": self.ino, "size_before": self.size,
                                     "dirty_bytes": self.extents.nbytes, "durable_size": self.durable_size}
        torn: bytes | bytearray = b""
        if keep and self.last_write is not None:
            o, n = self.last_write
            k = min(keep, n, max(0, self.size - o))
            if k > 0:
                torn = self.read(o, k)
                rep["torn_offset"] = o
                rep["torn_kept"] = len(torn)
                rep["torn_write_length"] = n
        self.extents.clear()
        self.size = self.valid = self.durable_size
        self.last_write = None
        self.mtime_ns = None
        if torn:
            o = int(rep["torn_offset"])
            os.pwrite(self.fd, torn, o)
            self.durable_size = self.size = self.valid = os.fstat(self.fd).st_size
        rep["size_after"] = self.size
        return rep
