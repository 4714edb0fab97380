"""The broker's storage engine: segmented partition logs on disk, their indexes and
checkpoints, flush policies and recovery (docs/broker-storage.md)."""

from broker.storage.config import StorageConfig
from broker.storage.epoch_cache import EpochCache
from broker.storage.log import PartitionRecovery, SegmentedLog, TimestampOffset, Truncation
from broker.storage.manager import LogManager, StartupInfo
from broker.storage.segment import StorageError

__all__ = [
    "EpochCache",
    "LogManager",
    "PartitionRecovery",
    "SegmentedLog",
    "StartupInfo",
    "StorageConfig",
    "StorageError",
    "TimestampOffset",
    "Truncation",
]
