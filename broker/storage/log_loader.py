"""Opening a partition's log directory (Kafka's LogLoader): what is on disk becomes the
segments of a `SegmentedLog` (log.py), with a report of what opening it did.

First the directory is tidied: a compaction swap left half-done is finished
(`finish_swap`), leftover temporary files are removed, index files without a segment are
deleted. Then the segments are opened in offset order. After a clean shutdown only their
indexes are loaded (a bad one is rebuilt from the log) and each segment's tail is checked;
after an unclean one (`recover`) every segment from the one holding the recovery point
onwards is scanned and validated (CRC, magic, framing, offsets following each other). A
torn or corrupt tail is cut at the last good batch and later segments are deleted; so is
a segment whose base offset does not follow its predecessor. The report
(`PartitionRecovery`) says exactly what was cut. The epoch cache is the checkpoint cut at
the log end plus any newer epoch a scan found, rebuilt from the log if the checkpoint is
unreadable.
"""

from __future__ import annotations

import os
import re
from bisect import bisect_right
from dataclasses import dataclass, field

from broker.core.messages import TopicPartition
from broker.storage.checkpoints import LEADER_EPOCH_CHECKPOINT, CheckpointError, read_epochs, write_epochs
from broker.storage.config import StorageConfig
from broker.storage.epoch_cache import EpochCache
from broker.storage.fileio import fsync_dir, fsync_path
from broker.storage.segment import Segment, segment_name

SEGMENT_FILE = re.compile(r"^(\d{20})\.log$")
SWAP_FILE = re.compile(r"^(\d{20})\.(\d{20})\.swap$")  # a cleaned group: replaces the segments based in [first, second)
INDEX_FILE = re.compile(r"^(\d{20})\.(index|timeindex)$")
STRAY_SUFFIXES = (".tmp", ".deleted", ".cleaned", ".swap")


@dataclass
class Truncation:
    """A cut made by recovery (or by the tail check when opening a segment)."""

    segment: str  # the .log file cut
    position: int  # byte position of the cut (start of the first bad batch)
    bytes_dropped: int  # bytes removed from that file
    next_offset: int  # offsets from here on are gone (the new log end offset)
    reason: str  # why the batch at `position` was rejected
    claimed_offsets: tuple[int, int] | None  # what the bad batch's header claimed, if readable
    deleted_segments: list[str] = field(default_factory=list)

    def describe(self, tp: TopicPartition) -> str:
        claimed = self.claimed_offsets
        claim = f"; the bad batch's header claims offsets {claimed[0]}..{claimed[1]}" if claimed else ""
        later = f"; deleted later segments {', '.join(os.path.basename(s) for s in self.deleted_segments)}" if self.deleted_segments else ""
        return (
            f"{tp.topic}-{tp.partition}: truncated {os.path.basename(self.segment)} at byte {self.position} "
            f"({self.bytes_dropped} bytes dropped): {self.reason}{claim}; offsets from {self.next_offset} on are gone, "
            f"log end offset now {self.next_offset}{later}"
        )


@dataclass
class PartitionRecovery:
    """What opening one partition's log did."""

    tp: TopicPartition
    scanned: bool  # True: segments were validated (unclean shutdown)
    recovery_point: int  # the checkpointed recovery point the scan started from
    scanned_segments: list[str] = field(default_factory=list)
    scanned_bytes: int = 0
    scanned_batches: int = 0
    truncations: list[Truncation] = field(default_factory=list)
    index_rebuilds: list[tuple[str, str]] = field(default_factory=list)  # (index file, why)
    notes: list[str] = field(default_factory=list)
    log_start_offset: int = 0
    log_end_offset: int = 0

    def lines(self) -> list[str]:
        name = f"{self.tp.topic}-{self.tp.partition}"
        out = []
        if self.scanned:
            out.append(
                f"{name}: recovery scanned {len(self.scanned_segments)} segment(s) from recovery point "
                f"{self.recovery_point} ({', '.join(os.path.basename(s) for s in self.scanned_segments) or 'none'}): "
                f"{self.scanned_batches} valid batches, {self.scanned_bytes} bytes; "
                f"{'nothing truncated' if not self.truncations else f'{len(self.truncations)} truncation(s)'}; "
                f"log end offset {self.log_end_offset}"
            )
        out.extend(t.describe(self.tp) for t in self.truncations)
        out.extend(f"{name}: index {os.path.basename(p)} rebuilt from the log: {why}" for p, why in self.index_rebuilds)
        out.extend(f"{name}: {n}" for n in self.notes)
        return out


