"""Kafka v2 record batches: parse, validate, stamp, build and decode (pure, no I/O).

A batch on the wire and on disk (Kafka's DefaultRecordBatch, magic 2), big-endian:

    offset  size  field
         0     8  base offset              <- stamped by the leader on append
         8     4  batch length             (bytes after this field: total size - 12)
        12     4  partition leader epoch   <- stamped by the leader on append
        16     1  magic (2)
        17     4  CRC-32C of bytes 21..end (attributes onwards)
        21     2  attributes (bits 0-2 compression, 3 timestamp type, 4 transactional, 5 control)
        23     4  last offset delta
        27     8  base timestamp
        35     8  max timestamp
        43     8  producer id
        51     2  producer epoch
        53     4  base sequence
        57     4  records count
        61        records (varint-framed, possibly compressed)

The CRC covers attributes onwards, so stamping the base offset and the partition leader
epoch (what a leader does on append) needs no CRC change and no pass over the records;
only LogAppendTime (rewriting max timestamp) would, and this broker keeps CreateTime.

The hot path is per batch, never per record: `iter_batches` reads one header and
computes one CRC-32C (hardware, `crc32c` package) per batch; `decode_records` and
`encode_batch` walk records and are for tests, tools and ListOffsets by timestamp.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import crc32c
from kio.schema.errors import ErrorCode

try:  # zstd (de)compression for recompression and compaction; optional
    import zstandard
except ImportError:  # pragma: no cover
    zstandard = None  # type: ignore[assignment]  # optional: every use checks for None first

MAGIC = 2
HEADER_SIZE = 61  # bytes up to and including the records count
LOG_OVERHEAD = 12  # base offset + batch length: what the length field does not count
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD  # smallest legal value of the length field
CRC_START = 21  # first byte the CRC covers (attributes)

_HEADER = struct.Struct(">qiibIhiqqqhii")
_PREFIX = struct.Struct(">qii")  # base offset, batch length, partition leader epoch
_BASE_LEN = struct.Struct(">qi")
_I32 = struct.Struct(">i")

COMPRESSION_NONE, COMPRESSION_GZIP, COMPRESSION_SNAPPY, COMPRESSION_LZ4, COMPRESSION_ZSTD = range(5)
COMPRESSION_NAMES = {None: 0, "none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
_COMPRESSION_MASK = 0x07
_TIMESTAMP_TYPE_BIT = 0x08
_TRANSACTIONAL_BIT = 0x10
_CONTROL_BIT = 0x20


class BatchHeader(NamedTuple):
    """The 61-byte header of one v2 record batch, field for field."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def size(self) -> int:
        """Bytes of the whole batch."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def compression(self) -> int:
        return self.attributes & _COMPRESSION_MASK

    @property
    def is_log_append_time(self) -> bool:
        return bool(self.attributes & _TIMESTAMP_TYPE_BIT)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & _TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & _CONTROL_BIT)


class BatchError(ValueError):
    """A malformed, corrupt or unacceptable batch. `error_code` is the Kafka error code a
    broker answers with; `position` the byte where the bad batch starts in the buffer."""

    def __init__(self, message: str, error_code: ErrorCode = ErrorCode.corrupt_message, position: int = 0):
        super().__init__(message)
        self.error_code = error_code
        self.position = position


@dataclass(frozen=True, slots=True)
class Record:
    """One decoded record (absolute offset and timestamp)."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()


def parse_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """The header of the batch at `pos` (no validation; needs HEADER_SIZE bytes there)."""
    return BatchHeader._make(_HEADER.unpack_from(buf, pos))


