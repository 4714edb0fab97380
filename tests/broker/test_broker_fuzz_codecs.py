"""Property tests and fuzzing of the broker's decoders (hypothesis):
- the Kafka request decoder (header + kio body) raises nothing but `WireError` on random
  and mutated frames, and answers what it decodes;
- the inter-node codec round-trips every message and rejects random and mutated frames
  with `DecodeError` only;
- the frame reader reassembles any chunking of any frames."""

from __future__ import annotations

import dataclasses
import typing
from types import NoneType, UnionType

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from broker.core import messages as m
from broker.core import metadata as md
from broker.core.metadata import MetadataRecord
from broker.core.raft_messages import RaftEntry
from broker.wire import internal
from broker.wire import kafka as k
from broker.wire.client import encode_request
from broker.wire.frames import FrameError, FrameReader, frame

FUZZ = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# ---------------------------------------------------------------- Kafka requests
def decode(frame_bytes: bytes):
    """What the broker does with a frame before a handler sees it."""
    header = k.parse_header(frame_bytes)
    return header, k.decode_body(header, frame_bytes)


def sample_requests() -> list[bytes]:
    """One valid request (default field values, one topic where there are lists) per
    supported API version, without the size prefix."""
    out = []
    for key, (lo, hi) in k.SUPPORTED.items():
        for v in range(lo, hi + 1):
            cls = k.request_class(key, v)
            body = k.build(cls, _example(cls))
            out.append(encode_request(key, v, 7, body)[4:])
    return out


def _example(cls: type) -> dict:
    """Fill entity lists with one element so mutations reach nested fields."""
    out = {}
    for name, kind, nested, _default, _opt in k._plan(cls):
        if kind == "entities":
            out[name] = [_example(nested)]
        elif kind == "string":
            out[name] = "t"
        elif kind == "records":
            out[name] = b"\x00" * 61
    return out


SAMPLES = sample_requests()


def test_every_supported_version_round_trips_through_the_decoder():
    for f in SAMPLES:
        header, body = decode(f)
        assert type(body) is k.request_class(header.api_key, header.api_version)
        assert header.correlation_id == 7


@FUZZ
@given(st.binary(max_size=300))
def test_random_frames_only_raise_wire_errors(data):
    try:
        decode(data)
    except k.WireError:
        pass


@st.composite
def mutated(draw, samples=SAMPLES):
    base = bytearray(draw(st.sampled_from(samples)))
    for _ in range(draw(st.integers(1, 6))):
        op = draw(st.sampled_from(["flip", "set", "cut", "insert", "delete"]))
        pos = draw(st.integers(0, max(len(base) - 1, 0)))
        if op == "flip" and base:
            base[pos] ^= 1 << draw(st.integers(0, 7))
        elif op == "set" and base:
            base[pos] = draw(st.sampled_from([0, 0x7F, 0x80, 0xFF]))
        elif op == "cut":
            del base[pos:]
        elif op == "insert":
            base[pos:pos] = draw(st.binary(min_size=1, max_size=8))
        elif op == "delete" and base:
            del base[pos : pos + draw(st.integers(1, 8))]
    return bytes(base)


@FUZZ
@given(mutated())
def test_mutated_requests_only_raise_wire_errors(data):
    try:
        header, body = decode(data)
    except k.WireError:
        return
    assert header.api_key in k.SUPPORTED


def test_error_responses_encode_for_every_supported_version():
    """What a failing handler answers (UNKNOWN_SERVER_ERROR) can be built in every version."""
    from broker.server.api_base import error_response

    for f in SAMPLES:
        header, body = decode(f)
        value = error_response(header.api_key, body, ErrorCode.unknown_server_error)
        data = k.encode_response(header.api_key, header.api_version, header.correlation_id,
                                 k.response(header.api_key, header.api_version, value))
        assert int.from_bytes(data[:4], "big") == len(data) - 4


