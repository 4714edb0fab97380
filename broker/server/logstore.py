"""Opening the storage engine (broker/storage, docs/broker-storage.md) for the shell.

The core's `log_factory` is `LogManager.get_or_create`; the logs report their appends
(leader and follower) to the flush policy themselves, so the shell only calls
`flush_due` when `next_flush_deadline` passes, `checkpoint_high_watermarks` for the
core's `CheckpointHighWatermarks`, `delete` for `DeletePartitionLog` and `shutdown`
with the broker epoch on a clean shutdown.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from broker.storage import LogManager, StorageConfig


def open_store(log_dirs: list[str], storage_props: dict[str, str], logger: logging.Logger,
               clock: Callable[[], int]) -> LogManager:
    """The LogManager for `log.dirs` with the `log.*` properties (ValueError names a bad one)."""
    return LogManager(log_dirs, StorageConfig.from_properties(storage_props), logger, clock=clock)
