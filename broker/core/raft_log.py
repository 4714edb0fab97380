"""The controller quorum's log: `RaftEntry(epoch, record)` in offset order from 0, with an
epoch index (KRaft's leader-epoch cache) for divergence checks.

In memory; a shell subclasses it (or wraps `append`/`truncate`) to write the file, and
makes it durable when the node asks (`FlushLog`). The node never flushes by itself.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable

from broker.core.raft_messages import RaftEntry


class RaftLog:
    def __init__(self, entries: Iterable[RaftEntry] = ()) -> None:
        self.entries: list[RaftEntry] = []
        self._epochs: list[int] = []  # epochs of the runs of entries, increasing
        self._starts: list[int] = []  # start offset of each run
        for e in entries:
            self.append(e)

    @property
    def end_offset(self) -> int:
        return len(self.entries)

    @property
    def last_epoch(self) -> int:
        """Epoch of the last entry, -1 for an empty log."""
        return self._epochs[-1] if self._epochs else -1

    def append(self, entry: RaftEntry) -> int:
        """Append and return the entry's offset; epochs never decrease along the log."""
        if self._epochs and entry.epoch < self._epochs[-1]:
            raise ValueError(f"entry of epoch {entry.epoch} after epoch {self._epochs[-1]}")
        if not self._epochs or entry.epoch != self._epochs[-1]:
            self._epochs.append(entry.epoch)
            self._starts.append(len(self.entries))
        self.entries.append(entry)
        return len(self.entries) - 1

    def truncate(self, end: int) -> None:
        """Drop every entry at or after `end`."""
        if end >= len(self.entries):
            return
        del self.entries[max(end, 0):]
        while self._starts and self._starts[-1] >= len(self.entries):
            self._starts.pop()
            self._epochs.pop()

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """(largest epoch <= `epoch` with entries here, the offset after its last entry);
        (-1, 0) when every entry is of a later epoch (KRaft's endOffsetForEpoch)."""
        i = bisect.bisect_right(self._epochs, epoch)
        if i == 0:
            return -1, 0
        end = self._starts[i] if i < len(self._starts) else len(self.entries)
        return self._epochs[i - 1], end

    def read(self, offset: int, max_entries: int) -> tuple[RaftEntry, ...]:
        return tuple(self.entries[offset : offset + max_entries])