@dataclass
class LoadedLog:
    """What `load` found: the segments (oldest first; only the last one's files open),
    the log start offset, the recovery point, whether the directory needs an fsync, and
    the epoch cache."""

    segments: list[Segment]
    log_start_offset: int
    recovery_point: int
    dir_dirty: bool
    epochs: EpochCache


def load(directory: str, config: StorageConfig, report: PartitionRecovery, recovery_point: int, log_start_offset: int,
         recover: bool) -> LoadedLog:
    """Load the log in `directory` (see the module docstring), noting in `report` what was done."""
    c = config
    bases = _tidy(directory, report)
    epoch_path = os.path.join(directory, LEADER_EPOCH_CHECKPOINT)
    if not bases:
        seg = Segment.create(directory, max(log_start_offset, 0), c.index_interval_bytes, c.index_max_bytes)
        epochs = load_epochs(epoch_path, [seg], seg.base, report, [])
        return LoadedLog([seg], seg.base, seg.base, True, epochs)
    first_scanned = 0
    if recover:
        first_scanned = max(bisect_right(bases, recovery_point) - 1, 0)
    scanned_epochs: list[tuple[int, int]] = []  # (epoch, base offset) of scanned batches, in order
    segs, stop_at = _open_segments(directory, c, bases, first_scanned, recover, report, scanned_epochs)
    dir_dirty = False
    if stop_at is not None and stop_at < len(bases):
        _delete_segments(directory, c, bases[stop_at:], report.truncations[-1])
        dir_dirty = True
    rebuilt = {p for p, _ in report.index_rebuilds} | {s.index.path for s in segs[first_scanned:]} if recover else {
        p for p, _ in report.index_rebuilds}
    for s in segs[:-1]:
        if s.index.path in rebuilt:
            s.seal()  # a sealed segment's rebuilt indexes go to disk now (the active one's on roll/close)
        s.close_fd()
    leo = segs[-1].next_offset
    start = min(max(log_start_offset, segs[0].base), leo)
    epochs = load_epochs(epoch_path, segs, start, report, scanned_epochs,
                         scanned_from=segs[first_scanned].base if recover and first_scanned < len(segs) else None)
    if recover:
        # what the scan validated is made durable, so the recovery point can move to the LEO
        for s in segs[first_scanned:]:
            fsync_path(s.log_path)
        fsync_dir(directory)
        return LoadedLog(segs, start, leo, False, epochs)
    rp = min(recovery_point, leo) if recovery_point >= segs[0].base else segs[0].base
    return LoadedLog(segs, start, rp, dir_dirty, epochs)


def _tidy(directory: str, report: PartitionRecovery) -> list[int]:
    """Finish interrupted swaps, remove leftover files and the index files of missing
    segments; returns the base offsets of the segments, in order."""
    bases = []
    index_bases = set()
    for name in sorted(os.listdir(directory)):
        if m := SWAP_FILE.match(name):
            finish_swap(directory, int(m.group(1)), int(m.group(2)))
            report.notes.append(f"finished an interrupted compaction swap ({name})")
    for name in os.listdir(directory):
        path = os.path.join(directory, name)
        if name.endswith(STRAY_SUFFIXES):
            os.unlink(path)
            report.notes.append(f"removed leftover file {name}")
        elif m := SEGMENT_FILE.match(name):
            bases.append(int(m.group(1)))
        elif m := INDEX_FILE.match(name):
            index_bases.add(int(m.group(1)))
    for b in sorted(index_bases - set(bases)):
        for ext in (".index", ".timeindex"):
            try:
                os.unlink(os.path.join(directory, segment_name(b) + ext))
            except FileNotFoundError:
                pass
        report.notes.append(f"removed index files of missing segment {segment_name(b)}.log")
    bases.sort()
    return bases


