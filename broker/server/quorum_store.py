"""The controller quorum's files: the metadata log and the quorum state.

- `wrack-metadata.log`: one JSON line per entry (`encode_record` of broker/core/metadata.py,
  with the quorum epoch of the leader that appended it), append-only except when the
  quorum truncates a divergent suffix. `FileRaftLog` writes each entry as the `RaftNode`
  appends it; `sync()` makes them durable (the shell calls it on `FlushLog`). At load a
  torn last line (a crash mid-write) is dropped: only flushed entries were acknowledged.
- `quorum-state`: `{"epoch", "leader_id", "voted_for"}` (KRaft's quorum-state file),
  replaced atomically (write, fsync, rename, fsync the directory) on `PersistQuorumState`.
  The harness reads it to find the active controller (clusters/db.py).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from broker.core.metadata import decode_entry, encode_record
from broker.core.raft_log import RaftLog
from broker.core.raft_messages import PersistQuorumState, RaftEntry

METADATA_FILE = "wrack-metadata.log"
QUORUM_STATE_FILE = "quorum-state"


class MetadataLogFile:
    """The metadata log on disk (see the module docstring)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fh: Any = None
        self._ends: list[int] = []  # byte offset after each entry
        self.dirty = False

    def load(self) -> list[RaftEntry]:
        """The entries on disk, in order; ValueError names `path:line` on a bad line."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        data = self.path.read_bytes() if self.path.exists() else b""
        entries: list[RaftEntry] = []
        pos = 0
        for i, line in enumerate(data.splitlines(keepends=True), start=1):
            if not line.endswith(b"\n"):
                break  # torn last line
            if line.strip():
                off, epoch, rec = decode_entry(line, f"{self.path}:{i}")
                if off != len(entries):
                    raise ValueError(f"{self.path}:{i}: record offset {off}, expected {len(entries)}")
                entries.append(RaftEntry(epoch, rec))
                self._ends.append(pos + len(line))
            pos += len(line)
        if pos != len(data):
            os.truncate(self.path, pos)
        self._fh = open(self.path, "ab")  # noqa: SIM115 - kept open for appends
        return entries

    def append(self, offset: int, entry: RaftEntry) -> None:
        line = encode_record(offset, entry.record, entry.epoch)  # type: ignore[arg-type]
        self._fh.write(line)
        self._ends.append((self._ends[-1] if self._ends else 0) + len(line))
        self.dirty = True

    def truncate(self, end: int) -> None:
        """Drop the entries from offset `end` on (durably, at the next `sync`)."""
        if end >= len(self._ends):
            return
        self._fh.flush()
        size = self._ends[end - 1] if end > 0 else 0
        del self._ends[end:]
        self._fh.truncate(size)
        self.dirty = True

    def sync(self) -> None:
        if self.dirty and self._fh is not None:
            self._fh.flush()
            os.fsync(self._fh.fileno())
            self.dirty = False

    def close(self) -> None:
        if self._fh is not None:
            self.sync()
            self._fh.close()
            self._fh = None


class FileRaftLog(RaftLog):
    """A `RaftLog` whose appends and truncations go to a `MetadataLogFile`;
    `on_append(offset, entry)` is called after each append (the shell's log lines)."""

    def __init__(self, file: MetadataLogFile, entries: list[RaftEntry],
                 on_append: Callable[[int, RaftEntry], None] | None = None) -> None:
        super().__init__(entries)
        self.file = file
        self.on_append = on_append

    def append(self, entry: RaftEntry) -> int:
        off = super().append(entry)
        file = getattr(self, "file", None)  # None while the base class loads the entries
        if file is not None:
            file.append(off, entry)
            if self.on_append is not None:
                self.on_append(off, entry)
        return off

    def truncate(self, end: int) -> None:
        super().truncate(end)
        self.file.truncate(end)


class QuorumStateFile:
    """The quorum state on disk (see the module docstring)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def load(self) -> PersistQuorumState | None:
        """The last state written, None when there is none; ValueError names the file."""
        if not self.path.exists():
            return None
        try:
            d = json.loads(self.path.read_text())
            return PersistQuorumState(int(d["epoch"]), int(d["leader_id"]), int(d["voted_for"]))
        except (ValueError, KeyError, TypeError) as e:
            raise ValueError(f"{self.path}: bad quorum state ({type(e).__name__}: {e})") from None

    def write(self, st: PersistQuorumState) -> None:
        tmp = self.path.with_suffix(".tmp")
        with open(tmp, "w") as fh:
            json.dump({"epoch": st.epoch, "leader_id": st.leader_id, "voted_for": st.voted_for}, fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.path)
        fd = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
