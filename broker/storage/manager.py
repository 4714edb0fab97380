"""`LogManager`: every partition log of a broker, its log dirs, checkpoints, flush policy
and recovery (Kafka's LogManager).

Per log dir: `.lock` (flock: one broker per dir), `.kafka_cleanshutdown` (the marker, with
the broker epoch), `replication-offset-checkpoint` (HWMs), `recovery-point-offset-checkpoint`,
`log-start-offset-checkpoint`, and one `<topic>-<partition>/` directory per log.

Startup reads and deletes the marker of each dir; a dir without one had an unclean
shutdown and each of its logs is recovered from its checkpointed recovery point
(SegmentedLog.open). Flush policy (seed 002 section 5):
- every write / every N messages (`log.flush.interval.messages`): the logs report each
  append to the manager, which flushes synchronously once N messages are unflushed;
- every N ms (`log.flush.interval.ms`, or `log.flush.scheduler.interval.ms`): the shell
  calls `flush_due(now)` when `next_flush_deadline()` passes;
- always, as Kafka does: a rolled segment is flushed in the background (one flusher
  thread) and the recovery point follows. With neither property set, that is all.
Topic configs (`attach`): each log runs with `StorageConfig.for_topic` of its topic's
configs (segment.bytes, retention.ms/bytes, cleanup.policy, delete.retention.ms), set when
the log is created and again by `refresh_topic_configs` whenever the metadata changes.
Every `log.retention.check.interval.ms` the manager applies retention to every log and
compacts the compacted ones below their high watermark (`SegmentedLog.clean`).
Blocking I/O: called from the shell's event loop; appends and reads stay cheap.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from broker.core.messages import TopicPartition
from broker.storage.checkpoints import (
    CLEAN_SHUTDOWN_FILE,
    LOG_START_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_CHECKPOINT,
    CheckpointError,
    read_clean_shutdown,
    read_offsets,
    remove,
    write_clean_shutdown,
    write_offsets,
)
from broker.storage.config import StorageConfig
from broker.storage.fileio import DirLock, fsync_dir
from broker.storage.log import (
    PartitionRecovery,
    SegmentedLog,
    Truncation,
    parse_partition_dir,
    partition_dir_name,
)
from broker.storage.segment import StorageError


def _monotonic_ms() -> int:
    return int(time.monotonic() * 1000)


def _wall_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class StartupInfo:
    """What `LogManager.startup` found and did."""

    clean_shutdown: bool  # every log dir had the clean-shutdown marker
    previous_broker_epoch: int  # the marker's broker epoch (-1 unless every dir had the same one)
    hw_checkpoint: dict[TopicPartition, int]
    partitions: dict[TopicPartition, PartitionRecovery] = field(default_factory=dict)
    unclean_dirs: list[str] = field(default_factory=list)  # dirs with logs but no marker
    new_dirs: list[str] = field(default_factory=list)  # dirs without a marker, logs or checkpoints
    notes: list[str] = field(default_factory=list)
    flush_policy: str = ""
    duration_ms: float = 0.0

    @property
    def truncations(self) -> list[tuple[TopicPartition, Truncation]]:
        return [(tp, t) for tp, r in self.partitions.items() for t in r.truncations]

    @property
    def scanned_segments(self) -> int:
        return sum(len(r.scanned_segments) for r in self.partitions.values())

    def summary(self) -> str:
        if self.clean_shutdown:
            how = f"clean shutdown (broker epoch {self.previous_broker_epoch}): no recovery scan"
        elif not self.unclean_dirs:
            how = f"first start (new log dirs {', '.join(self.new_dirs)})"
        else:
            how = (
                f"unclean shutdown ({', '.join(self.unclean_dirs)} had no clean-shutdown marker): "
                f"recovery scanned {self.scanned_segments} segment(s)"
            )
        cut = self.truncations
        return (
            f"log manager started {len(self.partitions)} partition(s) in {self.duration_ms:.0f} ms after a {how}; "
            f"{len(cut)} truncation(s); flush policy: {self.flush_policy}"
        )


class LogManager:
    """All partition logs of one broker (see the module docstring)."""

    def __init__(
        self,
        log_dirs: list[str],
        config: StorageConfig,
        logger: logging.Logger,
        *,
        clock: Callable[[], int] | None = None,
        wall_clock: Callable[[], int] | None = None,
    ) -> None:
        if not log_dirs:
            raise ValueError("log.dirs: at least one log directory is required")
        self.dirs = [os.path.abspath(d) for d in log_dirs]
        self.config = config
        self.logger = logger
        self._clock = clock or _monotonic_ms
        self._wall = wall_clock or _wall_ms
        self._logs: dict[TopicPartition, SegmentedLog] = {}
        self._dir_of: dict[TopicPartition, str] = {}
        self._hwms: dict[str, dict[TopicPartition, int]] = {d: {} for d in self.dirs}
        self._written: dict[tuple[str, str], dict[TopicPartition, int]] = {}  # (dir, file) -> last written
        self._unflushed: dict[TopicPartition, int] = {}
        self._dirty_since: dict[TopicPartition, int] = {}
        self._executor: ThreadPoolExecutor | None = None
        self._locks: list[DirLock] = []
        self._next_rp_checkpoint = 0
        self._next_start_checkpoint = 0
        self._next_retention = 0
        self._started = False
        self._topic_configs: Callable[[str], Mapping[str, str]] = lambda topic: {}
        self._high_watermark: Callable[[TopicPartition], int | None] = lambda tp: None

    def attach(self, topic_configs: Callable[[str], Mapping[str, str]],
               high_watermark: Callable[[TopicPartition], int | None]) -> None:
        """Where a topic's configs (the metadata image's) and a partition's high watermark
        (the replica's; None: unknown, then the checkpointed one bounds compaction) come from."""
        self._topic_configs = topic_configs
        self._high_watermark = high_watermark
        self.refresh_topic_configs()

    def config_for(self, topic: str) -> StorageConfig:
        """The storage config a log of `topic` runs with (the topic's values, else the broker's)."""
        return self.config.for_topic(self._topic_configs(topic))

    def refresh_topic_configs(self) -> None:
        """Give every log its topic's current configs (after a metadata change)."""
        for tp, log in self._logs.items():
            c = self.config_for(tp.topic)
            if c != log.config:
                log.reconfigure(c)
                self.logger.info(f"{tp.topic}-{tp.partition}: storage config now {c}")

    # ================================================================ lifecycle
    def startup(self) -> StartupInfo:
        """Lock every log directory, read its clean-shutdown marker (then removed: from now
        on a crash is an unclean shutdown) and checkpoints, and open each partition's log,
        recovering those of a directory that was not shut down cleanly (log_loader.py)."""
        t0 = time.perf_counter()
        c = self.config
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="log-flusher")
        notes: list[str] = []
        hw: dict[TopicPartition, int] = {}
        partitions: dict[TopicPartition, PartitionRecovery] = {}
        try:
            epochs, unclean, new = self._take_dirs(notes)
            for d in self.dirs:
                self._open_dir(d, d not in self._clean_dirs(epochs), hw, partitions, notes)
        except BaseException:
            for log in self._logs.values():
                log.close(write_indexes=False)
            self._logs.clear()
            if self._executor is not None:
                self._executor.shutdown(wait=True)
            self._release()
            raise
        self._started = True
        now = self._clock()
        self._next_rp_checkpoint = now + c.flush_offset_checkpoint_interval_ms
        self._next_start_checkpoint = now + c.flush_start_offset_checkpoint_interval_ms
        self._next_retention = now + c.retention_check_interval_ms
        self._write_recovery_points(force=True)
        self._write_log_starts(force=True)
        clean = not unclean and not new
        same = set(epochs)
        info = StartupInfo(
            clean_shutdown=clean,
            previous_broker_epoch=epochs[0] if clean and len(same) == 1 and epochs[0] is not None else -1,
            hw_checkpoint=hw,
            partitions=partitions,
            unclean_dirs=unclean,
            new_dirs=new,
            notes=notes,
            flush_policy=self.describe_flush_policy(),
            duration_ms=(time.perf_counter() - t0) * 1000,
        )
        for n in notes:
            self.logger.warning(n)
        (self.logger.warning if unclean or info.truncations else self.logger.info)(info.summary())
        return info

    def _take_dirs(self, notes: list[str]) -> tuple[list[int | None], list[str], list[str]]:
        """Lock the log directories and take their clean-shutdown markers: (the broker
        epoch each marker held, None if none; the directories shut down uncleanly; the new
        ones)."""
        epochs: list[int | None] = []
        unclean: list[str] = []
        new: list[str] = []
        for d in self.dirs:
            os.makedirs(d, exist_ok=True)
            self._locks.append(DirLock(d))
        for d in self.dirs:
            marker = os.path.join(d, CLEAN_SHUTDOWN_FILE)
            try:
                epoch = read_clean_shutdown(marker)
            except CheckpointError as e:
                notes.append(f"{e}: treated as an unclean shutdown")
                epoch = None
            epochs.append(epoch)
            if epoch is None:
                if any(parse_partition_dir(n) for n in os.listdir(d)) or os.path.exists(os.path.join(d, RECOVERY_POINT_CHECKPOINT)):
                    unclean.append(d)
                else:
                    new.append(d)
            if remove(marker):  # from now on, a crash is an unclean shutdown
                fsync_dir(d)
        return epochs, unclean, new

    def _open_dir(self, d: str, recover: bool, hw: dict[TopicPartition, int],
                  partitions: dict[TopicPartition, PartitionRecovery], notes: list[str]) -> None:
        """Open the partition logs of log directory `d` (each recovered if `recover`),
        finishing the deletions left unfinished; their checkpointed HWMs go to `hw`."""
        c = self.config
        hwms = self._read_checkpoint(d, REPLICATION_CHECKPOINT, notes)
        rps = self._read_checkpoint(d, RECOVERY_POINT_CHECKPOINT, notes)
        starts = self._read_checkpoint(d, LOG_START_CHECKPOINT, notes)
        for name in sorted(os.listdir(d)):
            path = os.path.join(d, name)
            if not os.path.isdir(path):
                continue
            if name.endswith("-delete"):
                shutil.rmtree(path, ignore_errors=True)
                notes.append(f"removed {path}, a deletion left unfinished")
                continue
            tp = parse_partition_dir(name)
            if tp is None:
                continue
            if tp in self._logs:
                notes.append(f"{path}: {tp.topic}-{tp.partition} is already in {self._dir_of[tp]}; ignored")
                continue
            try:
                log, report = SegmentedLog.open(
                    path, tp, c,
                    recovery_point=rps.get(tp, 0),
                    log_start_offset=starts.get(tp, 0),
                    recover=recover,
                    logger=self.logger,
                    after_append=self._after_append,
                    on_truncate=self._on_truncate,
                    background=self._submit,
                )
            except (OSError, StorageError) as e:
                raise StorageError(f"{path}: cannot open the log: {e}") from e
            self._logs[tp] = log
            self._dir_of[tp] = d
            partitions[tp] = report
            if tp in hwms:
                hw[tp] = hwms[tp]
        self._hwms[d] = {tp: v for tp, v in hwms.items() if self._dir_of.get(tp) == d}

    def shutdown(self, broker_epoch: int) -> None:
        """Clean shutdown: flush every log, write every checkpoint, then the marker with
        `broker_epoch` in every log dir. (Write the final HWMs with
        `checkpoint_high_watermarks` before.)"""
        self._check_started()
        if self._executor is not None:
            self._executor.shutdown(wait=True)
        for log in self._logs.values():
            log.flush()
            log.close(write_indexes=True, sync=True)
        self._write_recovery_points(force=True)
        self._write_log_starts(force=True)
        for d in self.dirs:
            write_clean_shutdown(os.path.join(d, CLEAN_SHUTDOWN_FILE), broker_epoch)
        self.logger.info(f"log manager shut down cleanly: {len(self._logs)} partition(s) flushed, "
                         f"marker written with broker epoch {broker_epoch}")
        self._logs.clear()
        self._release()

    def close(self) -> None:
        """Close every file and release the dirs without flushing, checkpoints or marker:
        what a killed broker leaves (the page cache survives). For tests and crashes."""
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)
        for log in self._logs.values():
            log.close(write_indexes=False)
        self._logs.clear()
        self._release()

    def _clean_dirs(self, epochs: list[int | None]) -> set[str]:
        return {d for d, e in zip(self.dirs, epochs, strict=True) if e is not None}

    def _release(self) -> None:
        for lock in self._locks:
            lock.release()
        self._locks = []
        self._started = False

    def _check_started(self) -> None:
        if not self._started:
            raise RuntimeError("LogManager.startup() has not run (or the manager is shut down)")

    # ================================================================ partitions
    def get_or_create(self, tp: TopicPartition) -> SegmentedLog:
        """The log of `tp`, created empty (in the log dir with the fewest logs) if absent:
        the replication core's `log_factory`."""
        self._check_started()
        log = self._logs.get(tp)
        if log is not None:
            return log
        counts = {d: 0 for d in self.dirs}
        for d in self._dir_of.values():
            counts[d] += 1
        d = min(self.dirs, key=lambda x: counts[x])
        log, _ = SegmentedLog.open(
            os.path.join(d, partition_dir_name(tp)), tp, self.config_for(tp.topic),
            logger=self.logger, after_append=self._after_append, on_truncate=self._on_truncate, background=self._submit,
        )
        self._logs[tp] = log
        self._dir_of[tp] = d
        self.logger.info(f"created log {tp.topic}-{tp.partition} in {d}")
        return log

    def get(self, tp: TopicPartition) -> SegmentedLog | None:
        return self._logs.get(tp)

    def partitions(self) -> list[TopicPartition]:
        return sorted(self._logs)

    def log_dir_of(self, tp: TopicPartition) -> str | None:
        return self._dir_of.get(tp)

    def delete(self, tp: TopicPartition) -> bool:
        """Delete the log of `tp` (DeleteTopics): its directory goes (renamed to
        `*-delete` first, so a crash mid-way finishes the job at startup) and so do its
        checkpoint entries. False if there was no such log."""
        self._check_started()
        log = self._logs.pop(tp, None)
        if log is None:
            return False
        d = self._dir_of.pop(tp)
        log.close(write_indexes=False)
        self._unflushed.pop(tp, None)
        self._dirty_since.pop(tp, None)
        self._hwms[d].pop(tp, None)
        doomed = f"{log.dir}.{uuid.uuid4().hex}-delete"
        os.rename(log.dir, doomed)
        fsync_dir(d)
        shutil.rmtree(doomed, ignore_errors=True)
        write_offsets(os.path.join(d, REPLICATION_CHECKPOINT), self._hwms[d])
        self._write_recovery_points(force=True, only=d)
        self._write_log_starts(force=True, only=d)
        self.logger.info(f"deleted log {tp.topic}-{tp.partition}")
        return True

    # ================================================================ flush policy
    def describe_flush_policy(self) -> str:
        return self.config.describe_flush_policy()

    def on_append(self, tp: TopicPartition, messages: int) -> None:
        """Nothing to do: every SegmentedLog this manager opens reports its appends (leader
        and follower) to the flush policy itself. Kept so the shell may call it."""

    def _flush_ms(self, tp: TopicPartition) -> int | None:
        """The time-based flush interval of `tp`'s log (its topic's `flush.ms`, else the broker's)."""
        log = self._logs.get(tp)
        return (log.config if log is not None else self.config).effective_flush_ms

    def _after_append(self, log: SegmentedLog, messages: int) -> None:
        c = log.config  # the topic's flush.messages / flush.ms, else the broker's
        tp = log.tp
        if c.flush_interval_messages is not None:
            n = self._unflushed.get(tp, 0) + messages
            if n >= c.flush_interval_messages:
                log.flush()
                self._dirty_since.pop(tp, None)
                n = 0
            self._unflushed[tp] = n
            if n == 0:
                return
        if c.effective_flush_ms is not None and tp not in self._dirty_since:
            self._dirty_since[tp] = self._clock()

    def next_flush_deadline(self) -> int | None:
        """When `flush_due` next has work (time-based flushes, periodic checkpoints,
        retention checks), on the manager's clock (ms); None before startup."""
        if not self._started:
            return None
        ds = [self._next_rp_checkpoint, self._next_start_checkpoint, self._next_retention]
        for tp, since in self._dirty_since.items():
            if (ms := self._flush_ms(tp)) is not None:
                ds.append(since + ms)
        return min(ds)

    def flush_due(self, now_ms: int) -> None:
        """Do the periodic work that is due at `now_ms`: flush logs whose oldest unflushed
        append is `log.flush.interval.ms` old, write the recovery-point and log-start
        checkpoints, apply retention and compaction."""
        if not self._started:
            return
        c = self.config
        for tp, since in list(self._dirty_since.items()):
            ms = self._flush_ms(tp)
            if ms is not None and since + ms <= now_ms:
                del self._dirty_since[tp]
                self._unflushed[tp] = 0
                log = self._logs.get(tp)
                if log is not None:
                    log.flush()
        # the next deadlines move before the writes: a write that fails (disk full) is
        # retried at the next interval, not in a loop
        if now_ms >= self._next_rp_checkpoint:
            self._next_rp_checkpoint = now_ms + c.flush_offset_checkpoint_interval_ms
            self._write_recovery_points()
        if now_ms >= self._next_start_checkpoint:
            self._next_start_checkpoint = now_ms + c.flush_start_offset_checkpoint_interval_ms
            self._write_log_starts()
        if now_ms >= self._next_retention:
            self._next_retention = now_ms + c.retention_check_interval_ms
            self.apply_retention_and_compaction()

    def apply_retention_and_compaction(self) -> None:
        """One retention pass over every log and one clean of every compacted log (below
        its high watermark). A log whose pass fails is logged and left for the next pass."""
        wall = self._wall()
        for tp, log in list(self._logs.items()):
            try:
                hw = self._high_watermark(tp)
                if hw is None:
                    hw = self._hwms.get(self._dir_of[tp], {}).get(tp, 0)
                log.apply_retention(wall, hw)
                if log.config.compact:
                    log.clean(wall, hw)
            except (OSError, StorageError) as e:
                self.logger.error(f"{tp.topic}-{tp.partition}: retention or compaction failed: {e}")

    def flush_all(self) -> None:
        for log in self._logs.values():
            log.flush()
        self._dirty_since.clear()
        self._unflushed.clear()

    def wait_background(self) -> None:
        """Block until background flushes submitted so far are done (tests, benchmarks)."""
        if self._executor is not None:
            self._executor.submit(lambda: None).result()

    def _submit(self, fn: Callable[[], None]) -> None:
        if self._executor is None:
            fn()
        else:
            self._executor.submit(fn)

    # ================================================================ checkpoints
    def checkpoint_high_watermarks(self, hwms: dict[TopicPartition, int]) -> None:
        """Write `replication-offset-checkpoint` in each log dir (atomically) with the HWMs
        of the partitions it holds; partitions not in `hwms` keep their last value."""
        self._check_started()
        for d in self.dirs:
            cur = self._hwms[d]
            new = dict(cur)
            for tp, v in hwms.items():
                if self._dir_of.get(tp) == d:
                    new[tp] = v
            if new != cur or not os.path.exists(os.path.join(d, REPLICATION_CHECKPOINT)):
                write_offsets(os.path.join(d, REPLICATION_CHECKPOINT), new)
                self._hwms[d] = new

    def _on_truncate(self, log: SegmentedLog) -> None:
        """A truncation below the checkpointed recovery point rewrites the checkpoint now
        (otherwise a crash would trust offsets the log no longer has)."""
        d = self._dir_of.get(log.tp)
        if d is None:
            return
        written = self._written.get((d, RECOVERY_POINT_CHECKPOINT), {})
        if written.get(log.tp, 0) > log.recovery_point:
            self._write_recovery_points(force=True, only=d)
        self._unflushed.pop(log.tp, None)

    def _write_recovery_points(self, force: bool = False, only: str | None = None) -> None:
        self._write_per_dir(RECOVERY_POINT_CHECKPOINT, lambda log: log.recovery_point, force, only)

    def _write_log_starts(self, force: bool = False, only: str | None = None) -> None:
        self._write_per_dir(LOG_START_CHECKPOINT, lambda log: log.log_start_offset, force, only)

    def _write_per_dir(self, name: str, value: Callable[[SegmentedLog], int], force: bool, only: str | None) -> None:
        for d in self.dirs if only is None else [only]:
            offsets = {tp: value(log) for tp, log in self._logs.items() if self._dir_of[tp] == d}
            if force or offsets != self._written.get((d, name)):
                write_offsets(os.path.join(d, name), offsets)
                self._written[(d, name)] = offsets

    def _read_checkpoint(self, d: str, name: str, notes: list[str]) -> dict[TopicPartition, int]:
        try:
            return read_offsets(os.path.join(d, name))
        except CheckpointError as e:
            notes.append(f"{e}: ignored (treated as empty)")
            return {}
