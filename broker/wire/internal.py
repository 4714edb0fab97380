"""The inter-node wire format: the core's messages (broker <-> broker, broker <->
controller) as compact binary frames. No pickle: decoding builds only the message
classes listed here, checks every field's type and bounds, and raises `DecodeError` on
anything else (the link is then closed).

Frames use Kafka's size prefix, so they can share a listener with Kafka clients; the
body starts with the int16 `INTERNAL_API_KEY` (not a Kafka API key), then a kind byte:

    HELLO:   node id (int32), link role (uint8: ROLE_BROKER, ROLE_CONTROLLER, ROLE_RAFT
             for the links between the controller quorum's voters, or ROLE_ALTER_PARTITION
             for a broker's AlterPartition requests to the controller, which Kafka sends on
             a channel of their own)
    MESSAGE: type tag (uint8), then the fields of the message in declaration order
    PING:    nothing (either side sends one when it has sent nothing for a second; a
             link that hears nothing for `wrack.link.timeout.ms` is closed)

Field encodings follow the type hints of the dataclasses: int = int64, bool = one byte
(0/1), str = uint32 length + UTF-8, bytes = uint32 length + raw, ErrorCode = int16,
TopicPartition = str + int32, `X | None` = flag byte + X, `tuple[X, ...]` = uint32 count
+ items, a union of records = uint8 tag + fields, a quorum `RaftEntry` = epoch (int64) +
a metadata record (tagged). The codec is compiled once from the
type hints into closures.
"""

from __future__ import annotations

import struct
import typing
from collections.abc import Callable
from dataclasses import fields, is_dataclass
from types import NoneType, UnionType
from typing import Any

from kio.schema.errors import ErrorCode

from broker.core import messages as m
from broker.core import metadata as md
from broker.core import raft_messages as rm

INTERNAL_API_KEY = 0x7A11  # 31249: far from Kafka's API keys
KIND_HELLO = 0
KIND_MESSAGE = 1
KIND_PING = 2
ROLE_BROKER = 0
ROLE_CONTROLLER = 1
ROLE_RAFT = 2
ROLE_ALTER_PARTITION = 3  # a broker's AlterPartition requests: their own link, as Kafka's own channel
ROLES = (ROLE_BROKER, ROLE_CONTROLLER, ROLE_RAFT, ROLE_ALTER_PARTITION)
CONTROLLER_ROLES = (ROLE_CONTROLLER, ROLE_ALTER_PARTITION)
PREFIX = INTERNAL_API_KEY.to_bytes(2, "big")

# The messages that travel between nodes; the position is the type tag (append only).
MESSAGES: tuple[type, ...] = (
    m.BrokerRegistrationRequest,
    m.BrokerRegistrationResponse,
    m.BrokerHeartbeatRequest,
    m.BrokerHeartbeatResponse,
    m.MetadataFetchRequest,
    m.MetadataFetchResponse,
    m.AlterPartitionRequest,
    m.AlterPartitionResponse,
    m.FetchRequest,
    m.FetchResponse,
    m.CreateTopicRequest,
    m.CreateTopicResponse,
    m.DeleteTopicRequest,
    m.DeleteTopicResponse,
    m.ElectLeadersRequest,
    m.ElectLeadersResponse,
    m.GetReplicaLogInfoRequest,
    m.GetReplicaLogInfoResponse,
    m.OffsetsForLeaderEpochRequest,
    m.OffsetsForLeaderEpochResponse,
    m.NotController,
    rm.VoteRequest,
    rm.VoteResponse,
    rm.BeginQuorumEpochRequest,
    rm.RaftFetchRequest,
    rm.RaftFetchResponse,
    m.CreatePartitionsRequest,
    m.CreatePartitionsResponse,
    m.AlterConfigsRequest,
    m.AlterConfigsResponse,
    m.AlterReassignmentRequest,
    m.AlterReassignmentResponse,
    m.CreateAclsRequest,
    m.CreateAclsResponse,
    m.DeleteAclsRequest,
    m.DeleteAclsResponse,
)
RECORDS: tuple[type, ...] = (
    md.RegisterBrokerRecord,
    md.BrokerRegistrationChangeRecord,
    md.TopicRecord,
    md.PartitionRecord,
    md.PartitionChangeRecord,
    md.RemoveTopicRecord,
    md.LeaderChangeRecord,
    md.ConfigRecord,
    md.AccessControlEntryRecord,
    md.RemoveAccessControlEntryRecord,
)
# Fields whose hint is too loose to derive a codec from.
_OVERRIDES: dict[tuple[type, str], Any] = {
    (m.MetadataFetchResponse, "records"): tuple[md.MetadataRecord, ...],
    (rm.RaftFetchResponse, "entries"): tuple[rm.RaftEntry, ...],
}