# ---------------------------------------------------------------- inter-node messages
def strategy_for(t: typing.Any) -> st.SearchStrategy:
    if t is int:
        return st.integers(-(2**63), 2**63 - 1)
    if t is bool:
        return st.booleans()
    if t is str:
        return st.text(max_size=10)
    if t is bytes:
        return st.binary(max_size=64)
    if t is ErrorCode:
        return st.sampled_from(list(ErrorCode))
    if t is m.TopicPartition:
        return st.builds(m.TopicPartition, st.text(max_size=8), st.integers(-(2**31), 2**31 - 1))
    origin, args = typing.get_origin(t), typing.get_args(t)
    if origin in (UnionType, typing.Union):
        members = [a for a in args if a is not NoneType]
        s = st.one_of(*[strategy_for(a) for a in members])
        return st.none() | s if NoneType in args else s
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return st.lists(strategy_for(args[0]), max_size=3).map(tuple)
        return st.tuples(*[strategy_for(a) for a in args])
    if dataclasses.is_dataclass(t):
        hints = typing.get_type_hints(t)
        kw = {}
        for f in dataclasses.fields(t):
            hint = internal._OVERRIDES.get((t, f.name), hints[f.name])
            kw[f.name] = strategy_for(hint)
        return st.builds(t, **kw)
    if t is RaftEntry:
        return st.builds(RaftEntry, strategy_for(int), strategy_for(MetadataRecord))
    raise TypeError(t)


MESSAGES = st.one_of(*[strategy_for(c) for c in internal.MESSAGES])


@FUZZ
@given(MESSAGES)
def test_inter_node_messages_round_trip(msg):
    data = internal.encode_message(msg)
    assert int.from_bytes(data[:4], "big") == len(data) - 4
    kind, back = internal.decode_frame(data[4:])
    assert kind == internal.KIND_MESSAGE and back == msg


@FUZZ
@given(st.binary(max_size=200))
def test_random_inter_node_frames_only_raise_decode_errors(data):
    try:
        internal.decode_frame(internal.PREFIX + data)
    except internal.DecodeError:
        pass


@st.composite
def mutated_internal(draw):
    msg = draw(MESSAGES)
    base = internal.encode_message(msg)[4:]
    return draw(mutated(samples=[base]))


@FUZZ
@given(mutated_internal())
def test_mutated_inter_node_frames_decode_to_valid_messages_or_fail_cleanly(data):
    try:
        kind, value = internal.decode_frame(data)
    except internal.DecodeError:
        return
    if kind == internal.KIND_MESSAGE:
        internal.encode_message(value)  # whatever decodes has well-typed fields


def test_messages_that_cannot_travel_are_refused_at_encoding():
    import pytest

    with pytest.raises(TypeError):
        internal.encode_message(m.CheckpointHighWatermarks({}))
    with pytest.raises(TypeError):
        internal.encode_message(m.FetchRequest(1, "x", 1, ()))  # type: ignore[arg-type]
    assert set(typing.get_args(md.MetadataRecord)) == set(internal.RECORDS)


# ---------------------------------------------------------------- framing
@FUZZ
@given(st.lists(st.binary(max_size=300), max_size=8), st.lists(st.integers(1, 97), min_size=1, max_size=30))
def test_frame_reader_reassembles_any_chunking(frames, cuts):
    stream = b"".join(frame(f) for f in frames)
    r = FrameReader(1000)
    got, pos, i = [], 0, 0
    while pos < len(stream):
        step = cuts[i % len(cuts)]
        got += [bytes(x) for x in r.feed(stream[pos : pos + step])]
        pos += step
        i += 1
    assert got == frames and r.buffered == 0


@FUZZ
@given(st.integers(-(2**31), -1) | st.integers(1001, 2**31 - 1), st.binary(max_size=10))
def test_frame_reader_refuses_negative_and_oversize_frames(size, rest):
    r = FrameReader(1000)
    try:
        r.feed(size.to_bytes(4, "big", signed=True) + rest)
    except FrameError:
        return
    raise AssertionError("accepted a bad size")
