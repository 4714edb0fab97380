"""Idempotent producers: the per-partition producer state a leader checks sequences
against (KIP-98), and the producer ids InitProducerId hands out. Pure.

A batch written by an idempotent producer carries (producer id, producer epoch, base
sequence); its last sequence is base + last offset delta. For each producer id a
partition keeps the epoch and its last five batches (sequences and offsets), as Kafka's
ProducerStateEntry does, and the leader checks an incoming batch in Kafka's order:

- the same epoch and exactly the sequences of a cached batch: a retry. It is not
  appended again; the answer is NONE with the offsets the first copy got (what Kafka's
  brokers answer since 1.0; a 0.11 broker answered DUPLICATE_SEQUENCE_NUMBER, which the
  clients also take as success);
- an epoch below the producer's: INVALID_PRODUCER_EPOCH;
- a newer epoch must start at sequence 0, the same epoch must continue at last + 1
  (wrapping at 2^31 - 1): else OUT_OF_ORDER_SEQUENCE_NUMBER (a retry older than the five
  cached batches gets this too, as in Kafka);
- a producer id the partition has no state for is accepted at any sequence (KIP-360:
  its state may have been truncated or never replicated here).

Transactional batches (KIP-98) are checked the same way. A transaction marker (a control
batch the coordinator has the leader write, broker/core/transactions.py) carries no
sequence: it is refused only for an epoch below the producer's (INVALID_PRODUCER_EPOCH),
and a marker of a newer epoch (the coordinator bumped it to fence a zombie) becomes the
producer's epoch, so later writes of the older epoch are fenced. With the safeguard
`producer-epoch-fence` off, a transactional batch of an older epoch is accepted without
checks (the zombie write of KIP-890's history).

Followers apply the same state changes without checks as they append fetched batches,
so a new leader knows the producers of its log. A truncation drops the cached batches
at or after the truncation offset and forgets a producer none of whose cached batches
remain (it then counts as unknown: any sequence is accepted).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from broker.records import BatchError, decode_records, iter_batches

CACHED_BATCHES = 5  # Kafka's ProducerStateEntry.NUM_BATCHES_TO_RETAIN
MAX_SEQUENCE = 2**31 - 1
# InitProducerId ids: broker epoch * ID_BLOCK + a counter. Broker epochs are offsets of
# RegisterBrokerRecords in the metadata log, unique in the cluster and never reused, so
# no two incarnations of any brokers hand out the same id (Kafka reserves id blocks in
# the metadata log, KIP-730; the broker epoch plays the block's part here).
ID_BLOCK = 1 << 24


@dataclass(frozen=True, slots=True)
class BatchMeta:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int


@dataclass(slots=True)
class ProducerEntry:
    epoch: int
    batches: deque[BatchMeta] = field(default_factory=lambda: deque(maxlen=CACHED_BATCHES))
    marker_offset: int = -1  # the offset of the last transaction marker of this epoch

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1


# What a batch is to transactions (`ProducerBatch.txn`).
TXN_NONE = 0  # not transactional
TXN_DATA = 1  # records of a transaction
TXN_COMMIT = 2  # a COMMIT marker (control batch)
TXN_ABORT = 3  # an ABORT marker (control batch)


@dataclass(frozen=True, slots=True)
class ProducerBatch:
    """The producer fields of one batch (producer_id < 0: not idempotent)."""

    producer_id: int
    epoch: int
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    txn: int = TXN_NONE

    @property
    def is_marker(self) -> bool:
        return self.txn in (TXN_COMMIT, TXN_ABORT)


def last_sequence(first_seq: int, last_offset_delta: int) -> int:
    seq = first_seq + last_offset_delta
    return seq - MAX_SEQUENCE - 1 if seq > MAX_SEQUENCE else seq


def producer_batches(buf: bytes | memoryview) -> list[ProducerBatch]:
    """The idempotent batches in a buffer of whole v2 batches (as stored or fetched).
    Batches without a producer id are skipped."""
    return scan(buf)[0]


def scan(buf: bytes | memoryview) -> tuple[list[ProducerBatch], int]:
    """(the idempotent batches, the offset after the last batch or -1 if none) of a
    buffer of whole v2 batches. Framing is checked (records.iter_batches), CRCs are not:
    a torn or impossible batch raises records.BatchError after the good ones before it."""
    out: list[ProducerBatch] = []
    end = -1
    for start, stop, h in iter_batches(buf, validate=False):
        if h.producer_id >= 0:
            txn = TXN_NONE
            if h.is_control:
                txn = marker_kind(buf[start:stop])
            elif h.is_transactional:
                txn = TXN_DATA
            out.append(ProducerBatch(h.producer_id, h.producer_epoch, h.base_sequence,
                                     last_sequence(h.base_sequence, h.last_offset_delta), h.base_offset, h.last_offset,
                                     txn))
        end = h.next_offset
    return out, end


def marker_kind(batch: bytes | memoryview) -> int:
    """TXN_COMMIT or TXN_ABORT for a control batch (its first record's key is
    version int16, type int16: 0 abort, 1 commit); BatchError if it is not one."""
    recs = decode_records(batch, validate=False)
    key = recs[0].key if recs else None
    if key is None or len(key) < 4:
        raise BatchError("a control batch without a control record key")
    kind = int.from_bytes(key[2:4], "big", signed=True)
    if kind not in (0, 1):
        raise BatchError(f"control record type {kind} is not a transaction marker")
    return TXN_COMMIT if kind == 1 else TXN_ABORT


class ProducerStateTable:
    """The producer state of one partition replica."""

    def __init__(self) -> None:
        self.entries: dict[int, ProducerEntry] = {}

    def check(self, producer_id: int, epoch: int, first_seq: int, last_seq: int,
              fence_old_epochs: bool = True) -> tuple[ErrorCode, BatchMeta | None]:
        """What a leader answers an idempotent batch before appending it: (NONE, None)
        to append, (NONE, the cached batch) for a retry, or the error. With
        `fence_old_epochs` False (a transactional batch with the safeguard
        producer-epoch-fence off), a batch of an older epoch is appended unchecked."""
        entry = self.entries.get(producer_id)
        if entry is None:
            return ErrorCode.none, None
        if epoch < entry.epoch and not fence_old_epochs:
            return ErrorCode.none, None
        if epoch == entry.epoch:
            for b in entry.batches:
                if b.first_seq == first_seq and b.last_seq == last_seq:
                    return ErrorCode.none, b
        if epoch < entry.epoch:
            return ErrorCode.invalid_producer_epoch, None
        if epoch > entry.epoch:
            return (ErrorCode.none, None) if first_seq == 0 else (ErrorCode.out_of_order_sequence_number, None)
        last = entry.last_seq
        if last < 0 or first_seq == last + 1 or (first_seq == 0 and last == MAX_SEQUENCE):
            return ErrorCode.none, None
        return ErrorCode.out_of_order_sequence_number, None

    def check_marker(self, producer_id: int, epoch: int) -> ErrorCode:
        """What a leader answers a transaction marker: INVALID_PRODUCER_EPOCH below the
        producer's epoch, else NONE."""
        entry = self.entries.get(producer_id)
        return ErrorCode.invalid_producer_epoch if entry is not None and epoch < entry.epoch else ErrorCode.none

    def record(self, b: ProducerBatch) -> None:
        """Apply an appended batch (leader after its checks, follower as replicated). A
        marker moves the producer to its epoch without caching a batch."""
        entry = self.entries.get(b.producer_id)
        if b.is_marker:
            if entry is None or b.epoch > entry.epoch:
                entry = self.entries[b.producer_id] = ProducerEntry(b.epoch)
            entry.marker_offset = b.last_offset
            return
        if entry is None or b.epoch != entry.epoch:
            if entry is not None and b.epoch < entry.epoch:
                return  # an older epoch's batch (a follower applies what the leader wrote; keep the newer state)
            entry = self.entries[b.producer_id] = ProducerEntry(b.epoch)
        entry.batches.append(BatchMeta(b.first_seq, b.last_seq, b.first_offset, b.last_offset))

    def truncate(self, offset: int) -> None:
        """The log was truncated to `offset`: forget what was written at or after it."""
        for pid in list(self.entries):
            entry = self.entries[pid]
            while entry.batches and entry.batches[-1].last_offset >= offset:
                entry.batches.pop()
            if entry.marker_offset >= offset:
                entry.marker_offset = -1
            if not entry.batches and entry.marker_offset < 0:
                del self.entries[pid]

    def __len__(self) -> int:
        return len(self.entries)


@dataclass(slots=True)
class ProducerIdAllocator:
    """InitProducerId for non-transactional producers: a new id (epoch 0) every time,
    as Kafka's transaction coordinator does for a null transactional id."""

    broker_epoch: int = -1
    next: int = 0

    def allocate(self, broker_epoch: int) -> int | None:
        """A producer id never handed out before in the cluster, or None when this
        incarnation has used up its block (2^24 ids) or is not registered."""
        if broker_epoch < 0:
            return None
        if broker_epoch != self.broker_epoch:
            self.broker_epoch, self.next = broker_epoch, 0
        if self.next >= ID_BLOCK:
            return None
        pid = broker_epoch * ID_BLOCK + self.next
        self.next += 1
        return pid
