"""Directory operations and their durability: which names survive a power loss.

Every directory operation (create, mkdir, mknod, symlink, link, unlink, rmdir, rename) is
applied to the backing directory at once, so the mount always shows the current names.
How long it stays *undoable* depends on the metadata mode:

- `immediate` (LazyFS's model): durable at once; nothing is journaled.
- `posix` (the default): each operation is appended to an ordered journal, with the
  backing inode numbers of the directories whose entries it changed (both parents for a
  rename). `fsync` of a directory D commits the journal up to and including the last
  operation that changed D's entries - and every operation before it, as a journaling file
  system does (so the durable namespace is always one that existed). `fsync` of a file
  commits no names: a new file whose directory was never fsynced is gone after a power loss,
  even if its data was fsynced.
- `ordered`: any fsync/fdatasync (of a file or a directory) commits the whole journal, like
  ext4's ordered journal commit.

A power loss (`rollback`) undoes the uncommitted operations in reverse order, which
restores exactly the namespace of the last commit point. To make that possible nothing is
deleted before it is committed: unlink, rmdir and the target replaced by a rename move the
entry into the trash directory (same file system as the data, outside the mount) under
the operation's sequence number; commit deletes those trash entries. Attribute changes
(chmod, chown, utimens) are not journaled: they are durable at once.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
from collections.abc import Callable
from dataclasses import dataclass

MODES = ("posix", "ordered", "immediate")
RENAME_NOREPLACE = 1
RENAME_EXCHANGE = 2


@dataclass
class MetaOp:
    """One journaled operation; paths are backing paths as they were when it ran."""

    seq: int
    kind: str
    path: str
    path2: str | None
    parents: frozenset[int]
    trash: str | None = None

    def describe(self, root: str) -> dict[str, str]:
        def rel(p: str) -> str:
            return "/" + os.path.relpath(p, root).lstrip("./") if p.startswith(root) else p

        d = {"op": self.kind, "path": rel(self.path)}
        if self.path2 is not None:
            d["to"] = rel(self.path2)
        return d


def _err(code: int, path: str) -> OSError:
    return OSError(code, os.strerror(code), path)


class Namespace:
    """The names below `root` (the backing data dir), journaled per `mode` (module docstring).
    `moved(old, new)` is called for every move of an entry (new None: deleted for good), so
    the file system can keep its cached paths current. Not thread-safe: the caller locks."""

    def __init__(self, root: str, trash: str, mode: str = "posix",
                 moved: Callable[[str, str | None], None] | None = None):
        if mode not in MODES:
            raise ValueError(f"unknown metadata mode {mode!r} ({', '.join(MODES)})")
        self.root = root
        self.trash = trash
        self.mode = mode
        self.moved = moved or (lambda _a, _b: None)
        self.ops: list[MetaOp] = []
        self.seq = 0
        os.makedirs(trash, exist_ok=True)

    # ------------------------------------------------------------------ helpers

    def _parent_ino(self, path: str) -> int:
        return os.lstat(os.path.dirname(path)).st_ino

    def _record(self, kind: str, path: str, path2: str | None, parents: set[int], trash: str | None = None) -> None:
        self.seq += 1
        if self.mode == "immediate":
            if trash is not None:
                self._delete(trash)
            return
        self.ops.append(MetaOp(self.seq, kind, path, path2, frozenset(parents), trash))

    def _to_trash(self, path: str) -> str:
        dest = os.path.join(self.trash, str(self.seq + 1))
        os.rename(path, dest)
        self.moved(path, dest)
        return dest

    def _delete(self, p: str) -> None:
        try:
            st = os.lstat(p)
        except FileNotFoundError:
            return
        if stat.S_ISDIR(st.st_mode):
            shutil.rmtree(p, ignore_errors=True)
        else:
            os.unlink(p)
        self.moved(p, None)

    # ------------------------------------------------------------------ operations

    def created(self, kind: str, path: str) -> None:
        """Record that `path` was just created (file, dir, node, symlink or hard link)."""
        self._record(kind, path, None, {self._parent_ino(path)})

    def unlink(self, path: str) -> None:
        if stat.S_ISDIR(os.lstat(path).st_mode):
            raise _err(errno.EISDIR, path)
        parent = self._parent_ino(path)
        if self.mode == "immediate":
            os.unlink(path)
            self.moved(path, None)
            self.seq += 1
            return
        self._record("unlink", path, None, {parent}, self._to_trash(path))

    def rmdir(self, path: str) -> None:
        if not stat.S_ISDIR(os.lstat(path).st_mode):
            raise _err(errno.ENOTDIR, path)
        if os.listdir(path):
            raise _err(errno.ENOTEMPTY, path)
        parent = self._parent_ino(path)
        if self.mode == "immediate":
            os.rmdir(path)
            self.moved(path, None)
            self.seq += 1
            return
        self._record("rmdir", path, None, {parent}, self._to_trash(path))

    def rename(self, old: str, new: str, flags: int = 0) -> None:
        if flags & ~RENAME_NOREPLACE:
            raise _err(errno.EINVAL, new)  # RENAME_EXCHANGE / WHITEOUT are not supported
        st_old = os.lstat(old)
        try:
            st_new: os.stat_result | None = os.lstat(new)
        except FileNotFoundError:
            st_new = None
        if st_new is not None:
            if flags & RENAME_NOREPLACE:
                raise _err(errno.EEXIST, new)
            if st_new.st_ino == st_old.st_ino and st_new.st_dev == st_old.st_dev:
                return  # POSIX: renaming a file onto itself (or a hard link of it) does nothing
            if stat.S_ISDIR(st_old.st_mode) and not stat.S_ISDIR(st_new.st_mode):
                raise _err(errno.ENOTDIR, new)
            if not stat.S_ISDIR(st_old.st_mode) and stat.S_ISDIR(st_new.st_mode):
                raise _err(errno.EISDIR, new)
            if stat.S_ISDIR(st_new.st_mode) and os.listdir(new):
                raise _err(errno.ENOTEMPTY, new)
        parents = {self._parent_ino(old), self._parent_ino(new)}
        if self.mode == "immediate" or st_new is None:
            os.rename(old, new)
            if st_new is not None:
                self.moved(new, None)
            self.moved(old, new)
            self._record("rename", old, new, parents)
            return
        displaced = self._to_trash(new)
        try:
            os.rename(old, new)
        except OSError:
            os.rename(displaced, new)
            self.moved(displaced, new)
            raise
        self.moved(old, new)
        self._record("rename", old, new, parents, displaced)

    # ------------------------------------------------------------------ durability

    def _commit_through(self, index: int) -> int:
        done = self.ops[: index + 1]
        del self.ops[: index + 1]
        for op in done:
            if op.trash is not None:
                self._delete(op.trash)
        return len(done)

    def commit_all(self) -> int:
        """Make every journaled operation durable; returns how many there were."""
        return self._commit_through(len(self.ops) - 1) if self.ops else 0

    def fsync_dir(self, dir_ino: int) -> int:
        """fsync of the directory with backing inode `dir_ino` (see module docstring)."""
        if self.mode == "ordered":
            return self.commit_all()
        for i in range(len(self.ops) - 1, -1, -1):
            if dir_ino in self.ops[i].parents:
                return self._commit_through(i)
        return 0

    def fsync_file(self) -> int:
        """fsync of a file: commits the journal only in `ordered` mode."""
        return self.commit_all() if self.mode == "ordered" else 0

    def rollback(self) -> list[dict[str, str]]:
        """Undo every uncommitted operation, newest first; returns what was undone."""
        undone = []
        while self.ops:
            op = self.ops.pop()
            undone.append(op.describe(self.root))
            try:
                self._undo(op)
            except OSError as e:  # should not happen; keep going and say so
                undone[-1]["error"] = f"{e.strerror}: {e.filename}"
        return undone

    def _undo(self, op: MetaOp) -> None:
        if op.kind in ("create", "mknod", "symlink", "link"):
            os.unlink(op.path)
            self.moved(op.path, None)
        elif op.kind == "mkdir":
            os.rmdir(op.path)
            self.moved(op.path, None)
        elif op.kind in ("unlink", "rmdir"):
            assert op.trash is not None
            os.rename(op.trash, op.path)
            self.moved(op.trash, op.path)
        elif op.kind == "rename":
            assert op.path2 is not None
            os.rename(op.path2, op.path)
            self.moved(op.path2, op.path)
            if op.trash is not None:
                os.rename(op.trash, op.path2)
                self.moved(op.trash, op.path2)
        else:  # pragma: no cover - every kind is handled above
            raise ValueError(op.kind)

    def set_mode(self, mode: str) -> None:
        """Switch modes (the journal is committed first)."""
        if mode not in MODES:
            raise ValueError(f"unknown metadata mode {mode!r} ({', '.join(MODES)})")
        self.commit_all()
        self.mode = mode