def _check_frame(buf, pos: int, end_of_data: int) -> tuple[int, int]:
    """(batch length, end) of the batch at `pos`; BatchError if it is torn or its length
    field is impossible. Needs only the first 12 bytes."""
    left = end_of_data - pos
    if left < HEADER_SIZE:
        raise BatchError(f"truncated batch header at byte {pos} ({left} of {HEADER_SIZE} bytes)", position=pos)
    length = _I32.unpack_from(buf, pos + 8)[0]
    if length < MIN_BATCH_LENGTH:
        raise BatchError(f"bad batch length {length} at byte {pos} (minimum {MIN_BATCH_LENGTH})", position=pos)
    end = pos + LOG_OVERHEAD + length
    if end > end_of_data:
        raise BatchError(
            f"truncated batch at byte {pos}: length field says {length + LOG_OVERHEAD} bytes, {left} left",
            position=pos,
        )
    return length, end


def check_batch(buf, start: int, end: int, h: BatchHeader, position: int | None = None) -> None:
    """Magic, CRC-32C and offset fields of the framed batch buf[start:end]. Errors name
    `position` (default `start`): the batch's byte position in whatever holds it."""
    at = start if position is None else position
    if h.magic != MAGIC:
        code = ErrorCode.unsupported_for_message_format if 0 <= h.magic < MAGIC else ErrorCode.corrupt_message
        raise BatchError(f"batch at byte {at} has magic {h.magic}, only magic 2 is supported", code, at)
    view = buf if isinstance(buf, memoryview) else memoryview(buf)
    crc = crc32c.crc32c(view[start + CRC_START : end])
    if crc != h.crc:
        raise BatchError(f"CRC-32C mismatch in batch at byte {at}: stored {h.crc:#010x}, computed {crc:#010x}", position=at)
    if h.last_offset_delta < 0 or h.records_count < 0:
        raise BatchError(
            f"batch at byte {at} has last offset delta {h.last_offset_delta}, records count {h.records_count}",
            ErrorCode.corrupt_message,
            at,
        )


def iter_batches(
    buf: bytes | bytearray | memoryview, *, validate: bool = True
) -> Iterator[tuple[int, int, BatchHeader]]:
    """(start, end, header) of each batch in a buffer of concatenated batches.

    Framing (the length field, a torn tail) is always checked, so iteration always ends;
    with `validate`, each batch's magic (== 2), CRC-32C and offset fields are checked too.
    Raises BatchError at the first bad batch, after yielding every good one before it."""
    n = len(buf)
    pos = 0
    while pos < n:
        _length, end = _check_frame(buf, pos, n)
        h = BatchHeader._make(_HEADER.unpack_from(buf, pos))
        if validate:
            check_batch(buf, pos, end, h)
        yield pos, end, h
        pos = end


def split_batches(buf: bytes | bytearray | memoryview) -> list[bytes]:
    """The batches of `buf` as separate bytes (framing and magic checked, not the CRC)."""
    out: list[bytes] = []
    n = len(buf)
    pos = 0
    unpack = _I32.unpack_from
    while pos < n:
        if n - pos >= HEADER_SIZE:
            length = unpack(buf, pos + 8)[0]
            end = pos + LOG_OVERHEAD + length
            if length >= MIN_BATCH_LENGTH and end <= n and buf[pos + 16] == MAGIC:
                out.append(bytes(buf[pos:end]))  # a slice of bytes is bytes already: no second copy
                pos = end
                continue
        _length, end = _check_frame(buf, pos, n)  # raises the precise error
        magic = buf[pos + 16]
        code = ErrorCode.unsupported_for_message_format if magic < MAGIC else ErrorCode.corrupt_message
        raise BatchError(f"batch at byte {pos} has magic {magic}, only magic 2 is supported", code, pos)
    return out


