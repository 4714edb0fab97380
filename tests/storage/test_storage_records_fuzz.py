"""Fuzzing the batch parsers (hypothesis): random bytes and mutated valid batches, as a
Produce request or a follower fetch would carry them. Only BatchError may come out, and
every call ends."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.records import (
    HEADER_SIZE,
    BatchError,
    decode_records,
    decode_values,
    encode_batch,
    iter_batches,
    split_batches,
    validate_for_append,
)

SEEDS = [
    encode_batch([b"a" * 10, b"", None], [b"k", None, b"kk"], timestamp=1700000000000, headers=[[("h", b"v")], [], []]),
    encode_batch([b"x" * 50] * 4, compression="gzip", timestamp=5),
    encode_batch([b"v"]),
]


def _parse_everything(buf: bytes) -> None:
    for validate in (True, False):
        try:
            for s, e, h in iter_batches(buf, validate=validate):
                assert 0 <= s < e <= len(buf) and h.size == e - s
                try:
                    decode_records(buf[s:e], validate=validate)
                except BatchError:
                    pass
        except BatchError as e:
            assert 0 <= e.position <= len(buf)
    for fn in (lambda: validate_for_append(buf, 1 << 20), lambda: split_batches(buf), lambda: decode_values(buf),
               lambda: decode_records(buf, validate=False)):
        try:
            fn()
        except BatchError:
            pass


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=400))
def test_fuzz_random_bytes(buf):
    _parse_everything(buf)


@st.composite
def mutated(draw):
    buf = bytearray(b"".join(draw(st.lists(st.sampled_from(SEEDS), min_size=1, max_size=3))))
    for _ in range(draw(st.integers(1, 6))):
        op = draw(st.sampled_from(["flip", "set", "insert", "delete", "truncate"]))
        i = draw(st.integers(0, max(len(buf) - 1, 0)))
        if op == "flip" and buf:
            buf[i] ^= draw(st.integers(1, 255))
        elif op == "set" and len(buf) >= i + 4:
            buf[i : i + 4] = draw(st.sampled_from([b"\x7f\xff\xff\xff", b"\xff\xff\xff\xff", b"\x00\x00\x00\x00", b"\x80\x00\x00\x00"]))
        elif op == "insert":
            buf[i:i] = draw(st.binary(min_size=1, max_size=8))
        elif op == "delete" and buf:
            del buf[i : i + draw(st.integers(1, 8))]
        elif op == "truncate":
            del buf[i:]
    return bytes(buf)


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_fuzz_mutated_batches(buf):
    _parse_everything(buf)


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(min_size=HEADER_SIZE - 12, max_size=HEADER_SIZE + 60), st.sampled_from(SEEDS))
def test_fuzz_records_region_with_a_valid_header(junk, seed):
    """A batch whose header is fine but whose records are garbage (the CRC is not checked
    when decoding without validation): the record decoder must fail cleanly."""
    import struct

    b = bytearray(seed[:HEADER_SIZE]) + junk
    struct.pack_into(">i", b, 8, len(b) - 12)
    _parse_everything(bytes(b))
