"""Serving a LazyFS (fs.py) through libfuse3 with mfusepy: `mount`, and `LazyFUSE`,
mfusepy's FUSE with what LazyFS needs of the kernel interface: zero-copy writes and
reads, rename flags, and the file handle passed to the attribute operations (with
nullpath_ok an unlinked open file has no path), no page cache kept across opens.
"""

from __future__ import annotations

import ctypes
import time
from typing import Any

import mfusepy

from nemesis.lazyfs.fs import LazyFS

UTIME_NOW = (1 << 30) - 1
UTIME_OMIT = (1 << 30) - 2


def _timespec_ns(ts: Any) -> int | None:
    """ns since the epoch; None for UTIME_OMIT; now for UTIME_NOW."""
    if ts.tv_nsec == UTIME_OMIT:
        return None
    if ts.tv_nsec == UTIME_NOW:
        return time.time_ns()
    return ts.tv_sec * 1_000_000_000 + ts.tv_nsec


class LazyFUSE(mfusepy.FUSE):
    """mfusepy's FUSE with zero-copy writes, rename flags, and handles passed to the
    attribute operations (needed with nullpath_ok: an unlinked open file has no path)."""

    def _dec(self, path: bytes | None) -> str | None:
        return None if path is None else path.decode(self.encoding, self.errors)

    @staticmethod
    def _fh(fip: Any) -> int | None:
        return fip.contents.fh if fip else None

    def write(self, path: bytes | None, buf: Any, size: int, offset: int, fip: Any) -> int:
        addr = ctypes.cast(buf, ctypes.c_void_p).value
        mv = memoryview((ctypes.c_char * size).from_address(addr)).cast("B") if size else b""
        return self.operations.write(None, mv, offset, fip.contents.fh)

    def read(self, path: bytes | None, buf: Any, size: int, offset: int, fip: Any) -> int:
        ret = self.operations.read(None, size, offset, fip.contents.fh)
        n = len(ret)
        if n:
            src = (ctypes.c_char * n).from_buffer(ret) if isinstance(ret, bytearray) else ret
            ctypes.memmove(buf, src, n)
        return n

    def rename_fuse_3(self, old: bytes, new: bytes, flags: int) -> int:
        return self.operations.rename(self._dec(old), self._dec(new), flags)

    def chmod_fuse_3(self, path: bytes | None, mode: int, fip: Any) -> int:
        return self.operations.chmod(self._dec(path), mode, self._fh(fip))

    def chown_fuse_3(self, path: bytes | None, uid: int, gid: int, fip: Any) -> int:
        if ctypes.c_uint32(uid + 1).value == 0:
            uid = -1
        if ctypes.c_uint32(gid + 1).value == 0:
            gid = -1
        return self.operations.chown(self._dec(path), uid, gid, self._fh(fip))

    def truncate_fuse_3(self, path: bytes | None, length: int, fip: Any) -> int:
        return self.operations.truncate(self._dec(path), length, self._fh(fip))

    def utimens_fuse_3(self, path: bytes | None, buf: Any, fip: Any) -> int:
        times = None
        if buf:
            ts = buf.contents
            times = (_timespec_ns(ts.actime), _timespec_ns(ts.modtime))
        return self.operations.utimens(self._dec(path), times, self._fh(fip))

    def create(self, path: bytes, mode: int, fip: Any) -> int:
        fi = fip.contents
        fi.fh = self.operations.create(self._dec(path), mode, fi.flags)
        fi.direct_io = 1 if self.operations.direct_io else 0
        fi.keep_cache = 0
        return 0

    def open(self, path: bytes, fip: Any) -> int:
        fi = fip.contents
        fi.fh = self.operations.open(self._dec(path), fi.flags)
        fi.direct_io = 1 if self.operations.direct_io else 0
        fi.keep_cache = 0
        return 0


def mount(fs: LazyFS, mountpoint: str, *, foreground: bool = True) -> None:
    """Serve `fs` at `mountpoint` until it is unmounted (blocks)."""
    # allow_other: a server that runs as another user than the root daemon (PostgreSQL refuses
    # root) must reach its data directory; the daemon does every operation as root
    LazyFUSE(fs, mountpoint, foreground=foreground, fsname="wrack-lazyfs", subtype="wrack-lazyfs",
             hard_remove=True, use_ino=True, allow_other=True)