def _open_segments(directory: str, c: StorageConfig, bases: list[int], first_scanned: int, recover: bool,
                   report: PartitionRecovery, scanned_epochs: list[tuple[int, int]]) -> tuple[list[Segment], int | None]:
    """Open the segments in order, scanning those from `first_scanned` on if `recover`;
    stop at the first that does not follow its predecessor (left out) or has a bad tail
    (cut, kept). Returns the segments kept and the index into `bases` of the first one to
    delete (None: none)."""
    segs: list[Segment] = []
    for i, base in enumerate(bases):
        seg = Segment.existing(directory, base, c.index_interval_bytes, c.index_max_bytes)
        if segs and base != segs[-1].next_offset:
            prev = segs[-1]
            report.truncations.append(
                Truncation(
                    seg.log_path, 0, seg.size, prev.next_offset,
                    f"segment base offset {base} does not follow the previous segment, whose next offset is {prev.next_offset}",
                    None,
                )
            )
            return segs, i
        if i >= first_scanned and recover:
            res = seg.rebuild(validate=True, epochs=scanned_epochs)
            report.scanned_segments.append(seg.log_path)
            report.scanned_batches += res.batches
            report.scanned_bytes += res.valid_end
        else:
            res, why = seg.load()
            if why is not None:
                report.index_rebuilds.append((seg.index.path, why))
        segs.append(seg)
        if res.error is not None:
            dropped_bytes = seg.size - res.valid_end
            seg.truncate_to(res.valid_end, res.next_offset)
            h = res.error_header
            claimed = (h.base_offset, h.last_offset) if h is not None and h.last_offset_delta >= 0 else None
            report.truncations.append(
                Truncation(seg.log_path, res.valid_end, dropped_bytes, res.next_offset, str(res.error), claimed)
            )
            return segs, i + 1
    return segs, None


def _delete_segments(directory: str, c: StorageConfig, bases: list[int], cut: Truncation) -> None:
    """Delete the segments based at `bases` (after the cut), noted in `cut`."""
    deleted = []
    for base in bases:
        victim = Segment(directory, base, c.index_interval_bytes, c.index_max_bytes)
        victim.delete()
        if victim.log_path != cut.segment:
            deleted.append(victim.log_path)
    cut.deleted_segments.extend(deleted)


def _collect_epochs(seg: Segment, out: list[tuple[int, int]]) -> None:
    for _pos, h in seg.walk(0, validate=False):
        if h.partition_leader_epoch > (out[-1][0] if out else -1):
            out.append((h.partition_leader_epoch, h.base_offset))


def load_epochs(path: str, segments: list[Segment], start: int, report: PartitionRecovery,
                scanned: list[tuple[int, int]], scanned_from: int | None = None) -> EpochCache:
    """The epoch cache: the checkpoint at `path` (written before any batch of a new epoch,
    so it holds every epoch in the data) cut at the LEO, plus any newer epoch a scan found
    (a checkpoint that lagged). Where a recovery scan read the batches (from offset
    `scanned_from` on), their epochs stand and the checkpoint's entries there go: a power
    loss can take back a truncation and the records after it while the checkpoint, written
    at once, already names the epoch that followed (an entry past the records it names
    would make a follower skip the truncation it owes). Rebuilt from the whole log if the
    checkpoint is unreadable, or missing while the log has data; written back if it changed."""
    entries: list[tuple[int, int]] | None
    try:
        entries = read_epochs(path)
    except CheckpointError as e:
        report.notes.append(f"leader-epoch-checkpoint unreadable ({e}); rebuilt from the log")
        entries = None
    leo = segments[-1].next_offset
    if entries is None and leo > start:
        scanned = []
        for seg in segments:
            _collect_epochs(seg, scanned)
    cache = EpochCache(entries or [])
    cache.truncate_from_end(leo)
    if scanned_from is not None and (bad := _contradicted(cache.entries, scanned, scanned_from)) is not None:
        report.notes.append(f"leader-epoch-checkpoint: epoch {bad[0]} from offset {bad[1]} has no records "
                            f"(the batches there are of an older epoch); cut there")
        cache.truncate_from_end(bad[1])
    for epoch, base in scanned:
        cache.assign(epoch, base)
    if cache.entries != (entries or []) or not os.path.exists(path):
        write_epochs(path, cache.entries)
    return cache


def _contradicted(entries: list[tuple[int, int]], scanned: list[tuple[int, int]], scanned_from: int
                  ) -> tuple[int, int] | None:
    """The first entry (epoch, start) at or after `scanned_from` whose start offset holds a
    batch of an older epoch (epochs never go back in a log: the entry outlived its records),
    by the scanned batches (`scanned`: each new highest epoch with its first base offset)."""
    for epoch, start in entries:
        if start < scanned_from:
            continue
        held = [e for e, base in scanned if base <= start]
        if held and epoch > held[-1]:
            return epoch, start
    return None


def finish_swap(directory: str, base: int, end: int) -> None:
    """Replace the segments based in [base, end) with the swap file of a compaction
    (idempotent: a crash anywhere in it is finished by the next open)."""
    for name in os.listdir(directory):
        m = SEGMENT_FILE.match(name) or INDEX_FILE.match(name)
        if m and base <= int(m.group(1)) < end:
            os.unlink(os.path.join(directory, name))
    os.rename(os.path.join(directory, f"{segment_name(base)}.{segment_name(end)}.swap"),
              os.path.join(directory, segment_name(base) + ".log"))
    fsync_dir(directory)
