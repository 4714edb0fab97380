"""A hand-written encoder for Fetch responses (versions 4-16), the broker's hot path.

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
_LEADER = struct.Struct(">iiB")  # leader id, leader epoch, no tagged fields
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
    current_leader: tuple[int, int] | None = None  # (leader id, leader epoch), v12+ (KIP-951 fills it from v16)


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


class NodeEndpoint(NamedTuple):
    node_id: int
    host: str
    port: int
    rack: str | None = None


def _compact_str(s: str | None) -> bytes:
    if s is None:
        return b"\x00"
    raw = s.encode("utf-8")
    return _uvarint(len(raw) + 1) + raw


def _tagged(fields: list[tuple[int, bytes]]) -> bytes:
    """A tagged-fields section: the count, then each (tag, size, payload)."""
    return _uvarint(len(fields)) + b"".join(_uvarint(tag) + _uvarint(len(body)) + body for tag, body in fields)


def _node_endpoints(nodes: list[NodeEndpoint]) -> bytes:
    return _uvarint(len(nodes) + 1) + b"".join(
        _I.pack(n.node_id) + _compact_str(n.host) + _I.pack(n.port) + _compact_str(n.rack) + b"\x00" for n in nodes)


def encode_fetch_response(version: int, correlation_id: int, error_code: int, topics: list[TopicData],
                          throttle_ms: int = 0, session_id: int = 0, node_endpoints: list[NodeEndpoint] | None = None,
                          ) -> bytes:
    """Size prefix, response header and body of a Fetch response, as one bytes object;
    `node_endpoints` (v16+, KIP-951): the leaders named in `current_leader` fields."""
    if not 4 <= version <= 16:
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
                if p.diverging is None and p.current_leader is None:
                    parts.append(b"\x00")
                else:
                    tagged = []
                    if p.diverging is not None:
                        tagged.append((0, _DIVERGING.pack(p.diverging[0], p.diverging[1], 0)))
                    if p.current_leader is not None:
                        tagged.append((1, _LEADER.pack(p.current_leader[0], p.current_leader[1], 0)))
                    parts.append(_tagged(tagged))
        if flexible:
            parts.append(b"\x00")
    if version >= 16 and node_endpoints:
        parts.append(_tagged([(0, _node_endpoints(node_endpoints))]))
    elif flexible:
        parts.append(b"\x00")
    size = sum(len(x) for x in parts)
    parts[0] = _I.pack(size)
    return b"".join(parts)