_Q = struct.Struct(">q")
_I = struct.Struct(">i")
_IU = struct.Struct(">I")
_H = struct.Struct(">h")
_ERRORS = {e.value: e for e in ErrorCode}
MAX_COUNT = 1 << 24


class DecodeError(ValueError):
    """An inter-node frame that is not a valid message."""


Encoder = Callable[[list, Any], None]
Decoder = Callable[[memoryview, int], tuple[Any, int]]


# ---------------------------------------------------------------- primitives
def _enc_int(out: list, v: Any) -> None:
    if type(v) is not int and not isinstance(v, int) or isinstance(v, bool):
        raise TypeError(f"expected int, got {type(v).__name__}")
    out.append(_Q.pack(v))


def _dec_int(buf: memoryview, pos: int) -> tuple[int, int]:
    if pos + 8 > len(buf):
        raise DecodeError("truncated int")
    return _Q.unpack_from(buf, pos)[0], pos + 8


def _enc_bool(out: list, v: Any) -> None:
    if not isinstance(v, bool):
        raise TypeError(f"expected bool, got {type(v).__name__}")
    out.append(b"\x01" if v else b"\x00")


def _dec_bool(buf: memoryview, pos: int) -> tuple[bool, int]:
    if pos >= len(buf):
        raise DecodeError("truncated bool")
    b = buf[pos]
    if b > 1:
        raise DecodeError(f"bad bool byte {b}")
    return b == 1, pos + 1


def _enc_bytes(out: list, v: Any) -> None:
    if not isinstance(v, bytes | bytearray | memoryview):
        raise TypeError(f"expected bytes, got {type(v).__name__}")
    out.append(_IU.pack(len(v)))
    out.append(v)


def _dec_bytes(buf: memoryview, pos: int) -> tuple[bytes, int]:
    if pos + 4 > len(buf):
        raise DecodeError("truncated length")
    n = _IU.unpack_from(buf, pos)[0]
    pos += 4
    if pos + n > len(buf):
        raise DecodeError(f"bytes of length {n} run past the end of the frame")
    return bytes(buf[pos : pos + n]), pos + n


def _enc_str(out: list, v: Any) -> None:
    if not isinstance(v, str):
        raise TypeError(f"expected str, got {type(v).__name__}")
    _enc_bytes(out, v.encode("utf-8"))


def _dec_str(buf: memoryview, pos: int) -> tuple[str, int]:
    raw, pos = _dec_bytes(buf, pos)
    try:
        return raw.decode("utf-8"), pos
    except UnicodeDecodeError:
        raise DecodeError("string is not UTF-8") from None


def _enc_error(out: list, v: Any) -> None:
    if not isinstance(v, ErrorCode):
        raise TypeError(f"expected ErrorCode, got {type(v).__name__}")
    out.append(_H.pack(v.value))


def _dec_error(buf: memoryview, pos: int) -> tuple[ErrorCode, int]:
    if pos + 2 > len(buf):
        raise DecodeError("truncated error code")
    v = _H.unpack_from(buf, pos)[0]
    e = _ERRORS.get(v)
    if e is None:
        raise DecodeError(f"unknown error code {v}")
    return e, pos + 2


def _enc_tp(out: list, v: Any) -> None:
    if not isinstance(v, m.TopicPartition):
        raise TypeError(f"expected TopicPartition, got {type(v).__name__}")
    _enc_str(out, v.topic)
    out.append(_I.pack(v.partition))


def _dec_tp(buf: memoryview, pos: int) -> tuple[m.TopicPartition, int]:
    topic, pos = _dec_str(buf, pos)
    if pos + 4 > len(buf):
        raise DecodeError("truncated partition")
    return m.TopicPartition(topic, _I.unpack_from(buf, pos)[0]), pos + 4