def validate_for_append(buf: bytes | bytearray | memoryview, max_message_bytes: int) -> list[BatchHeader]:
    """What a leader checks on Produce before appending, in Kafka's order; returns the headers.

    - no batch at all: INVALID_RECORD; a torn batch or bad length: CORRUPT_MESSAGE;
    - a batch larger than `max_message_bytes` (message.max.bytes): MESSAGE_TOO_LARGE;
    - magic 0/1: UNSUPPORTED_FOR_MESSAGE_FORMAT; bad CRC-32C: CORRUPT_MESSAGE;
    - compression codec > 4: UNSUPPORTED_COMPRESSION_TYPE;
    - base offset != 0, records count < 1 or != last offset delta + 1, a control batch:
      INVALID_RECORD (Kafka's LogValidator for client batches).
    Records are not decoded (no per-record work): a batch whose CRC matches carries what
    its producer framed. Produce v3+ also requires exactly one batch per partition; the
    caller checks `len(result) == 1` (it knows the request version).
    One CRC pass: `SegmentedLog.append_as_leader` trusts what this accepted."""
    out: list[BatchHeader] = []
    n = len(buf)
    pos = 0
    while pos < n:
        if n - pos > 16 and 0 <= buf[pos + 16] < MAGIC:  # legacy message sets are shorter than a v2 header
            raise BatchError(
                f"batch at byte {pos} has magic {buf[pos + 16]}, only magic 2 is supported",
                ErrorCode.unsupported_for_message_format,
                pos,
            )
        _length, end = _check_frame(buf, pos, n)
        h = BatchHeader._make(_HEADER.unpack_from(buf, pos))
        if end - pos > max_message_bytes:
            raise BatchError(
                f"batch at byte {pos} is {end - pos} bytes, message.max.bytes is {max_message_bytes}",
                ErrorCode.message_too_large,
                pos,
            )
        check_batch(buf, pos, end, h)
        if h.compression > COMPRESSION_ZSTD:
            raise BatchError(
                f"batch at byte {pos} has unknown compression codec {h.compression}",
                ErrorCode.unsupported_compression_type,
                pos,
            )
        if h.base_offset != 0:
            raise BatchError(f"batch at byte {pos} has base offset {h.base_offset}, a producer sends 0", ErrorCode.invalid_record, pos)
        if h.records_count < 1 or h.records_count != h.last_offset_delta + 1:
            raise BatchError(
                f"batch at byte {pos} has records count {h.records_count} and last offset delta {h.last_offset_delta}",
                ErrorCode.invalid_record,
                pos,
            )
        if h.is_control:
            raise BatchError(f"batch at byte {pos} is a control batch, which producers may not send", ErrorCode.invalid_record, pos)
        out.append(h)
        pos = end
    if not out:
        raise BatchError("no record batch in the produce data", ErrorCode.invalid_record)
    return out


def stamp_into(buf: bytearray | memoryview, pos: int, base_offset: int, leader_epoch: int | None = None) -> None:
    """Stamp the batch at `pos` in place with `base_offset` (and `leader_epoch`); the CRC stays valid."""
    struct.pack_into(">q", buf, pos, base_offset)
    if leader_epoch is not None:
        struct.pack_into(">i", buf, pos + 12, leader_epoch)


def stamped(batch: bytes | bytearray | memoryview, base_offset: int, leader_epoch: int | None = None) -> bytes:
    """A copy of one batch with a new base offset (and leader epoch); the CRC stays valid."""
    b = bytearray(batch)
    stamp_into(b, 0, base_offset, leader_epoch)
    return bytes(b)


def stamped_prefix(batch, pos: int, base_offset: int, leader_epoch: int) -> bytes:
    """The batch's first 16 bytes (base offset, length, leader epoch) as stamped: with the
    rest of the batch unchanged, a zero-copy stamp for writev."""
    length = _I32.unpack_from(batch, pos + 8)[0]
    return _PREFIX.pack(base_offset, length, leader_epoch)


# ---------------------------------------------------------------- varints and records
def _zigzag(n: int) -> int:
    return (n << 1) ^ (n >> 63)


def write_varint(out: bytearray, n: int) -> None:
    """Append the zigzag varint (Kafka varint/varlong) of `n`."""
    z = _zigzag(n) & 0xFFFFFFFFFFFFFFFF
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)


