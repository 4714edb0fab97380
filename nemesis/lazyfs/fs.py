"""LazyFS in Python: a FUSE file system (mfusepy, libfuse3) over a backing directory whose
writes stay in its own cache until fsync, so a power loss can drop them.

Layout of a backing directory B: `B/data` holds the files as served (durable content only),
`B/trash` holds entries a power loss may still bring back (journal.py).

Semantics (docs/nemesis.md has the full table):
- write/truncate/fallocate(mode 0) change only the cache (cache.py); `stat` shows the cached
  size and mtime; reads see the cache over the backing file.
- fsync/fdatasync of a file writes its cached data and size to the backing file and
  fsyncs it. fsync of a directory commits directory operations (journal.py, per metadata
  mode). Neither ever returns ENOSYS (the kernel would stop sending them).
- `lose_unsynced` drops every file's unsynced data (optionally keeping a prefix of each
  file's last unsynced write: a torn write) and rolls back uncommitted directory operations,
  then drops the kernel's cached pages of every affected inode.
- When dirty data exceeds `cache_limit` bytes, the file with the most is written back
  without fsync (as a kernel flusher would): that data then survives a power loss.
- `passthrough` mode (`lazy=False`): writes, truncates and directory operations go straight
  to the backing directory; nothing can be lost.

Kernel caching: the mount uses entry/attr/negative timeouts of 0, no writeback cache, no
keep_cache, and auto_inval_data (the kernel drops an inode's pages when it sees its size or
mtime change on the GETATTR it sends before every read); after a loss the affected inodes
are also invalidated explicitly (`fuse_invalidate_path`). `direct_io=True` bypasses the
kernel page cache entirely (shared mmap then fails with ENODEV). The mount itself, through
libfuse3, is mount.py's.
"""

from __future__ import annotations

import ctypes
import errno
import logging
import os
import random
import stat
import threading
import time
from collections.abc import Callable
from typing import Any

import mfusepy

from nemesis.lazyfs.cache import FileCache
from nemesis.lazyfs.journal import Namespace

log = logging.getLogger("wrack.lazyfs")

FUSE_CAP_AUTO_INVAL_DATA = 1 << 12
FUSE_CAP_WRITEBACK_CACHE = 1 << 16
MAX_WRITE = 1 << 20


def _errno(code: int) -> OSError:
    return OSError(code, os.strerror(code))


