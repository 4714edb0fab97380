"""Small file-system helpers: full writes, directory fsync, atomic replace, dir locks."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Sequence

IOV_MAX = 1024


def pwrite_all(fd: int, buffers: Sequence[bytes | memoryview], offset: int) -> int:
    """Write every buffer at `offset` (pwritev, retried on short writes); returns bytes written."""
    pending = [memoryview(b) for b in buffers if len(b)]
    total = 0
    while pending:
        n = os.pwritev(fd, pending[:IOV_MAX], offset + total)
        total += n
        while pending and n >= len(pending[0]):
            n -= len(pending[0])
            pending.pop(0)
        if n:
            pending[0] = pending[0][n:]
    return total


def fsync_dir(path: str) -> None:
    """fsync a directory, making creations, renames and deletions in it durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_path(path: str) -> bool:
    """fsync a file by name (any process's writes to it); False if it no longer exists."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    return True


def atomic_write(path: str, data: bytes, *, sync: bool = True) -> None:
    """Replace `path` with `data` atomically: write `path.tmp`, fsync, rename, fsync the dir.
    With sync=False no fsync (the rename is still atomic against a process crash)."""
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        pwrite_all(fd, [data], 0)
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if sync:
        fsync_dir(os.path.dirname(path) or ".")


class DirLock:
    """An exclusive flock on `<dir>/.lock`, as Kafka takes one per log dir."""

    def __init__(self, directory: str) -> None:
        self.path = os.path.join(directory, ".lock")
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self.fd)
            raise OSError(f"log dir {directory} is in use by another broker (lock {self.path} is held)") from None

    def release(self) -> None:
        if self.fd >= 0:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = -1
