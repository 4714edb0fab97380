"""A hand-written encoder for Fetch responses (versions 4-15), the broker's hot path.

kio's generic writer copies the records into a BytesIO and walks every field in Python;
this builds the small fixed parts with struct and joins them with the records once: one
copy of the records per response. The output is byte-for-byte kio's (tested with
hypothesis in tests/broker/test_broker_fetch_codec.py).
"""

from __future__ import annotations

import struct
import uuid
from typing import NamedTuple

_I = struct.Struct(">i")
_H = struct.Struct(">h")
_PART_HEAD = struct.Struct(">ihq")  # partition index, error code, high watermark
_Q = struct.Struct(">q")
_QQ = struct.Struct(">qq")
_DIVERGING = struct.Struct(">iqB")  # epoch, end offset, no tagged fields
_ZERO_UUID = bytes(16)


class PartitionData(NamedTuple):
    index: int
    error_code: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    records: bytes | None
    diverging: tuple[int, int] | None = None  # (epoch, end offset), v12+
    aborted: list[tuple[int, int]] | None = None  # (producer id, first offset): read_committed


class TopicData(NamedTuple):
    name: str
    topic_id: uuid.UUID | None
    partitions: list[PartitionData]


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _aborted(aborted: list[tuple[int, int]] | None, flexible: bool) -> bytes:
    """The aborted transactions array (null when None)."""
    if aborted is None:
        return b"\x00" if flexible else _I.pack(-1)
    out = [_uvarint(len(aborted) + 1) if flexible else _I.pack(len(aborted))]
    for pid, first in aborted:
        out.append(_QQ.pack(pid, first) + (b"\x00" if flexible else b""))
    return b"".join(out)


def encode_fetch_response(version: int, correlation_id: int, error_code: int, topics: list[TopicData],
                          throttle_ms: int = 0, session_id: int = 0) -> bytes:
    """Size prefix, response header and body of a Fetch response, as one bytes object."""
    if not 4 <= version <= 15:
        raise ValueError(f"Fetch v{version} is not encoded here")
    flexible = version >= 12
    parts: list[bytes] = [b"", _I.pack(correlation_id)]
    if flexible:
        parts.append(b"\x00")  # response header v1: no tagged fields
    parts.append(_I.pack(throttle_ms))
    if version >= 7:
        parts.append(_H.pack(error_code) + _I.pack(session_id))
    parts.append(_uvarint(len(topics) + 1) if flexible else _I.pack(len(topics)))
    for t in topics:
        if version >= 13:
            parts.append(t.topic_id.bytes if t.topic_id is not None else _ZERO_UUID)
        else:
            raw = t.name.encode("utf-8")
            parts.append((_uvarint(len(raw) + 1) if flexible else _H.pack(len(raw))) + raw)
        parts.append(_uvarint(len(t.partitions) + 1) if flexible else _I.pack(len(t.partitions)))
        for p in t.partitions:
            head = _PART_HEAD.pack(p.index, p.error_code, p.high_watermark) + _Q.pack(p.last_stable_offset)
            if version >= 5:
                head += _Q.pack(p.log_start_offset)
            head += _aborted(p.aborted, flexible)
            if version >= 11:
                head += _I.pack(-1)  # preferred read replica
            recs = p.records
            if recs is None:
                head += b"\x00" if flexible else _I.pack(-1)
                parts.append(head)
            else:
                head += _uvarint(len(recs) + 1) if flexible else _I.pack(len(recs))
                parts.append(head)
                parts.append(recs)
            if flexible:
                if p.diverging is not None:
                    body = _DIVERGING.pack(p.diverging[0], p.diverging[1], 0)
                    parts.append(b"\x01\x00" + _uvarint(len(body)) + body)  # one tagged field: tag 0
                else:
                    parts.append(b"\x00")
        if flexible:
            parts.append(b"\x00")
    if flexible:
        parts.append(b"\x00")
    size = sum(len(x) for x in parts)
    parts[0] = _I.pack(size)
    return b"".join(parts)
