"""The Kafka wire protocol on top of `kio`'s schemas: request headers, request bodies,
responses, and the table of the API versions this broker implements.

- `parse_header(frame)` reads a request header (v1, or v2 for flexible versions) and
  says where the body starts; `WireError` for anything malformed.
- `decode_body(header, frame)` decodes the body with kio's native entity readers.
- `encode_response(api_key, version, correlation_id, body)` writes the size prefix, the
  response header (v0, or v1 with tagged fields for flexible versions; ApiVersions always
  v0) and the body, as one bytes object (one write per response).
- `build(cls, value)` makes a kio entity of any version from plain dicts and lists, so
  handlers are written once for every version: keys a version lacks are dropped, fields
  not given get their schema default (or -1 / 0 / "" / () / None by type), ints become
  ErrorCode / timedelta where the schema says so.
"""

from __future__ import annotations

import datetime
import io
import struct
import uuid
from dataclasses import MISSING, fields, is_dataclass
from functools import cache
from typing import Any

import kio.index as kio_index
import kio.schema.response_header.v1 as response_header_v1
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer
from kio.serial._introspect import EntityField, EntityTupleField, classify_field, is_optional

# API keys
PRODUCE = 0
FETCH = 1
LIST_OFFSETS = 2
METADATA = 3
OFFSET_COMMIT = 8
OFFSET_FETCH = 9
FIND_COORDINATOR = 10
JOIN_GROUP = 11
HEARTBEAT = 12
LEAVE_GROUP = 13
SYNC_GROUP = 14
DESCRIBE_GROUPS = 15
LIST_GROUPS = 16
API_VERSIONS = 18
CREATE_TOPICS = 19
DELETE_TOPICS = 20
DELETE_RECORDS = 21
INIT_PRODUCER_ID = 22
OFFSET_FOR_LEADER_EPOCH = 23
ADD_PARTITIONS_TO_TXN = 24
ADD_OFFSETS_TO_TXN = 25
END_TXN = 26
WRITE_TXN_MARKERS = 27
TXN_OFFSET_COMMIT = 28
DESCRIBE_ACLS = 29
CREATE_ACLS = 30
DELETE_ACLS = 31
DESCRIBE_CONFIGS = 32
ALTER_CONFIGS = 33
ALTER_REPLICA_LOG_DIRS = 34
DESCRIBE_LOG_DIRS = 35
CREATE_PARTITIONS = 37
DELETE_GROUPS = 42
ELECT_LEADERS = 43
INCREMENTAL_ALTER_CONFIGS = 44
ALTER_PARTITION_REASSIGNMENTS = 45
LIST_PARTITION_REASSIGNMENTS = 46
OFFSET_DELETE = 47
DESCRIBE_CLUSTER = 60

# What this broker implements: api key -> (min version, max version). ApiVersions
# advertises exactly this, so clients negotiate down to it.
SUPPORTED: dict[int, tuple[int, int]] = {
    PRODUCE: (3, 9),
    FETCH: (4, 16),
    LIST_OFFSETS: (1, 7),
    METADATA: (1, 12),
    OFFSET_COMMIT: (2, 8),
    OFFSET_FETCH: (1, 7),
    FIND_COORDINATOR: (0, 3),
    JOIN_GROUP: (0, 7),
    HEARTBEAT: (0, 4),
    LEAVE_GROUP: (0, 4),
    SYNC_GROUP: (0, 5),
    DESCRIBE_GROUPS: (0, 5),
    LIST_GROUPS: (0, 4),
    API_VERSIONS: (0, 3),
    CREATE_TOPICS: (2, 7),
    DELETE_TOPICS: (1, 6),
    DELETE_RECORDS: (0, 2),
    INIT_PRODUCER_ID: (0, 4),
    OFFSET_FOR_LEADER_EPOCH: (2, 4),
    ADD_PARTITIONS_TO_TXN: (0, 3),
    ADD_OFFSETS_TO_TXN: (0, 3),
    END_TXN: (0, 3),
    WRITE_TXN_MARKERS: (1, 1),
    TXN_OFFSET_COMMIT: (0, 3),
    DESCRIBE_CONFIGS: (1, 4),
    ALTER_CONFIGS: (0, 2),
    ALTER_REPLICA_LOG_DIRS: (1, 2),
    DESCRIBE_LOG_DIRS: (1, 4),
    CREATE_PARTITIONS: (0, 3),
    ELECT_LEADERS: (0, 2),
    INCREMENTAL_ALTER_CONFIGS: (0, 1),
    ALTER_PARTITION_REASSIGNMENTS: (0, 1),
    LIST_PARTITION_REASSIGNMENTS: (0, 0),
    DESCRIBE_ACLS: (1, 3),
    CREATE_ACLS: (1, 3),
    DELETE_ACLS: (1, 3),
    DELETE_GROUPS: (0, 2),
    OFFSET_DELETE: (0, 0),
}