def read_varint(buf, pos: int, end: int | None = None) -> tuple[int, int]:
    """(value, next position) of the zigzag varint at `pos`; BatchError if it runs past
    `end` or beyond 10 bytes."""
    if end is None:
        end = len(buf)
    z = shift = 0
    while True:
        if pos >= end:
            raise BatchError("varint runs past the end of the records", position=pos)
        b = buf[pos]
        pos += 1
        z |= (b & 0x7F) << shift
        if not b & 0x80:
            return (z >> 1) ^ -(z & 1), pos
        shift += 7
        if shift > 63:
            raise BatchError("varint longer than 10 bytes", position=pos)


def _encode_record(out: bytearray, i: int, ts_delta: int, key, value, headers) -> None:
    body = bytearray(b"\x00")  # attributes
    write_varint(body, ts_delta)
    write_varint(body, i)
    for field in (key, value):
        if field is None:
            write_varint(body, -1)
        else:
            write_varint(body, len(field))
            body += field
    write_varint(body, len(headers))
    for hk, hv in headers:
        kb = hk.encode()
        write_varint(body, len(kb))
        body += kb
        if hv is None:
            write_varint(body, -1)
        else:
            write_varint(body, len(hv))
            body += hv
    write_varint(out, len(body))
    out += body


def codec_available(codec: int) -> bool:
    """Whether this broker can decompress and compress `codec` (none and gzip always;
    zstd with the `zstandard` package; snappy and lz4 not)."""
    return codec in (COMPRESSION_NONE, COMPRESSION_GZIP) or (codec == COMPRESSION_ZSTD and zstandard is not None)


def _unavailable(codec: int) -> BatchError:
    return BatchError(f"compression codec {codec} is not available here (none, gzip and zstd are)",
                      ErrorCode.unsupported_compression_type)


def _compress(codec: int, data: bytes) -> bytes:
    if codec == COMPRESSION_NONE:
        return data
    if codec == COMPRESSION_GZIP:
        c = zlib.compressobj(6, zlib.DEFLATED, 31)  # gzip framing, as Kafka's GZIP codec
        return c.compress(data) + c.flush()
    if codec == COMPRESSION_ZSTD and zstandard is not None:
        return zstandard.ZstdCompressor().compress(data)
    raise _unavailable(codec)


def _decompress(codec: int, data: bytes) -> bytes:
    if codec == COMPRESSION_NONE:
        return data
    if codec == COMPRESSION_GZIP:
        try:
            return zlib.decompress(data, 47)
        except zlib.error as e:
            raise BatchError(f"gzip records do not decompress: {e}") from None
    if codec == COMPRESSION_ZSTD and zstandard is not None:
        try:  # a producer's frame may not carry its content size: stream it
            return zstandard.ZstdDecompressor().decompressobj().decompress(data)
        except zstandard.ZstdError as e:
            raise BatchError(f"zstd records do not decompress: {e}") from None
    raise _unavailable(codec)


def encode_batch(
    values: Sequence[bytes | None],
    keys: Sequence[bytes | None] | None = None,
    timestamp: int = 0,
    base_offset: int = 0,
    leader_epoch: int = -1,
    compression: str | None = None,
    *,
    timestamps: Sequence[int] | None = None,
    headers: Sequence[Sequence[tuple[str, bytes | None]]] | None = None,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
) -> bytes:
    """One v2 batch holding `values` (for tests and tools; a producer builds its own).

    `timestamp` is every record's timestamp unless `timestamps` gives one per record;
    `compression` is None/"none", "gzip" or "zstd"."""
    if not values:
        raise ValueError("a batch holds at least one record")
    codec = COMPRESSION_NAMES.get(compression)
    if codec is None:
        raise ValueError(f"unknown compression {compression!r}")
    n = len(values)
    ts = list(timestamps) if timestamps is not None else [timestamp] * n
    base_ts = ts[0]
    recs = bytearray()
    for i, v in enumerate(values):
        _encode_record(recs, i, ts[i] - base_ts, keys[i] if keys else None, v, headers[i] if headers else ())
    payload = _compress(codec, bytes(recs))
    tail = struct.pack(">hiqqqhii", codec, n - 1, base_ts, max(ts), producer_id, producer_epoch, base_sequence, n)
    tail += payload
    crc = crc32c.crc32c(tail)
    return _PREFIX.pack(base_offset, len(tail) + 9, leader_epoch) + struct.pack(">bI", MAGIC, crc) + tail