class LazyFS(mfusepy.Operations):
    """The file system's operations and its control commands (see module docstring)."""

    use_ns = True
    flag_nopath = True
    flag_nullpath_ok = True

    def __init__(self, backing: str, *, metadata: str = "posix", lazy: bool = True,
                 cache_limit: int = 512 << 20, direct_io: bool = False):
        backing = os.path.abspath(backing)
        self.backing = backing
        self.data = os.path.join(backing, "data")
        os.makedirs(self.data, exist_ok=True)
        self.mutex = threading.RLock()
        self.states: dict[int, FileCache] = {}
        self.handles: dict[int, FileCache] = {}
        self._next_fh = 1
        self.ns = Namespace(self.data, os.path.join(backing, "trash"), metadata, moved=self._moved)
        self.lazy = lazy
        self.cache_limit = cache_limit
        self.direct_io = direct_io
        self.dirty_bytes = 0
        self.counters = {"writes": 0, "written_bytes": 0, "fsyncs": 0, "fsyncdirs": 0, "writebacks": 0,
                         "losses": 0}
        self._count_lock = threading.Lock()
        self.fuse_ptr: int | None = None
        self.on_init: Callable[[], None] | None = None

    # ------------------------------------------------------------------ paths and states

    def _p(self, path: str) -> str:
        return self.data if path == "/" else self.data + path

    def _fuse_path(self, backing_path: str) -> str | None:
        if backing_path == self.data:
            return "/"
        if backing_path.startswith(self.data + "/"):
            return backing_path[len(self.data):]
        return None

    def _moved(self, old: str, new: str | None) -> None:
        for st in self.states.values():
            if st.path == old or st.path.startswith(old + "/"):
                st.path = "" if new is None else new + st.path[len(old):]

    def _state_for_fd(self, fd: int, path: str) -> FileCache:
        """The state of the inode `fd` refers to (taking over `fd`, or closing it when the
        inode has a state already). Caller holds self.mutex."""
        s = os.fstat(fd)
        st = self.states.get(s.st_ino)
        if st is not None:
            os.close(fd)
            if not st.path:
                st.path = path
            return st
        st = FileCache(s.st_ino, fd, s.st_size, path=path)
        self.states[s.st_ino] = st
        return st

    def _maybe_drop(self, st: FileCache) -> None:
        """Forget a state nobody needs: no handles and nothing unsynced (or no name left)."""
        if st.handles > 0:
            return
        if st.dirty and os.fstat(st.fd).st_nlink > 0:
            return
        if self.states.get(st.ino) is st:
            del self.states[st.ino]
            if st.dirty:
                self._account(st.extents.clear())
            os.close(st.fd)

    def _account(self, delta: int) -> None:
        if delta:
            with self._count_lock:
                self.dirty_bytes += delta

    def _handle(self, fh: int) -> FileCache:
        try:
            return self.handles[fh]
        except KeyError:
            raise _errno(errno.EBADF) from None

    def _with_state(self, path: str | None, fh: int | None, fn: Callable[[FileCache], Any]) -> Any:
        """Run fn(state) for an open handle, or for the file at `path` (opened for the call)."""
        if fh is not None and fh in self.handles:
            return fn(self.handles[fh])
        if path is None:
            raise _errno(errno.EBADF)
        with self.mutex:
            p = self._p(path)
            st = self._state_for_fd(os.open(p, os.O_RDWR | os.O_NOFOLLOW), p)
            st.handles += 1
        try:
            return fn(st)
        finally:
            with self.mutex:
                st.handles -= 1
                self._maybe_drop(st)

    # ------------------------------------------------------------------ attributes

    def _attrs(self, s: os.stat_result, st: FileCache | None) -> dict[str, Any]:
        d = {"st_mode": s.st_mode, "st_ino": s.st_ino, "st_nlink": s.st_nlink, "st_uid": s.st_uid,
             "st_gid": s.st_gid, "st_rdev": s.st_rdev, "st_size": s.st_size, "st_blksize": s.st_blksize,
             "st_blocks": s.st_blocks, "st_atime": s.st_atime_ns, "st_mtime": s.st_mtime_ns,
             "st_ctime": s.st_ctime_ns}
        if st is not None:
            d["st_size"] = st.size
            d["st_blocks"] = (st.size + 511) // 512
            if st.mtime_ns is not None and st.mtime_ns > s.st_mtime_ns:
                d["st_mtime"] = d["st_ctime"] = st.mtime_ns
        return d

    def getattr(self, path: str | None, fh: int | None = None) -> dict[str, Any]:
        if fh is not None and fh in self.handles:
            st = self.handles[fh]
            return self._attrs(os.fstat(st.fd), st)
        if path is None:
            raise _errno(errno.EBADF)
        s = os.lstat(self._p(path))
        return self._attrs(s, self.states.get(s.st_ino) if stat.S_ISREG(s.st_mode) else None)

    def chmod(self, path: str | None, mode: int, fh: int | None = None) -> int:
        if path is not None:
            os.chmod(self._p(path), mode)
        elif fh is not None:
            os.chmod(self._handle(fh).fd, mode)
        return 0

    def chown(self, path: str | None, uid: int, gid: int, fh: int | None = None) -> int:
        if path is None:
            if fh is not None:
                os.fchown(self._handle(fh).fd, uid, gid)
        else:
            os.lchown(self._p(path), uid, gid)
        return 0

    def utimens(self, path: str | None, times: tuple[int | None, int | None] | None = None,
                fh: int | None = None) -> int:
        target: int | str
        if path is None:
            if fh is None:
                return 0
            target = self._handle(fh).fd
        else:
            target = self._p(path)
        if times is None:
            os.utime(target, follow_symlinks=False) if path is not None else os.utime(target)
            return 0
        if None in times:
            cur = os.stat(target, follow_symlinks=False) if path is not None else os.fstat(target)  # type: ignore[arg-type]
            times = (cur.st_atime_ns if times[0] is None else times[0], cur.st_mtime_ns if times[1] is None else times[1])
        if path is not None:
            os.utime(target, ns=times, follow_symlinks=False)  # type: ignore[arg-type]
        else:
            os.utime(target, ns=times)  # type: ignore[arg-type]
        return 0

    def readlink(self, path: str) -> str:
        return os.readlink(self._p(path))

    def statfs(self, path: str) -> dict[str, int]:
        v = os.statvfs(self.data)
        return {k: getattr(v, k) for k in ("f_bsize", "f_frsize", "f_blocks", "f_bfree", "f_bavail",
                                           "f_files", "f_ffree", "f_favail", "f_flag", "f_namemax")}

    # ------------------------------------------------------------------ directory operations

    def mknod(self, path: str, mode: int, dev: int) -> int:
        with self.mutex:
            p = self._p(path)
            os.mknod(p, mode, dev)
            self.ns.created("mknod", p)
        return 0

    def mkdir(self, path: str, mode: int) -> int:
        with self.mutex:
            p = self._p(path)
            os.mkdir(p, mode)
            self.ns.created("mkdir", p)
        return 0

    def symlink(self, target: str, source: str) -> int:
        """Create the symlink `target` (a path in this fs) pointing to `source`."""
        with self.mutex:
            p = self._p(target)
            os.symlink(source, p)
            self.ns.created("symlink", p)
        return 0

    def link(self, target: str, source: str) -> int:
        """Create the hard link `target` to the existing `source`."""
        with self.mutex:
            p = self._p(target)
            os.link(self._p(source), p, follow_symlinks=False)
            self.ns.created("link", p)
        return 0

    def unlink(self, path: str) -> int:
        with self.mutex:
            p = self._p(path)
            ino = os.lstat(p).st_ino
            self.ns.unlink(p)
            self._drop_unreachable(ino)
        return 0

    def rmdir(self, path: str) -> int:
        with self.mutex:
            self.ns.rmdir(self._p(path))
        return 0

    def rename(self, old: str, new: str, flags: int = 0) -> int:
        with self.mutex:
            pn = self._p(new)
            try:
                displaced = os.lstat(pn).st_ino
            except FileNotFoundError:
                displaced = None
            self.ns.rename(self._p(old), pn, flags)
            if displaced is not None:
                self._drop_unreachable(displaced)
        return 0

    def _drop_unreachable(self, ino: int) -> None:
        st = self.states.get(ino)
        if st is not None:
            self._maybe_drop(st)

    def _drop_all_unreachable(self) -> None:
        for st in list(self.states.values()):
            self._maybe_drop(st)

    def opendir(self, path: str) -> int:
        return os.open(self._p(path), os.O_RDONLY | os.O_DIRECTORY)

    def readdir(self, path: str | None, fh: int) -> list[tuple[str, dict[str, int], int]]:
        """Entries with their inode numbers and types (with use_ino, an entry whose inode
        number is 0 would be skipped by readdir(3))."""
        me = os.fstat(fh).st_ino
        out = [(".", {"st_mode": stat.S_IFDIR, "st_ino": me}, 0), ("..", {"st_mode": stat.S_IFDIR, "st_ino": 1}, 0)]
        with os.scandir(fh) as it:
            for e in it:
                if e.is_dir(follow_symlinks=False):
                    mode = stat.S_IFDIR
                elif e.is_symlink():
                    mode = stat.S_IFLNK
                elif e.is_file(follow_symlinks=False):
                    mode = stat.S_IFREG
                else:
                    mode = stat.S_IFMT(e.stat(follow_symlinks=False).st_mode)
                out.append((e.name, {"st_mode": mode, "st_ino": e.inode()}, 0))
        return out

    def releasedir(self, path: str | None, fh: int) -> int:
        os.close(fh)
        return 0

    def fsyncdir(self, path: str | None, datasync: int, fh: int) -> int:
        with self.mutex:
            self.counters["fsyncdirs"] += 1
            if self.lazy:
                self.ns.fsync_dir(os.fstat(fh).st_ino)
                self._drop_all_unreachable()
            os.fsync(fh)
        return 0

    # ------------------------------------------------------------------ files

    def _new_handle(self, st: FileCache) -> int:
        fh = self._next_fh
        self._next_fh += 1
        self.handles[fh] = st
        st.handles += 1
        return fh

    def open(self, path: str, flags: int) -> int:
        with self.mutex:
            p = self._p(path)
            st = self._state_for_fd(os.open(p, os.O_RDWR | os.O_NOFOLLOW), p)
            fh = self._new_handle(st)
        if flags & os.O_TRUNC:
            self.truncate(None, 0, fh)
        return fh

    def create(self, path: str, mode: int, flags: int = 0) -> int:
        with self.mutex:
            p = self._p(path)
            existed = os.path.lexists(p)
            fd = os.open(p, os.O_RDWR | os.O_CREAT | (flags & os.O_EXCL) | os.O_NOFOLLOW, mode)
            if not existed:
                stale = self.states.pop(os.fstat(fd).st_ino, None)
                if stale is not None:  # cannot happen while states hold their fds; be safe
                    os.close(stale.fd)
                self.ns.created("create", p)
            st = self._state_for_fd(fd, p)
            fh = self._new_handle(st)
        if existed and flags & os.O_TRUNC:
            self.truncate(None, 0, fh)
        return fh

    def read(self, path: str | None, size: int, offset: int, fh: int) -> bytes | bytearray:
        st = self._handle(fh)
        with st.lock:
            return st.read(offset, size)

    def write(self, path: str | None, data: bytes | memoryview, offset: int, fh: int) -> int:
        st = self._handle(fh)
        n = len(data)
        with st.lock:
            if self.lazy:
                self._account(st.write(offset, data, time.time_ns()))
            else:
                os.pwrite(st.fd, data, offset)
                st.size = st.durable_size = st.valid = max(st.size, offset + n)
        c = self.counters
        c["writes"] += 1
        c["written_bytes"] += n
        if self.dirty_bytes > self.cache_limit:
            self._writeback()
        return n

    def truncate(self, path: str | None, length: int, fh: int | None = None) -> int:
        def do(st: FileCache) -> None:
            with st.lock:
                if self.lazy:
                    self._account(st.truncate(length, time.time_ns()))
                else:
                    os.ftruncate(st.fd, length)
                    st.size = st.durable_size = st.valid = length

        self._with_state(path, fh, do)
        return 0

    def fallocate(self, path: str | None, mode: int, offset: int, size: int, fh: int) -> int:
        if mode != 0:
            raise _errno(errno.EOPNOTSUPP)
        st = self._handle(fh)
        with st.lock:
            if offset + size > st.size:
                if self.lazy:
                    st.truncate(offset + size, time.time_ns())
                else:
                    os.posix_fallocate(st.fd, offset, size)
                    st.size = st.durable_size = st.valid = os.fstat(st.fd).st_size
        return 0

    def flush(self, path: str | None, fh: int) -> int:
        return 0

    def release(self, path: str | None, fh: int) -> int:
        with self.mutex:
            st = self.handles.pop(fh, None)
            if st is not None:
                st.handles -= 1
                self._maybe_drop(st)
        return 0

    def fsync(self, path: str | None, datasync: int, fh: int) -> int:
        st = self._handle(fh)
        with st.lock:
            if st.dirty:
                self._account(st.flush(sync=True, datasync=bool(datasync)))
            else:
                (os.fdatasync if datasync else os.fsync)(st.fd)
        self.counters["fsyncs"] += 1
        if self.lazy and self.ns.mode == "ordered":
            with self.mutex:
                self.ns.fsync_file()
                self._drop_all_unreachable()
        return 0

    def _writeback(self) -> None:
        """Write back the file with the most dirty data, without fsync (cache full)."""
        with self.mutex:
            victims = sorted(self.states.values(), key=lambda s: s.extents.nbytes, reverse=True)
        for st in victims:
            if self.dirty_bytes <= self.cache_limit // 2:
                break
            with st.lock:
                if st.dirty:
                    self._account(st.flush(sync=False))
                    self.counters["writebacks"] += 1

    # ------------------------------------------------------------------ lifecycle

    def init_with_config(self, conn: Any, config: Any) -> None:
        if conn is not None:
            conn.max_write = MAX_WRITE
            conn.want = (conn.want & ~FUSE_CAP_WRITEBACK_CACHE) | (conn.capable & FUSE_CAP_AUTO_INVAL_DATA)
        if config is not None:
            config.entry_timeout = 0.0
            config.attr_timeout = 0.0
            config.negative_timeout = 0.0
            config.use_ino = 1
            config.hard_remove = 1
            config.nullpath_ok = 1
            config.kernel_cache = 0
            config.auto_cache = 0
            config.direct_io = 1 if self.direct_io else 0
        ctx = mfusepy._libfuse.fuse_get_context()
        if ctx:
            self.fuse_ptr = ctx.contents.fuse
        if self.on_init is not None:
            self.on_init()

    def destroy(self, path: str) -> None:
        """Clean unmount: everything cached becomes durable (nothing lost on a clean stop)."""
        try:
            self.sync_all()
        except OSError:
            log.exception("lazyfs: sync on unmount failed")

    # ------------------------------------------------------------------ control commands

    def status(self) -> dict[str, Any]:
        with self.mutex:
            dirty = [st for st in self.states.values() if st.dirty]
            return {"mode": "lazy" if self.lazy else "passthrough", "metadata": self.ns.mode,
                    "dirty_files": len(dirty), "dirty_bytes": self.dirty_bytes,
                    "journal": len(self.ns.ops), "open_handles": len(self.handles),
                    "cache_limit": self.cache_limit, "direct_io": self.direct_io, **self.counters}

    def report(self) -> dict[str, Any]:
        """What a power loss would drop right now."""
        with self.mutex:
            files = []
            for st in sorted(self.states.values(), key=lambda s: s.path):
                if st.dirty:
                    files.append({"path": self._fuse_path(st.path) or "(unlinked)", "ino": st.ino,
                                  "size": st.size, "durable_size": st.durable_size,
                                  "dirty_ranges": st.extents.ranges()[:16], "last_write": st.last_write})
            return {"files": files, "journal": [op.describe(self.data) for op in self.ns.ops]}

    def sync_all(self) -> dict[str, int]:
        """fsync every cached file and commit every directory operation."""
        with self.mutex:
            n = b = 0
            for st in list(self.states.values()):
                with st.lock:
                    if st.dirty:
                        b += st.extents.nbytes
                        self._account(st.flush(sync=True))
                        n += 1
            ops = self.ns.commit_all()
            self._drop_all_unreachable()
            return {"synced_files": n, "synced_bytes": b, "committed_ops": ops}

    def configure(self, mode: str | None = None, metadata: str | None = None) -> dict[str, Any]:
        """Switch lazy/passthrough and the metadata mode; everything cached is synced first."""
        if mode not in (None, "lazy", "passthrough"):
            raise ValueError(f"unknown mode {mode!r} (lazy or passthrough)")
        with self.mutex:
            synced = self.sync_all()
            if mode is not None:
                self.lazy = mode == "lazy"
            if metadata is not None:
                self.ns.set_mode(metadata)
            return {**synced, "mode": "lazy" if self.lazy else "passthrough", "metadata": self.ns.mode}

    def lose_unsynced(self, torn: bool | int = False, seed: int | None = None) -> dict[str, Any]:
        """Power loss of the file system (see module docstring). `torn`: False (nothing of an
        unsynced write survives), an int (that many bytes of each file's last unsynced write
        survive, at most the write's length) or True (a random part: 1 .. length-1 bytes,
        chosen with `seed`). Returns exactly what was dropped."""
        rng = random.Random(seed)
        files = []
        with self.mutex:
            for st in sorted(self.states.values(), key=lambda s: s.ino):
                with st.lock:
                    if not st.dirty:
                        continue
                    keep = None
                    if torn is not False and torn is not None and st.last_write is not None:
                        n = st.last_write[1]
                        if torn is True:
                            keep = rng.randrange(1, n) if n > 1 else 0
                        else:
                            keep = int(torn)
                    before = st.extents.nbytes
                    rep = st.lose(keep)
                    self._account(-before)
                    rep["path"] = self._fuse_path(st.path) or "(unlinked)"
                    files.append(rep)
            undone = self.ns.rollback()
            self._drop_all_unreachable()
            self.counters["losses"] += 1
            paths = [f["path"] for f in files if f["path"] != "(unlinked)"]
        self._invalidate(paths + [u["path"] for u in undone])
        return {"files": files, "undone": undone, "lost_bytes": sum(int(f["dirty_bytes"]) for f in files),
                "torn": torn, "seed": seed}

    def _invalidate(self, paths: list[str]) -> None:
        """Drop the kernel's cached pages and attributes of these inodes (best effort: a path
        the kernel does not know has nothing cached)."""
        if not self.fuse_ptr:
            return
        fn = mfusepy._libfuse.fuse_invalidate_path
        fn.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
        for p in set(paths):
            fn(self.fuse_ptr, p.encode("utf-8", "surrogateescape"))
