"""What `cleanup.policy` does to a partition's log (log.py `SegmentedLog`): retention
(delete) and compaction (compact), and the log start offset moving up (DeleteRecords,
a follower following its leader's).

Retention deletes whole sealed segments below the log start offset and, with `delete`,
past `retention.ms` or beyond `retention.bytes`: never the active segment, nor one holding
records at or above the high watermark. Compaction (cleaner.py for the records) rewrites
groups of closed segments below the high watermark into one each: the group's cleaned
data is written to `<base>.<end>.cleaned`, fsynced and renamed to `<base>.<end>.swap`
(the commit point); then the segments based in [base, end) are deleted and the swap file
becomes `<base>.log` (log_loader.py `finish_swap`, which also finishes a swap a crash
left half-done). A cleaned batch keeps its base and last offset (records go; emptied
batches of one leader epoch become one bare header, as Kafka's format allows), so batches
and segments still follow each other exactly and recovery's checks stay strict.
"""

from __future__ import annotations

import os

from broker.core.properties import LONG_MAX
from broker.storage import cleaner
from broker.storage.fileio import fsync_dir
from broker.storage.local_log import LocalLog, partition_dir_name
from broker.storage.log_loader import finish_swap
from broker.storage.segment import Segment, StorageError, segment_name


class LogCleanup(LocalLog):
    """Retention, the log start offset and compaction of one partition's log."""

    # ---------------------------------------------------------------- retention
    def apply_retention(self, now_ms: int, upper_bound: int | None = None) -> list[str]:
        """Delete whole sealed segments below the log start offset and, with
        `cleanup.policy` delete, past `retention.ms` (by their newest record's timestamp)
        or beyond `retention.bytes`; the log start offset moves up. Never the active
        segment, nor (given the high watermark as `upper_bound`) a segment holding records
        at or above it, as Kafka's deletableSegments. Returns the deleted files."""
        c = self.config
        deleted = []
        total = self.size_in_bytes
        while len(self._segments) > 1:
            seg = self._segments[0]
            if upper_bound is not None and seg.next_offset > upper_bound:
                break
            too_old = c.delete and c.retention_ms is not None and seg.max_ts >= 0 and now_ms - seg.max_ts > c.retention_ms
            too_big = c.delete and c.retention_bytes is not None and total - seg.size >= c.retention_bytes
            if not (too_old or too_big or seg.next_offset <= self._start):
                break
            self._forget_open(seg)
            seg.delete()
            self._segments.pop(0)
            self._bases.pop(0)
            total -= seg.size
            deleted.append(seg.log_path)
        if deleted:
            self._move_start(self._segments[0].base)
            self._dir_dirty = True
            self.logger.info(f"{partition_dir_name(self.tp)}: retention deleted {len(deleted)} segment(s); "
                             f"log start offset now {self._start}")
        return deleted

    def _move_start(self, offset: int) -> None:
        """The log start offset moves up to `offset` (never down, never past the LEO)."""
        self._start = max(self._start, min(offset, self.log_end_offset))
        with self._rp_lock:
            self._rp = max(self._rp, self._start)
        if self._epochs.truncate_from_start(self._start):
            self._save_epochs()

    def maybe_increment_log_start_offset(self, offset: int) -> bool:
        """DeleteRecords on a leader, or a follower following its leader's log start
        offset: the log start moves up to `offset` (at most the LEO); segments wholly
        below it are deleted at the next retention pass. True if it moved."""
        if offset <= self._start:
            return False
        self._move_start(offset)
        self.logger.info(f"{partition_dir_name(self.tp)}: log start offset now {self._start}")
        return True

    # ---------------------------------------------------------------- compaction
    def clean(self, now_ms: int, upper_bound: int) -> int:
        """With `cleanup.policy` compact: compact the closed segments whose records all lie
        below `upper_bound` (the high watermark: never the active segment, never what a
        follower may still truncate). Returns how many groups were rewritten."""
        if not self.config.compact:
            return 0
        segs = self._cleanable(upper_bound)
        if not segs:
            return 0
        key, until = self._clean_state
        if key == [(s.base, s.size) for s in segs] and now_ms < until:
            return 0  # nothing new since the last clean, and no tombstone of it has expired
        latest = cleaner.latest_offsets(b for seg in segs for b in self._batches(seg))
        rewritten = 0
        expiry = [LONG_MAX]
        for group in self._groups(segs):
            rewritten += self._clean_group(group, latest, now_ms, expiry)
        self._clean_state = ([(s.base, s.size) for s in self._cleanable(upper_bound)], expiry[0])
        return rewritten

    def _cleanable(self, upper_bound: int) -> list[Segment]:
        """The closed segments whose records all lie below `upper_bound`."""
        n = 0
        while n < len(self._segments) - 1 and self._segments[n].next_offset <= upper_bound:
            n += 1
        return self._segments[:n]

    def _batches(self, seg: Segment):
        self._touch(seg)
        fd = seg.open_fd()
        for pos, h in seg.walk(0, validate=False):
            yield os.pread(fd, h.size, pos), h

    def _groups(self, segs: list[Segment]) -> list[list[Segment]]:
        """Consecutive segments whose sizes add up to at most `segment.bytes` (Kafka's
        groupSegmentsBySize), so cleaning merges small cleaned segments."""
        out: list[list[Segment]] = []
        for seg in segs:
            if out and sum(s.size for s in out[-1]) + seg.size <= self.config.segment_bytes and \
                    seg.next_offset - out[-1][0].base <= 2**31 - 1:
                out[-1].append(seg)
            else:
                out.append([seg])
        return out

    def _clean_group(self, group: list[Segment], latest: dict[bytes, int], now_ms: int, expiry: list[int]) -> int:
        parts: list[bytes] = []
        changed = len(group) > 1
        for seg in group:
            for batch, h in self._batches(seg):
                kept, expires = cleaner.filter_batch(batch, h, latest, now_ms, self.config.delete_retention_ms)
                changed |= kept is not batch and kept != batch
                if expires is not None:
                    expiry[0] = min(expiry[0], expires)
                parts.append(kept)
        if not changed:
            return 0
        parts = cleaner.coalesce_empty(parts)
        base, i = group[0].base, self._segments.index(group[0])
        end = self._segments[i + len(group)].base
        tmp = os.path.join(self.dir, f"{segment_name(base)}.{segment_name(end)}")
        with open(tmp + ".cleaned", "wb") as f:
            f.write(b"".join(parts))
            f.flush()
            os.fsync(f.fileno())
        os.rename(tmp + ".cleaned", tmp + ".swap")  # the commit point
        fsync_dir(self.dir)
        for seg in group:
            self._forget_open(seg)
            seg.close_fd()
        finish_swap(self.dir, base, end)
        new = Segment.existing(self.dir, base, self.config.index_interval_bytes, self.config.index_max_bytes)
        res = new.rebuild(validate=False)
        if res.error is not None:
            raise StorageError(f"{new.log_path}: cleaned segment does not read back: {res.error}")
        new.seal()
        new.close_fd()
        self._segments[i : i + len(group)] = [new]
        self._bases[i : i + len(group)] = [base]
        self.logger.info(f"{partition_dir_name(self.tp)}: compacted {len(group)} segment(s) from offset {base} into "
                         f"{new.size} bytes")
        return 1