def decode_records(batch: bytes | bytearray | memoryview, *, validate: bool = True) -> list[Record]:
    """The records of one batch (uncompressed, gzip or zstd), with absolute offsets and timestamps.
    Raises BatchError on anything malformed (never another exception)."""
    view = memoryview(batch)
    _length, end = _check_frame(view, 0, len(view))
    h = parse_header(view)
    if validate:
        check_batch(view, 0, end, h)
    elif h.magic != MAGIC:
        raise BatchError(f"batch has magic {h.magic}, only magic 2 is supported", ErrorCode.unsupported_for_message_format)
    data = _decompress(h.compression, bytes(view[HEADER_SIZE:end]))
    out: list[Record] = []
    pos, stop = 0, len(data)
    for _ in range(h.records_count):
        length, pos = read_varint(data, pos, stop)
        rec_end = pos + length
        if length < 1 or rec_end > stop:
            raise BatchError(f"record of {length} bytes at byte {pos} runs past the batch")
        pos += 1  # attributes
        ts_delta, pos = read_varint(data, pos, rec_end)
        off_delta, pos = read_varint(data, pos, rec_end)
        key, pos = _read_bytes(data, pos, rec_end)
        value, pos = _read_bytes(data, pos, rec_end)
        nh, pos = read_varint(data, pos, rec_end)
        if nh < 0:
            raise BatchError(f"negative header count {nh}")
        hdrs = []
        for _ in range(nh):
            hk, pos = _read_bytes(data, pos, rec_end)
            hv, pos = _read_bytes(data, pos, rec_end)
            if hk is None:
                raise BatchError("record header with a null key")
            try:
                hdrs.append((hk.decode(), hv))
            except UnicodeDecodeError:
                raise BatchError("record header key is not UTF-8") from None
        if pos != rec_end:
            raise BatchError(f"record length {length} does not match its fields")
        out.append(Record(h.base_offset + off_delta, h.base_timestamp + ts_delta, key, value, tuple(hdrs)))
    if pos != stop:
        raise BatchError(f"{stop - pos} bytes after the last of {h.records_count} records")
    return out


def _read_bytes(data: bytes, pos: int, end: int) -> tuple[bytes | None, int]:
    n, pos = read_varint(data, pos, end)
    if n < 0:
        return None, pos
    if pos + n > end:
        raise BatchError(f"field of {n} bytes runs past its record")
    return data[pos : pos + n], pos + n


def decode_values(batch: bytes | bytearray | memoryview) -> list[bytes | None]:
    """The record values of one batch (no CRC check; keys and headers skipped). Raises
    BatchError on anything malformed."""
    _length, end = _check_frame(batch, 0, len(batch))
    h = parse_header(batch)
    if h.magic != MAGIC:
        raise BatchError(f"batch has magic {h.magic}, only magic 2 is supported", ErrorCode.unsupported_for_message_format)
    data = batch[HEADER_SIZE:end] if h.compression == COMPRESSION_NONE else _decompress(h.compression, bytes(batch[HEADER_SIZE:end]))
    out: list[bytes | None] = []
    pos, stop = 0, len(data)
    for _ in range(h.records_count):
        length, pos = read_varint(data, pos, stop)
        rec_end = pos + length
        if length < 1 or rec_end > stop:
            raise BatchError(f"record of {length} bytes at byte {pos} runs past the batch")
        pos += 1  # attributes
        _, pos = read_varint(data, pos, rec_end)  # timestamp delta
        _, pos = read_varint(data, pos, rec_end)  # offset delta
        klen, pos = read_varint(data, pos, rec_end)
        pos += max(klen, 0)
        vlen, pos = read_varint(data, pos, rec_end)
        if vlen < 0:
            out.append(None)
        elif pos + vlen > rec_end:
            raise BatchError(f"value of {vlen} bytes runs past its record")
        else:
            out.append(bytes(data[pos : pos + vlen]))
        pos = rec_end
    return out


