"""`SegmentedLog`: one partition's on-disk log, a `broker.logapi.PartitionLog`.

A directory `<topic>-<partition>/` of segments (segment.py) plus `leader-epoch-checkpoint`.
Appends go to the last (active) segment, rolled when an append would take it past
`log.segment.bytes` (or fill an index); the rolled segment is then flushed in the
background (Kafka's default flush-on-roll) and the recovery point advances to the new
segment's base offset once it is durable. `flush()` makes everything durable at once
(local_log.py: appending, reading, truncating, flushing).

Opening a log (`SegmentedLog.open`) loads its segments; after an unclean shutdown every
segment from the one holding the recovery point onwards is scanned and validated (CRC,
magic, framing, offsets following each other), a torn or corrupt tail is cut at the last
good batch, later segments are deleted, and the report says exactly what was cut
(log_loader.py).

Compaction (`clean`, cleaner.py) rewrites groups of closed segments into one each: the
group's cleaned data is written to `<base>.<end>.cleaned`, fsynced and renamed to
`<base>.<end>.swap` (the commit point); then the segments based in [base, end) are
deleted and the swap file becomes `<base>.log`. Opening a log finishes a swap left
half-done and deletes a `.cleaned` file. A cleaned batch keeps its base and last offset
(records go; emptied batches of one leader epoch become one bare header, as Kafka's
format allows), so batches and segments still follow each other exactly and recovery's
checks stay strict (log_cleanup.py, with retention).

Threading: every method is called from one thread (the broker's event loop); only the
background roll flush runs elsewhere, touching files by name and the recovery point
under a lock.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable

from broker.core.messages import TopicPartition
from broker.storage.config import StorageConfig
from broker.storage.fileio import fsync_dir
from broker.storage.local_log import MAX_OPEN_SEALED, TimestampOffset, parse_partition_dir, partition_dir_name
from broker.storage.log_cleanup import LogCleanup
from broker.storage.log_loader import PartitionRecovery, Truncation, load

__all__ = ["MAX_OPEN_SEALED", "PartitionRecovery", "SegmentedLog", "TimestampOffset", "Truncation", "parse_partition_dir",
           "partition_dir_name"]


class SegmentedLog(LogCleanup):
    """One replica's log of one topic-partition on disk (see the module docstring)."""

    @classmethod
    def open(
        cls,
        directory: str,
        tp: TopicPartition,
        config: StorageConfig,
        *,
        recovery_point: int = 0,
        log_start_offset: int = 0,
        recover: bool = False,
        logger: logging.Logger | None = None,
        after_append: Callable[[SegmentedLog, int], None] | None = None,
        on_truncate: Callable[[SegmentedLog], None] | None = None,
        background: Callable[[Callable[[], None]], None] | None = None,
    ) -> tuple[SegmentedLog, PartitionRecovery]:
        """Open (or create) the log in `directory`. With `recover` (an unclean shutdown),
        validate every segment from the one holding `recovery_point` on and cut a bad tail;
        otherwise only load indexes (rebuilding bad ones) and check each segment's tail."""
        log = cls(directory, tp, config, logger=logger, after_append=after_append, on_truncate=on_truncate, background=background)
        report = PartitionRecovery(tp, recover, recovery_point)
        created = not os.path.isdir(directory)
        os.makedirs(directory, exist_ok=True)
        if created:
            fsync_dir(os.path.dirname(os.path.abspath(directory)))
        loaded = load(directory, config, report, recovery_point, log_start_offset, recover)
        log._segments, log._bases = loaded.segments, [s.base for s in loaded.segments]
        log._start, log._rp, log._dir_dirty, log._epochs = (loaded.log_start_offset, loaded.recovery_point,
                                                            loaded.dir_dirty, loaded.epochs)
        report.log_start_offset = log._start
        report.log_end_offset = log.log_end_offset
        for line in report.lines():
            (log.logger.warning if report.truncations or report.index_rebuilds else log.logger.info)(line)
        return log, report
