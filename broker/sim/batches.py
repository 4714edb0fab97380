"""A minimal Kafka v2 record batch encoder and header reader for the simulation.

Only what the in-memory log and the simulated clients need: build a batch of values,
and read/patch the header fields the log uses (base offset, last offset delta, partition
leader epoch, length). The CRC-32C covers attributes onwards, so stamping the base
offset and the leader epoch does not change it. (Part 1's broker/records.py is the full
codec for the real broker.)
"""

from __future__ import annotations

import struct

import crc32c

HEADER = 61  # bytes up to and including the records count
_HEAD = struct.Struct(">qiiBI")  # base offset, batch length, leader epoch, magic, crc
_TAIL = struct.Struct(">hiqqqhii")  # attributes .. records count


def _varint(n: int) -> bytes:
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while True:
        b = z & 0x7F
        z >>= 7
        if z:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def encode_batch(values: list[bytes], timestamp: int = 0, base_offset: int = 0, leader_epoch: int = -1) -> bytes:
    """One uncompressed v2 batch holding `values` (no keys, no headers)."""
    recs = bytearray()
    for i, v in enumerate(values):
        body = b"\x00" + _varint(0) + _varint(i) + _varint(-1) + _varint(len(v)) + v + _varint(0)
        recs += _varint(len(body)) + body
    tail = _TAIL.pack(0, len(values) - 1, timestamp, timestamp, -1, -1, -1, len(values)) + bytes(recs)
    crc = crc32c.crc32c(tail)
    return _HEAD.pack(base_offset, len(tail) + 9, leader_epoch, 2, crc) + tail


def _read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    shift = z = 0
    while True:
        b = buf[pos]
        pos += 1
        z |= (b & 0x7F) << shift
        if not b & 0x80:
            return (z >> 1) ^ -(z & 1), pos
        shift += 7


def decode_values(batch: bytes) -> list[bytes]:
    """The record values of one batch (as written by `encode_batch`)."""
    count = struct.unpack_from(">i", batch, 57)[0]
    pos, out = HEADER, []
    for _ in range(count):
        _length, pos = _read_varint(batch, pos)
        pos += 1  # attributes
        _, pos = _read_varint(batch, pos)  # timestamp delta
        _, pos = _read_varint(batch, pos)  # offset delta
        klen, pos = _read_varint(batch, pos)
        pos += max(klen, 0)
        vlen, pos = _read_varint(batch, pos)
        out.append(bytes(batch[pos : pos + vlen]))
        pos += vlen
        nh, pos = _read_varint(batch, pos)
        if nh:
            raise ValueError("record headers are not supported by the simulation codec")
    return out


def split_batches(data: bytes) -> list[bytes]:
    """Split concatenated batches; raise ValueError on a short or non-v2 batch."""
    out, pos = [], 0
    while pos < len(data):
        if len(data) - pos < HEADER:
            raise ValueError(f"truncated batch header at byte {pos}")
        length = struct.unpack_from(">i", data, pos + 8)[0]
        end = pos + 12 + length
        if length < HEADER - 12 or end > len(data) or data[pos + 16] != 2:
            raise ValueError(f"bad batch at byte {pos} (length {length}, magic {data[pos + 16]})")
        out.append(data[pos:end])
        pos = end
    return out


def header(batch: bytes) -> tuple[int, int, int, int]:
    """(base offset, last offset delta, partition leader epoch, crc)."""
    base, _length, epoch, _magic, crc = _HEAD.unpack_from(batch, 0)
    delta = struct.unpack_from(">i", batch, 23)[0]
    return base, delta, epoch, crc


def stamp(batch: bytes, base_offset: int, leader_epoch: int | None = None) -> bytes:
    """The batch with a new base offset (and leader epoch); the CRC stays valid."""
    b = bytearray(batch)
    struct.pack_into(">q", b, 0, base_offset)
    if leader_epoch is not None:
        struct.pack_into(">i", b, 12, leader_epoch)
    return bytes(b)
