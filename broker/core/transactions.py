"""Transactions on the partition side (KIP-98): transaction markers, the ongoing
transactions of one partition, its last stable offset and its aborted transactions.
Pure.

A transactional producer's batches carry the transactional attribute bit; the
transaction ends on each partition with a marker the coordinator has the leader write: a
control batch (attributes: transactional + control) of the producer's id and epoch
holding one control record, key = version int16 (0) + type int16 (0 ABORT, 1 COMMIT),
value = version int16 (0) + coordinator epoch int32.

`TxnIndex` follows one partition's log in offset order (`apply` for every producer
batch, as appended by the leader, replicated to a follower, or read back at startup):

- a producer's transaction is ongoing from its first transactional batch to its marker;
- the last stable offset (LSO) is the first offset of the oldest ongoing transaction, or
  the high watermark when none is (never above the HW): read_committed consumers read
  below it only;
- an ABORT marker records (producer id, first offset, marker offset) in the aborted list,
  which a read_committed fetch returns for the range it reads, so the consumer drops
  those producers' batches from their first offset (Kafka's AbortedTransaction).

A truncation may remove markers (reviving a transaction): the index is rebuilt from the
log then (`PartitionReplica.load_producer_state`).
"""

from __future__ import annotations

import struct
from bisect import bisect_left
from dataclasses import dataclass, field

import crc32c

from broker.core.producers import TXN_ABORT, TXN_DATA, ProducerBatch
from broker.records import encode_batch

_CONTROL_ATTRIBUTES = 0x30  # transactional + control
_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")


def marker_batch(producer_id: int, epoch: int, commit: bool, coordinator_epoch: int, timestamp: int) -> bytes:
    """A control batch holding one COMMIT or ABORT marker, as a leader appends it."""
    raw = bytearray(encode_batch([_VALUE.pack(0, coordinator_epoch)], [_KEY.pack(0, 1 if commit else 0)], timestamp,
                                 producer_id=producer_id, producer_epoch=epoch, base_sequence=-1))
    # attributes (int16 at byte 21) get the transactional and control bits; the CRC-32C
    # (at byte 17) covers the attributes onwards, so it is computed again.
    struct.pack_into(">h", raw, 21, _CONTROL_ATTRIBUTES)
    struct.pack_into(">I", raw, 17, crc32c.crc32c(bytes(raw[21:])))
    return bytes(raw)


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int  # the ABORT marker's offset


@dataclass(slots=True)
class TxnIndex:
    """The transactions of one partition: see the module docstring."""

    ongoing: dict[int, int] = field(default_factory=dict)  # producer id -> first offset
    aborted: list[AbortedTxn] = field(default_factory=list)  # by marker offset
    seen: bool = False  # a transactional batch was ever applied (a truncation must rebuild)

    def apply(self, b: ProducerBatch) -> None:
        """A producer batch appended at [b.first_offset, b.last_offset]."""
        if b.txn == TXN_DATA:
            self.seen = True
            self.ongoing.setdefault(b.producer_id, b.first_offset)
        elif b.is_marker:
            self.seen = True
            first = self.ongoing.pop(b.producer_id, None)
            if b.txn == TXN_ABORT and first is not None:
                self.aborted.append(AbortedTxn(b.producer_id, first, b.last_offset))

    def first_unstable(self) -> int | None:
        """The first offset of the oldest ongoing transaction (None if none is)."""
        return min(self.ongoing.values()) if self.ongoing else None

    def last_stable_offset(self, high_watermark: int) -> int:
        first = self.first_unstable()
        return high_watermark if first is None else min(first, high_watermark)

    def aborted_between(self, start: int, end: int) -> list[AbortedTxn]:
        """The aborted transactions that have records in [start, end): marker at or after
        `start`, first offset before `end`."""
        i = bisect_left(self.aborted, start, key=lambda a: a.last_offset)
        return [a for a in self.aborted[i:] if a.first_offset < end]

    def forget_before(self, log_start: int) -> None:
        """The log starts at `log_start` now (retention, DeleteRecords, a follower starting
        afresh at its leader's log start): aborted transactions wholly before it go, as Kafka
        drops a deleted segment's aborted-transaction index. No fetch reads below the log
        start, so the answers of `aborted_between` do not change; the list stops growing."""
        if self.aborted and self.aborted[0].last_offset < log_start:
            self.aborted = self.aborted[bisect_left(self.aborted, log_start, key=lambda a: a.last_offset):]
