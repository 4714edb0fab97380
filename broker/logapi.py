"""The partition log as the replication core sees it (sans-IO contract).

Two implementations share this contract: the on-disk log of the storage engine
(`broker/storage/`, segment files, indexes, checkpoints, recovery) and an in-memory log
used by the deterministic simulation (which models a disk whose unsynced suffix is lost
on a simulated power loss). The replication core (`broker/core/`) only ever talks to a
`PartitionLog`, so the same protocol code runs in real processes and in the simulation.

Records travel as Kafka v2 record batches (bytes); `broker/records.py` parses and patches
their headers. Offsets are Kafka's: the log holds offsets [log_start_offset, LEO); LEO is
the offset the next record will get. Leader epochs follow KIP-101/KIP-279: the epoch cache
maps each epoch to the first offset written in it (the Leader Epoch Start Offset).
"""

from __future__ import annotations

from typing import Protocol


class PartitionLog(Protocol):
    """One replica's log of one topic-partition."""

    @property
    def log_start_offset(self) -> int:
        """First offset still in the log."""

    @property
    def log_end_offset(self) -> int:
        """LEO: the offset the next appended record gets."""

    @property
    def recovery_point(self) -> int:
        """Offsets below this are known to be on stable storage (fsynced)."""

    def append_as_leader(self, batches: bytes, leader_epoch: int) -> tuple[int, int]:
        """Assign offsets from LEO and stamp `leader_epoch` on each batch (fixing CRCs),
        append, and return (first offset, last offset). Records the epoch's start offset
        in the epoch cache if `leader_epoch` is new. Raises ValueError on a bad batch
        (`records.BatchError`, whose `error_code` is the Kafka error to answer), and a
        STORAGE_ERRORS exception when the storage fails."""

    def append_as_follower(self, batches: bytes) -> int:
        """Append batches fetched from the leader as they are (offsets and epochs already
        assigned; the first must start at LEO); update the epoch cache from their epochs.
        Returns the new LEO."""

    def read(self, offset: int, max_bytes: int, upper_bound: int | None = None) -> bytes:
        """Whole batches starting with the one containing `offset`, at most `max_bytes`
        (but at least one batch if any), not past `upper_bound` (e.g. the HWM for
        consumers). Empty if offset == LEO. Raises OffsetOutOfRange if offset is outside
        [log_start_offset, LEO]."""

    def truncate_to(self, offset: int) -> None:
        """Drop every record at or after `offset` (no-op if offset >= LEO) and every epoch
        cache entry starting at or after it."""

    def flush(self) -> None:
        """Make everything appended so far durable (fsync); advances the recovery point."""

    def maybe_increment_log_start_offset(self, offset: int) -> bool:
        """Move the log start offset up to `offset` (at most the LEO; never down): DeleteRecords
        on a leader, a follower following its leader's. Reads below it are then out of range.
        True if it moved."""

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Drop every record and the epoch cache; the log restarts empty at `offset` (a
        follower whose LEO is below its leader's log start offset)."""

    # ---- leader epoch cache (KIP-101 / KIP-279) ----
    def latest_epoch(self) -> int:
        """The epoch of the last record in the log, or -1 if the cache is empty."""

    def epoch_entries(self) -> list[tuple[int, int]]:
        """The epoch cache: (epoch, start offset) pairs, ascending."""

    def assign_epoch_start(self, epoch: int, start_offset: int) -> None:
        """Record that `epoch` starts at `start_offset` (a new leader does this with its
        LEO on becoming leader, so followers holding later epochs can truncate)."""

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """Kafka's LeaderEpochFileCache.endOffsetFor, exactly:
        - `epoch` == -1 (undefined): (-1, -1);
        - `epoch` == the latest cached epoch: (epoch, LEO);
        - no cached epoch is greater than `epoch`: (-1, -1);
        - no cached epoch is <= `epoch`: (epoch, start offset of the first cached epoch);
        - else: (largest cached epoch <= `epoch`, start offset of the next cached epoch)."""


class OffsetOutOfRange(Exception):
    """A read or fetch outside [log_start_offset, LEO]."""


class LogStorageError(Exception):
    """The log's storage failed: an I/O error, or a file that changed under the broker
    (Kafka's KafkaStorageException). The core answers KAFKA_STORAGE_ERROR for the
    partition and reports it (`messages.LogFailure`); it never lets it escape a request."""


# What the core treats as a storage failure of a log call (the on-disk log raises
# LogStorageError subclasses; a raw OSError can escape checkpoint writes and file creation).
STORAGE_ERRORS: tuple[type[BaseException], ...] = (LogStorageError, OSError)