_PRIMITIVES: dict[Any, tuple[Encoder, Decoder]] = {
    int: (_enc_int, _dec_int),
    bool: (_enc_bool, _dec_bool),
    bytes: (_enc_bytes, _dec_bytes),
    str: (_enc_str, _dec_str),
    ErrorCode: (_enc_error, _dec_error),
    m.TopicPartition: (_enc_tp, _dec_tp),
}


# ---------------------------------------------------------------- compiling type hints
def _codec(t: Any) -> tuple[Encoder, Decoder]:
    if t in _PRIMITIVES:
        return _PRIMITIVES[t]
    origin = typing.get_origin(t)
    args = typing.get_args(t)
    if origin in (UnionType, typing.Union):
        members = [a for a in args if a is not NoneType]
        if NoneType in args and len(members) == 1:
            return _optional(_codec(members[0]))
        if all(is_dataclass(a) for a in members) and NoneType not in args:
            return _tagged(tuple(members))
        raise TypeError(f"no codec for union {t}")
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return _sequence(_codec(args[0]))
        return _fixed([_codec(a) for a in args])
    if isinstance(t, type) and is_dataclass(t):
        return _dataclass(t)
    if t is rm.RaftEntry:
        return _raft_entry()
    raise TypeError(f"no codec for {t}")


def _raft_entry() -> tuple[Encoder, Decoder]:
    enc_r, dec_r = _codec(md.MetadataRecord)

    def enc(out: list, v: Any) -> None:
        if not isinstance(v, rm.RaftEntry):
            raise TypeError(f"expected RaftEntry, got {type(v).__name__}")
        _enc_int(out, v.epoch)
        enc_r(out, v.record)

    def dec(buf: memoryview, pos: int) -> tuple[Any, int]:
        epoch, pos = _dec_int(buf, pos)
        record, pos = dec_r(buf, pos)
        return rm.RaftEntry(epoch, record), pos

    return enc, dec


def _optional(inner: tuple[Encoder, Decoder]) -> tuple[Encoder, Decoder]:
    enc_i, dec_i = inner

    def enc(out: list, v: Any) -> None:
        if v is None:
            out.append(b"\x00")
        else:
            out.append(b"\x01")
            enc_i(out, v)

    def dec(buf: memoryview, pos: int) -> tuple[Any, int]:
        present, pos = _dec_bool(buf, pos)
        return dec_i(buf, pos) if present else (None, pos)

    return enc, dec


def _sequence(inner: tuple[Encoder, Decoder]) -> tuple[Encoder, Decoder]:
    enc_i, dec_i = inner

    def enc(out: list, v: Any) -> None:
        if not isinstance(v, tuple):
            raise TypeError(f"expected tuple, got {type(v).__name__}")
        out.append(_IU.pack(len(v)))
        for x in v:
            enc_i(out, x)

    def dec(buf: memoryview, pos: int) -> tuple[tuple, int]:
        if pos + 4 > len(buf):
            raise DecodeError("truncated count")
        n = _IU.unpack_from(buf, pos)[0]
        pos += 4
        if n > MAX_COUNT or n > len(buf) - pos:  # every item takes at least one byte
            raise DecodeError(f"count {n} exceeds the frame")
        items = []
        for _ in range(n):
            x, pos = dec_i(buf, pos)
            items.append(x)
        return tuple(items), pos

    return enc, dec


def _fixed(parts: list[tuple[Encoder, Decoder]]) -> tuple[Encoder, Decoder]:
    def enc(out: list, v: Any) -> None:
        if not isinstance(v, tuple) or len(v) != len(parts):
            raise TypeError(f"expected a tuple of {len(parts)}")
        for (e, _), x in zip(parts, v, strict=True):
            e(out, x)

    def dec(buf: memoryview, pos: int) -> tuple[tuple, int]:
        items = []
        for _, d in parts:
            x, pos = d(buf, pos)
            items.append(x)
        return tuple(items), pos

    return enc, dec


_DATACLASS_CODECS: dict[type, tuple[Encoder, Decoder]] = {}