def build_batch(
    records: Sequence[Record],
    like: BatchHeader,
    *,
    base_offset: int | None = None,
    codec: int | None = None,
    log_append_time: int | None = None,
    keep_offsets: bool = False,
) -> bytes:
    """One v2 batch holding `records` (absolute offsets and timestamps), with `like`'s
    producer id, epoch, base sequence, partition leader epoch and flags, and a correct
    CRC-32C. The base offset is `base_offset` (default `like`'s); `codec` recompresses
    (default `like`'s codec); `log_append_time` sets the LogAppendTime type and that max
    timestamp. With `keep_offsets` (compaction) the batch keeps `like`'s last offset and
    max timestamp whatever records remain, none included (the v2 format keeps
    lastOffsetDelta for this): offsets then still run on from batch to batch."""
    if not records and not keep_offsets:
        raise ValueError("a batch holds at least one record")
    base = like.base_offset if base_offset is None else base_offset
    codec = like.compression if codec is None else codec
    if not records:
        codec = COMPRESSION_NONE  # an empty batch: a bare header
    base_ts = records[0].timestamp if records else like.base_timestamp
    recs = bytearray()
    for r in records:
        _encode_record(recs, r.offset - base, r.timestamp - base_ts, r.key, r.value, r.headers)
    payload = _compress(codec, bytes(recs)) if records else b""
    attrs = (like.attributes & ~_COMPRESSION_MASK) | codec
    max_ts = max(r.timestamp for r in records) if records else like.max_timestamp
    if log_append_time is not None:
        attrs |= _TIMESTAMP_TYPE_BIT
        max_ts = log_append_time
    elif like.is_log_append_time or keep_offsets:
        max_ts = like.max_timestamp
    last_delta = like.last_offset_delta if keep_offsets else records[-1].offset - base
    tail = struct.pack(">hiqqqhii", attrs, last_delta, base_ts, max_ts, like.producer_id,
                       like.producer_epoch, like.base_sequence, len(records))
    tail += payload
    return (_PREFIX.pack(base, len(tail) + 9, like.partition_leader_epoch)
            + struct.pack(">bI", MAGIC, crc32c.crc32c(tail)) + tail)


def stamp_log_append_time(batch: bytes | bytearray | memoryview, append_time: int) -> bytes:
    """A copy of one batch marked LogAppendTime with max timestamp `append_time` (the
    records are untouched, as Kafka's in-place assignment); the CRC-32C is recomputed."""
    b = bytearray(batch)
    attrs = struct.unpack_from(">h", b, CRC_START)[0] | _TIMESTAMP_TYPE_BIT
    struct.pack_into(">h", b, CRC_START, attrs)
    struct.pack_into(">q", b, 35, append_time)
    struct.pack_into(">I", b, 17, crc32c.crc32c(memoryview(b)[CRC_START:]))
    return bytes(b)


def empty_batch(first: BatchHeader, last_offset: int, max_timestamp: int) -> bytes:
    """A record-less batch covering offsets first.base_offset..last_offset (what a clean
    leaves of batches it emptied), with `first`'s leader epoch and timestamp type, no
    producer, and a correct CRC-32C."""
    attrs = first.attributes & ~_COMPRESSION_MASK & ~_TRANSACTIONAL_BIT
    tail = struct.pack(">hiqqqhii", attrs, last_offset - first.base_offset, first.base_timestamp, max_timestamp,
                       -1, -1, -1, 0)
    return (_PREFIX.pack(first.base_offset, len(tail) + 9, first.partition_leader_epoch)
            + struct.pack(">bI", MAGIC, crc32c.crc32c(tail)) + tail)
