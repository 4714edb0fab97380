"""What a leader does to a producer's batch before appending it, per the topic's
configs (Kafka's LogValidator, for the configs this broker honours). Pure.

- `max.message.bytes`: a larger batch, before or after recompression, is MESSAGE_TOO_LARGE;
- `segment.bytes`: a batch larger than a segment is RECORD_LIST_TOO_LARGE (Kafka's
  RecordBatchTooLargeException);
- `cleanup.policy` with `compact`: a record without a key is INVALID_RECORD ("compacted
  topic cannot accept message without key");
- `compression.type`: `producer` keeps the producer's codec; a codec name (or
  `uncompressed`) rebuilds the batch with it when the producer used another;
- `message.timestamp.type=LogAppendTime`: the batch's max timestamp becomes the append
  time and its timestamp-type attribute is set (records untouched unless recompressed).

A rebuilt or restamped batch gets a correct CRC-32C. Records are decoded only when a
rule needs them (a compacted topic, or a codec change); a batch in a codec this broker
cannot decode (snappy, lz4) is then refused with UNSUPPORTED_COMPRESSION_TYPE.
"""

from __future__ import annotations

from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from broker.records import (
    COMPRESSION_NAMES,
    BatchError,
    build_batch,
    codec_available,
    decode_records,
    iter_batches,
    stamp_log_append_time,
)

# compression.type's values: `producer`, or the codec (Kafka's BrokerCompressionType)
COMPRESSION_TYPES = ("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd")
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")


@dataclass(frozen=True, slots=True)
class AppendPolicy:
    """The topic configs the leader applies to a produced batch."""

    max_message_bytes: int = 1048588
    segment_bytes: int = 1 << 30
    compact: bool = False
    compression: str = "producer"
    log_append_time: bool = False


def target_codec(compression: str) -> int | None:
    """The codec number of `compression.type`; None for `producer`."""
    if compression == "producer":
        return None
    return COMPRESSION_NAMES["none" if compression == "uncompressed" else compression]


def conform(batches: bytes, policy: AppendPolicy, now_ms: int) -> tuple[bytes, int]:
    """The batches as the leader appends them, and the log append time the Produce
    response carries (-1 for CreateTime). Raises BatchError with the Kafka error code.
    The batches were already checked by `records.validate_for_append`."""
    if len(batches) > policy.segment_bytes:
        raise BatchError(f"batch of {len(batches)} bytes exceeds the topic's segment.bytes ({policy.segment_bytes})",
                         ErrorCode.record_list_too_large)
    want = target_codec(policy.compression)
    if want is None and not policy.compact and not policy.log_append_time:  # the common case: no per-batch work
        for pos, end, _h in iter_batches(batches, validate=False):
            if end - pos > policy.max_message_bytes:
                raise _too_large(end - pos, policy)
        return batches, -1
    out: list[bytes] = []
    append_time = now_ms if policy.log_append_time else -1
    for pos, end, h in iter_batches(batches, validate=False):
        batch = batches[pos:end]
        recompress = want is not None and want != h.compression
        if len(batch) > policy.max_message_bytes:
            raise _too_large(len(batch), policy)
        if policy.compact or recompress:
            for codec in (h.compression, want if recompress else None):
                if codec is not None and not codec_available(codec):
                    raise BatchError(f"compression codec {codec} is not available on this broker",
                                     ErrorCode.unsupported_compression_type, pos)
            records = decode_records(batch, validate=False)
            if policy.compact and any(r.key is None for r in records):
                raise BatchError("compacted topic cannot accept message without key", ErrorCode.invalid_record, pos)
            if recompress:
                batch = build_batch(records, h, codec=want, log_append_time=append_time if append_time >= 0 else None)
                if len(batch) > policy.max_message_bytes:
                    raise _too_large(len(batch), policy)
                out.append(batch)
                continue
        out.append(stamp_log_append_time(batch, append_time) if append_time >= 0 else batch)
    return (out[0] if len(out) == 1 else b"".join(out)), append_time


def _too_large(size: int, policy: AppendPolicy) -> BatchError:
    return BatchError(f"batch of {size} bytes exceeds the topic's max.message.bytes ({policy.max_message_bytes})",
                      ErrorCode.message_too_large)