_HEAD = struct.Struct(">hhi")


class WireError(ValueError):
    """A request that cannot be decoded (the connection is closed)."""


class UnsupportedVersion(WireError):
    """A known API at a version this broker does not implement."""


class UnknownApi(WireError):
    """An API key this broker does not know."""


def api_name(api_key: int) -> str:
    return kio_index.api_key_map.get(api_key, f"api-{api_key}")


@cache
def request_class(api_key: int, version: int) -> type | None:
    """kio's request schema, or None if kio does not know this version."""
    try:
        return kio_index.load_request_schema(api_key, version)
    except (kio_index.KioIndexError, ImportError, AttributeError, ValueError):
        return None


@cache
def response_class(api_key: int, version: int) -> type | None:
    try:
        return kio_index.load_response_schema(api_key, version)
    except (kio_index.KioIndexError, ImportError, AttributeError, ValueError):
        return None


@cache
def _reader(cls: type) -> Any:
    return entity_reader(cls)


@cache
def _writer(cls: type) -> Any:
    return entity_writer(cls)


class RequestHeader:
    """A parsed request header; `body_offset` is where the body starts in the frame."""

    __slots__ = ("api_key", "api_version", "correlation_id", "client_id", "body_offset")

    def __init__(self, api_key: int, api_version: int, correlation_id: int, client_id: str | None, body_offset: int):
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id
        self.client_id = client_id
        self.body_offset = body_offset

    def __repr__(self) -> str:
        return f"{api_name(self.api_key)} v{self.api_version} #{self.correlation_id} from {self.client_id!r}"


def peek_header(frame: bytes | memoryview) -> tuple[int, int, int]:
    """(api key, api version, correlation id): the first 8 bytes of every request."""
    if len(frame) < 8:
        raise WireError(f"request of {len(frame)} bytes is shorter than a header")
    return _HEAD.unpack_from(frame, 0)


def parse_header(frame: bytes | memoryview, supported_only: bool = True) -> RequestHeader:
    """Parse the header of a request to a supported API version (any version kio knows
    with `supported_only=False`, to answer UNSUPPORTED_VERSION in that version)."""
    key, ver, cid = peek_header(frame)
    if key not in SUPPORTED:
        raise UnknownApi(f"unknown or unsupported API key {key}")
    lo, hi = SUPPORTED[key]
    if supported_only and not lo <= ver <= hi:
        raise UnsupportedVersion(f"{api_name(key)} v{ver} is not supported (v{lo}-v{hi})")
    cls = request_class(key, ver)
    if cls is None or response_class(key, ver) is None:
        raise UnsupportedVersion(f"{api_name(key)} v{ver} has no schema")
    pos = 8
    if len(frame) < pos + 2:
        raise WireError("request header ends before the client id")
    n = int.from_bytes(frame[pos : pos + 2], "big", signed=True)
    pos += 2
    client_id = None
    if n >= 0:
        if len(frame) < pos + n:
            raise WireError("request header ends inside the client id")
        try:
            client_id = str(frame[pos : pos + n], "utf-8")
        except UnicodeDecodeError:
            raise WireError("client id is not UTF-8") from None
        pos += n
    elif n != -1:
        raise WireError(f"bad client id length {n}")
    if cls.__flexible__:
        pos = skip_tagged_fields(frame, pos)
    return RequestHeader(key, ver, cid, client_id, pos)


def read_uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        if pos >= len(buf):
            raise WireError("truncated varint")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
        if shift > 28:
            raise WireError("varint too long")


def skip_tagged_fields(buf: bytes, pos: int) -> int:
    count, pos = read_uvarint(buf, pos)
    for _ in range(count):
        _tag, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        pos += size
        if pos > len(buf):
            raise WireError("tagged field runs past the end of the request")
    return pos


def decode_body(header: RequestHeader, frame: bytes | memoryview) -> Any:
    """The request body as a kio entity; WireError if it does not decode, or if a field
    the schema says is not nullable came as null (Kafka rejects those too). Unknown
    tagged fields are rejected as well (kio cannot skip them)."""
    cls = request_class(header.api_key, header.api_version)
    try:
        body, _size = _reader(cls)(frame, header.body_offset)
    except Exception as e:  # the native reader raises SerialError, KeyError (unknown tag), ...
        raise WireError(f"{api_name(header.api_key)} v{header.api_version}: {type(e).__name__}: {e}") from None
    _check_nulls(body, api_name(header.api_key))
    return body


