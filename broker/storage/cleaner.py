"""Log compaction's record rules (Kafka's LogCleaner, for `cleanup.policy=compact`). Pure.

A clean covers the closed segments below the cleanable bound (never the active segment):
`latest_offsets` maps each key to the offset of its last record there; `filter_batch`
keeps a record if it is its key's latest (or has no key, or sits in a batch this broker
cannot decode), and drops a tombstone (null value) once its batch's max timestamp is
more than `delete.retention.ms` old. Kept records keep their offsets (gaps appear between
records, as in Kafka). A batch that loses records is rebuilt with its header fields, its
base and last offset and a new CRC-32C; one that loses them all stays as a bare header
(Kafka's format keeps lastOffsetDelta for this; Kafka keeps such empty batches for
producer state), so batches still follow each other without gaps and the log's
recovery, follower-append and truncation checks stay exact. The file work (grouping
segments, swapping them in crash-safely) is `SegmentedLog.clean`.
"""

from __future__ import annotations

from collections.abc import Iterable

from broker.records import BatchError, BatchHeader, Record, build_batch, codec_available, decode_records


def batch_records(batch: bytes, h: BatchHeader) -> list[Record] | None:
    """The records of a batch, None if they cannot be decoded here (codec, control batch)."""
    if h.is_control or not codec_available(h.compression):
        return None
    try:
        return decode_records(batch, validate=False)
    except BatchError:
        return None


def latest_offsets(batches: Iterable[tuple[bytes, BatchHeader]]) -> dict[bytes, int]:
    """Key -> offset of its last record, over `batches` in offset order."""
    latest: dict[bytes, int] = {}
    for batch, h in batches:
        for r in batch_records(batch, h) or ():
            if r.key is not None:
                latest[r.key] = r.offset
    return latest


def filter_batch(batch: bytes, h: BatchHeader, latest: dict[bytes, int], now_ms: int,
                 delete_retention_ms: int) -> bytes:
    """The batch as a clean leaves it: the same bytes if every record stays, else a
    rebuilt batch (same offsets) holding the records that stay, possibly none."""
    records = batch_records(batch, h)
    if records is None:
        return batch
    tombstones_expire = now_ms - h.max_timestamp > delete_retention_ms
    kept = [r for r in records
            if r.key is None or (latest.get(r.key, r.offset) <= r.offset and not (r.value is None and tombstones_expire))]
    if len(kept) == len(records):
        return batch
    return build_batch(kept, h, keep_offsets=True)
