"""A simulated broker disk: partition logs, the HWM checkpoint and the clean-shutdown file.

What survives a process crash: everything (the page cache survives). What survives a
power loss: only what was flushed (`InMemoryPartitionLog.lose_unsynced`); the HWM
checkpoint and the clean-shutdown file are written with fsync, so they survive as written.
What survives a wipe (the disk lost): nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from broker.core.messages import TopicPartition
from broker.sim.memlog import InMemoryPartitionLog


@dataclass
class SimDisk:
    logs: dict[TopicPartition, InMemoryPartitionLog] = field(default_factory=dict)
    hwm_checkpoint: dict[TopicPartition, int] = field(default_factory=dict)
    clean_shutdown_epoch: int = -1

    def log(self, tp: TopicPartition) -> InMemoryPartitionLog:
        """The log of `tp`, created empty if absent (the broker's log factory)."""
        if tp not in self.logs:
            self.logs[tp] = InMemoryPartitionLog()
        return self.logs[tp]

    def flush_all(self) -> None:
        for log in self.logs.values():
            log.flush()

    def power_loss(self) -> None:
        for log in self.logs.values():
            log.lose_unsynced()

    def wipe(self) -> None:
        """The disk is lost (replaced by an empty one): logs, epoch caches, the HWM
        checkpoint and the clean-shutdown file are gone."""
        for log in self.logs.values():
            log.truncate_to(0)
            log.flush()
        self.hwm_checkpoint = {}
        self.clean_shutdown_epoch = -1

    def take_clean_shutdown_epoch(self) -> int:
        """Read and delete the clean-shutdown file (Kafka deletes it at startup)."""
        e, self.clean_shutdown_epoch = self.clean_shutdown_epoch, -1
        return e