@cache
def _nullable_plan(cls: type) -> tuple[tuple[str, str, bool], ...]:
    return tuple((name, kind, optional) for name, kind, _nested, _d, optional in _plan(cls))


def _check_nulls(entity: Any, where: str) -> None:
    for name, kind, optional in _nullable_plan(type(entity)):
        v = getattr(entity, name)
        if v is None:
            if not optional and kind != "uuid":
                raise WireError(f"{where}: non-nullable field {name} is null")
        elif kind == "entities":
            for x in v:
                _check_nulls(x, where)
        elif kind == "entity":
            _check_nulls(v, where)


def encode_response(api_key: int, version: int, correlation_id: int, body: Any) -> bytes:
    """Size prefix + response header + body, ready for one write."""
    cls = type(body)
    buf = io.BytesIO()
    buf.write(b"\0\0\0\0")
    buf.write(correlation_id.to_bytes(4, "big", signed=True))
    if cls.__header_schema__ is response_header_v1.ResponseHeader:
        buf.write(b"\0")  # no tagged fields
    _writer(cls)(buf, body)
    view = buf.getbuffer()
    struct.pack_into(">i", view, 0, len(view) - 4)
    del view
    return buf.getvalue()


# ---------------------------------------------------------------- building entities
_INT_TYPES = {"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"}


@cache
def _plan(cls: type) -> tuple[tuple[str, str, Any, Any, bool], ...]:
    """Per field: (name, kind, nested class, default, optional)."""
    out = []
    for f in fields(cls):
        fc = classify_field(f)
        if isinstance(fc, EntityField):
            kind, nested = "entity", fc.type_
        elif isinstance(fc, EntityTupleField):
            kind, nested = "entities", fc.type_
        else:
            kind, nested = ("array" if fc.is_array else f.metadata.get("kafka_type", "")), None
        if f.default is not MISSING:
            default = f.default
        elif f.default_factory is not MISSING:
            default = f.default_factory()
        else:
            default = MISSING
        out.append((f.name, kind, nested, default, is_optional(f)))
    return tuple(out)


def _implicit(kind: str, optional: bool, nested: Any) -> Any:
    if optional:
        return None
    if kind in _INT_TYPES:
        return 0
    if kind == "error_code":
        return ErrorCode.none
    if kind in ("timedelta_i32", "timedelta_i64"):
        return datetime.timedelta(0)
    if kind == "string":
        return ""
    if kind in ("bytes", "records"):
        return b""
    if kind == "bool":
        return False
    if kind == "uuid":
        return uuid.UUID(int=0)
    if kind in ("array", "entities"):
        return ()
    if kind == "entity":
        return build(nested, {})
    if kind == "float64":
        return 0.0
    raise TypeError(f"no default for a {kind} field")


def build(cls: type, value: dict[str, Any]) -> Any:
    """A `cls` entity from a dict (nested entities from dicts, arrays from lists)."""
    kw = {}
    for name, kind, nested, default, optional in _plan(cls):
        if name in value:
            v = value[name]
            if kind == "entities":
                v = None if v is None else tuple(x if is_dataclass(x) else build(nested, x) for x in v)
            elif kind == "entity":
                v = None if v is None else (v if is_dataclass(v) else build(nested, v))
            elif kind == "error_code":
                v = ErrorCode(v)
            elif kind in ("timedelta_i32", "timedelta_i64") and isinstance(v, int):
                v = datetime.timedelta(milliseconds=v)
            elif kind == "array" and v is not None:
                v = tuple(v)
            kw[name] = v
        elif default is MISSING:
            kw[name] = _implicit(kind, optional, nested)
    return cls(**kw)


def response(api_key: int, version: int, value: dict[str, Any]) -> Any:
    """Build the response entity of (api_key, version)."""
    cls = response_class(api_key, version)
    assert cls is not None, (api_key, version)
    return build(cls, value)


def ms(td: datetime.timedelta | int) -> int:
    """A kio timedelta field in milliseconds."""
    if isinstance(td, int):
        return td
    return td.days * 86_400_000 + td.seconds * 1000 + td.microseconds // 1000


def api_versions_body(version: int, error: ErrorCode = ErrorCode.none) -> Any:
    """The ApiVersions response listing `SUPPORTED` (v0 form when the version is unknown)."""
    keys = [{"api_key": k, "min_version": lo, "max_version": hi} for k, (lo, hi) in sorted(SUPPORTED.items())]
    return response(API_VERSIONS, version, {"error_code": error, "api_keys": keys, "throttle_time": 0})