def _dataclass(cls: type) -> tuple[Encoder, Decoder]:
    if cls in _DATACLASS_CODECS:
        return _DATACLASS_CODECS[cls]
    hints = typing.get_type_hints(cls)
    names = [f.name for f in fields(cls)]
    codecs = [_codec(_OVERRIDES.get((cls, n), hints[n])) for n in names]
    pairs = list(zip(names, codecs, strict=True))

    def enc(out: list, v: Any) -> None:
        if type(v) is not cls:
            raise TypeError(f"expected {cls.__name__}, got {type(v).__name__}")
        for name, (e, _) in pairs:
            e(out, getattr(v, name))

    def dec(buf: memoryview, pos: int) -> tuple[Any, int]:
        values = []
        for _, (_, d) in pairs:
            x, pos = d(buf, pos)
            values.append(x)
        return cls(*values), pos

    _DATACLASS_CODECS[cls] = (enc, dec)
    return enc, dec


def _tagged(classes: tuple[type, ...]) -> tuple[Encoder, Decoder]:
    index = {c: i for i, c in enumerate(classes)}
    codecs = [_dataclass(c) for c in classes]

    def enc(out: list, v: Any) -> None:
        i = index.get(type(v))
        if i is None:
            raise TypeError(f"{type(v).__name__} is not one of {[c.__name__ for c in classes]}")
        out.append(bytes((i,)))
        codecs[i][0](out, v)

    def dec(buf: memoryview, pos: int) -> tuple[Any, int]:
        if pos >= len(buf):
            raise DecodeError("truncated type tag")
        i = buf[pos]
        if i >= len(codecs):
            raise DecodeError(f"unknown type tag {i}")
        return codecs[i][1](buf, pos + 1)

    return enc, dec


_MESSAGE_ENC, _MESSAGE_DEC = _tagged(MESSAGES)
_RECORD_CHECK = set(RECORDS)
assert set(typing.get_args(md.MetadataRecord)) == _RECORD_CHECK, "a metadata record type has no codec"


# ---------------------------------------------------------------- frames
def encode_message(msg: Any) -> bytes:
    """A size-prefixed MESSAGE frame for `msg` (TypeError if it cannot travel)."""
    out: list = [b"", PREFIX, bytes((KIND_MESSAGE,))]
    _MESSAGE_ENC(out, msg)
    body = b"".join(out)
    return len(body).to_bytes(4, "big") + body


def frame_head(message_type: type) -> bytes:
    """The 4 bytes after the size prefix of every MESSAGE frame of `message_type` (the
    internal API key, the kind and its type tag): what a test's firewall matches to hold
    one kind of request in the network."""
    return PREFIX + bytes((KIND_MESSAGE, MESSAGES.index(message_type)))


def encode_hello(node_id: int, role: int) -> bytes:
    body = PREFIX + bytes((KIND_HELLO,)) + _I.pack(node_id) + bytes((role,))
    return len(body).to_bytes(4, "big") + body


PING_FRAME = (3).to_bytes(4, "big") + PREFIX + bytes((KIND_PING,))


def is_internal(frame: bytes) -> bool:
    """Whether a frame (without its size) is one of ours rather than a Kafka request."""
    return frame[:2] == PREFIX


def decode_frame(frame: bytes) -> tuple[int, Any]:
    """(KIND_HELLO, (node id, role)), (KIND_MESSAGE, message) or (KIND_PING, None);
    DecodeError otherwise."""
    buf = memoryview(frame)
    if len(buf) < 3 or buf[:2] != PREFIX:
        raise DecodeError("not an inter-node frame")
    kind = buf[2]
    if kind == KIND_HELLO:
        if len(buf) != 8:
            raise DecodeError(f"hello of {len(buf)} bytes")
        node_id = _I.unpack_from(buf, 3)[0]
        role = buf[7]
        if node_id < 0 or role not in ROLES:
            raise DecodeError(f"bad hello (node {node_id}, role {role})")
        return KIND_HELLO, (node_id, role)
    if kind == KIND_PING:
        if len(buf) != 3:
            raise DecodeError(f"ping of {len(buf)} bytes")
        return KIND_PING, None
    if kind != KIND_MESSAGE:
        raise DecodeError(f"unknown frame kind {kind}")
    try:
        msg, pos = _MESSAGE_DEC(buf, 3)
    except DecodeError:
        raise
    except (ValueError, TypeError, IndexError, struct.error) as e:
        raise DecodeError(f"bad message: {type(e).__name__}: {e}") from None
    if pos != len(buf):
        raise DecodeError(f"{len(buf) - pos} trailing bytes after {type(msg).__name__}")
    return KIND_MESSAGE, msg
