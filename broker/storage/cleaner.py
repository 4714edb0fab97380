"""Log compaction's record rules (Kafka's LogCleaner, for `cleanup.policy=compact`). Pure.

A clean covers the closed segments below the cleanable bound (never the active segment):
`latest_offsets` maps each key to the offset of its last record there; `filter_batch`
keeps a record if it is its key's latest (or has no key, or sits in a batch this broker
cannot decode), and drops a tombstone (null value) once its batch's max timestamp is
more than `delete.retention.ms` old. Kept records keep their offsets (gaps appear between
records, as in Kafka). A batch that loses records is rebuilt with its header fields, its
base and last offset and a new CRC-32C; one that loses them all stays as a bare header
(Kafka's format keeps lastOffsetDelta for this; Kafka keeps such empty batches for
producer state), and `coalesce_empty` merges a run of such headers of one leader epoch
into one, so batches still follow each other without gaps (the log's recovery,
follower-append and truncation checks stay exact, the epoch of every epoch's first
offset stays readable) while what a compacted log keeps is bounded by its live records. The file work (grouping
segments, swapping them in crash-safely) is `SegmentedLog.clean`.
"""

from __future__ import annotations

from collections.abc import Iterable

from broker.records import (
    BatchError,
    BatchHeader,
    Record,
    build_batch,
    codec_available,
    decode_records,
    empty_batch,
    parse_header,
)


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
                 delete_retention_ms: int) -> tuple[bytes, int | None]:
    """The batch as a clean leaves it (the same bytes if every record stays, else a
    rebuilt batch with the same offsets holding the records that stay, possibly none),
    and when a tombstone it keeps expires (None: it keeps none)."""
    records = batch_records(batch, h)
    if records is None:
        return batch, None
    tombstones_expire = now_ms - h.max_timestamp > delete_retention_ms
    kept = [r for r in records
            if r.key is None or (latest.get(r.key, r.offset) <= r.offset and not (r.value is None and tombstones_expire))]
    waiting = h.max_timestamp + delete_retention_ms + 1 if any(r.value is None and r.key is not None for r in kept) else None
    if len(kept) == len(records):
        return batch, waiting
    return build_batch(kept, h, keep_offsets=True), waiting


def coalesce_empty(batches: list[bytes]) -> list[bytes]:
    """Consecutive record-less batches of one partition leader epoch merged into one
    covering their offsets (no producer fields: the producer state is rebuilt from the
    active segment, which is never cleaned)."""
    out: list[bytes] = []
    run: list[BatchHeader] = []

    def close_run() -> None:
        if len(run) == 1:
            out.append(pending[0])
        elif run:
            out.append(empty_batch(run[0], run[-1].last_offset, max(h.max_timestamp for h in run)))
        run.clear()
        pending.clear()

    pending: list[bytes] = []
    for b in batches:
        h = parse_header(b)
        if h.records_count == 0 and (not run or run[-1].partition_leader_epoch == h.partition_leader_epoch):
            run.append(h)
            pending.append(b)
            continue
        close_run()
        if h.records_count == 0:
            run.append(h)
            pending.append(b)
        else:
            out.append(b)
    close_run()
    return out
