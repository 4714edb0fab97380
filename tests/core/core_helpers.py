"""Builders shared by the core unit tests: logs with given epochs, metadata images."""

from __future__ import annotations

from broker.core.messages import TopicPartition
from broker.core.metadata import BrokerInfo, MetadataImage, PartitionRegistration
from broker.sim.batches import encode_batch
from broker.sim.memlog import InMemoryPartitionLog

TP = TopicPartition("t", 0)


def log_with(epochs: list[tuple[int, int]], tag: str = "") -> InMemoryPartitionLog:
    """A log with `count` one-record batches for each (epoch, count), in order."""
    log = InMemoryPartitionLog()
    for epoch, count in epochs:
        for _ in range(count):
            log.append_as_leader(encode_batch([f"{tag}{epoch}-{log.log_end_offset}".encode()]), epoch)
    return log


def image(brokers: dict[int, int], fenced: set[int] = frozenset(), reg: PartitionRegistration | None = None) -> MetadataImage:
    """An image with brokers {id: epoch} and optionally one partition TP."""
    img = MetadataImage()
    for b, e in brokers.items():
        img.brokers[b] = BrokerInfo(b, e, f"inc-{b}", fenced=b in fenced)
    if reg is not None:
        img.partitions[TP] = reg
    return img
