"""The leader epoch cache (KIP-101 / KIP-279): epoch -> first offset written in it. Pure.

Shared by the in-memory log of the simulation and the on-disk `SegmentedLog` (which also
persists it as `leader-epoch-checkpoint`). Entries are appended only with an epoch
greater than the latest (epochs in a log never go back); negative epochs (a batch
nobody stamped) are ignored, as Kafka ignores them. Mutators return whether anything
changed, so a persistent owner rewrites its checkpoint only when needed.
"""

from __future__ import annotations


class EpochCache:
    __slots__ = ("entries",)

    def __init__(self, entries: list[tuple[int, int]] | None = None) -> None:
        self.entries: list[tuple[int, int]] = list(entries or [])

    def latest_epoch(self) -> int:
        return self.entries[-1][0] if self.entries else -1

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that `epoch` starts at `start_offset` if it is newer than the latest."""
        e = self.entries
        if epoch >= 0 and (not e or epoch > e[-1][0]):
            e.append((epoch, start_offset))
            return True
        return False

    def truncate_from_end(self, end_offset: int) -> bool:
        """Drop every entry starting at or after `end_offset`."""
        e = self.entries
        keep = [x for x in e if x[1] < end_offset]
        if len(keep) != len(e):
            self.entries = keep
            return True
        return False

    def truncate_from_start(self, start_offset: int) -> bool:
        """The log now starts at `start_offset` (retention): drop entries wholly before it;
        the entry covering it is moved up to start there (Kafka's truncateFromStart)."""
        e = self.entries
        keep = [x for x in e if x[1] >= start_offset]
        covering = [x for x in e if x[1] < start_offset]
        if covering and (not keep or keep[0][1] > start_offset):
            keep.insert(0, (covering[-1][0], start_offset))
        if keep != e:
            self.entries = keep
            return True
        return False

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """Kafka's LeaderEpochFileCache.endOffsetFor (see broker/logapi.py)."""
        e = self.entries
        if epoch < 0 or not e:
            return -1, -1
        if epoch == e[-1][0]:
            return epoch, log_end_offset
        floor = None
        for ep, start in e:
            if ep > epoch:
                return (epoch, start) if floor is None else (floor, start)
            floor = ep
        return -1, -1
