"""The simulation's view of Kafka v2 record batches: thin names over `broker/records.py`.

Only what the in-memory log and the simulated clients need: build a batch of values, and
read/patch the header fields the log uses (base offset, last offset delta, partition
leader epoch, CRC). The CRC-32C covers attributes onwards, so stamping the base offset
and the leader epoch does not change it.
"""

from __future__ import annotations

from broker import records
from broker.records import HEADER_SIZE as HEADER
from broker.records import decode_values, split_batches
from broker.records import stamped as stamp

__all__ = ["HEADER", "decode_values", "encode_batch", "header", "split_batches", "stamp"]

_parse = records._HEADER.unpack_from


def encode_batch(values: list[bytes], timestamp: int = 0, base_offset: int = 0, leader_epoch: int = -1) -> bytes:
    """One uncompressed v2 batch holding `values` (no keys, no headers)."""
    return records.encode_batch(values, timestamp=timestamp, base_offset=base_offset, leader_epoch=leader_epoch)


def header(batch: bytes) -> tuple[int, int, int, int]:
    """(base offset, last offset delta, partition leader epoch, crc)."""
    f = _parse(batch, 0)
    return f[0], f[6], f[2], f[4]
