"""broker/records.py: the v2 record batch codec (hypothesis properties, kafka-python parity)."""

from __future__ import annotations

import struct

import crc32c
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from broker.records import (
    CRC_START,
    HEADER_SIZE,
    BatchError,
    decode_records,
    decode_values,
    encode_batch,
    iter_batches,
    parse_header,
    split_batches,
    stamped,
    validate_for_append,
)

values_st = st.lists(st.one_of(st.none(), st.binary(max_size=40)), min_size=1, max_size=12)
simple_values = st.lists(st.binary(max_size=30), min_size=1, max_size=6)


@st.composite
def batches(draw, compression=st.sampled_from([None, "gzip"])):
    values = draw(values_st)
    n = len(values)
    keys = draw(st.lists(st.one_of(st.none(), st.binary(max_size=10)), min_size=n, max_size=n))
    base_ts = draw(st.integers(0, 2**41))
    timestamps = [base_ts + d for d in draw(st.lists(st.integers(-1000, 1000), min_size=n, max_size=n))]
    headers = draw(
        st.lists(
            st.lists(st.tuples(st.text(max_size=5), st.one_of(st.none(), st.binary(max_size=5))), max_size=2),
            min_size=n,
            max_size=n,
        )
    )
    return dict(values=values, keys=keys, timestamps=timestamps, headers=headers, compression=draw(compression))


@given(batches(), st.integers(0, 2**40), st.integers(-1, 2**31 - 1))
def test_encode_decode_round_trip(spec, base_offset, epoch):
    b = encode_batch(
        spec["values"], spec["keys"], base_offset=base_offset, leader_epoch=epoch, compression=spec["compression"],
        timestamps=spec["timestamps"], headers=spec["headers"],
    )
    h = parse_header(b)
    assert (h.base_offset, h.partition_leader_epoch, h.magic, h.records_count) == (base_offset, epoch, 2, len(spec["values"]))
    assert h.size == len(b) and h.last_offset == base_offset + len(spec["values"]) - 1
    assert h.max_timestamp == max(spec["timestamps"]) and h.base_timestamp == spec["timestamps"][0]
    recs = decode_records(b)
    assert [r.value for r in recs] == spec["values"] == decode_values(b)
    assert [r.key for r in recs] == spec["keys"]
    assert [r.timestamp for r in recs] == spec["timestamps"]
    assert [r.offset for r in recs] == list(range(base_offset, base_offset + len(recs)))
    assert [list(r.headers) for r in recs] == [list(x) for x in spec["headers"]]
    assert [(s, e) for s, e, _ in iter_batches(b + b)] == [(0, len(b)), (len(b), 2 * len(b))]


@given(simple_values, st.sampled_from([None, "gzip"]), st.integers(0, 2**62), st.integers(0, 2**31 - 1))
def test_stamping_keeps_the_crc_valid(values, compression, base_offset, epoch):
    b = stamped(encode_batch(values, compression=compression), base_offset, epoch)
    (_, _, h), = iter_batches(b)  # validates the CRC
    assert (h.base_offset, h.partition_leader_epoch) == (base_offset, epoch)
    assert decode_records(b)[0].offset == base_offset


def test_byte_identical_to_kafka_python():
    from kafka.record.default_records import DefaultRecordBatchBuilder
    from kafka.record.memory_records import MemoryRecords

    kb = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                   producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    kb.append(0, timestamp=1700000000000, key=b"k", value=b"v1", headers=[("h", b"x")])
    kb.append(1, timestamp=1700000000005, key=None, value=None, headers=[])
    theirs = bytearray(kb.build())
    struct.pack_into(">i", theirs, 12, -1)  # kafka-python leaves the leader epoch at 0; the CRC does not cover it
    ours = encode_batch([b"v1", None], [b"k", None], timestamps=[1700000000000, 1700000000005], headers=[[("h", b"x")], []])
    assert bytes(theirs) == ours
    batch = MemoryRecords(encode_batch([b"a", b"b"], compression="gzip", timestamp=7)).next_batch()
    assert batch.validate_crc() and [(r.offset, r.value, r.timestamp) for r in batch] == [(0, b"a", 7), (1, b"b", 7)]


@settings(suppress_health_check=[HealthCheck.too_slow], max_examples=300)
@given(simple_values, st.sampled_from([None, "gzip"]), st.integers(0, 2**41), st.data())
def test_any_single_byte_change_in_the_crc_region_is_detected(values, compression, ts, data):
    b = bytearray(encode_batch(values, compression=compression, timestamp=ts))
    i = data.draw(st.integers(CRC_START, len(b) - 1), label="position")
    b[i] ^= data.draw(st.integers(1, 255), label="xor")
    with pytest.raises(BatchError) as e:
        list(iter_batches(bytes(b)))
    assert e.value.error_code == ErrorCode.corrupt_message and e.value.position == 0
    with pytest.raises(BatchError):
        validate_for_append(bytes(b), 1 << 20)


@given(simple_values, st.data())
def test_a_changed_crc_field_or_magic_is_detected(values, data):
    b = bytearray(encode_batch(values))
    i = data.draw(st.sampled_from([16, 17, 18, 19, 20]))
    b[i] ^= data.draw(st.integers(1, 255))
    with pytest.raises(BatchError):
        list(iter_batches(bytes(b)))


@settings(max_examples=200)
@given(st.lists(simple_values, min_size=1, max_size=5), st.data())
def test_iter_batches_over_concatenations_and_truncations(specs, data):
    parts = [encode_batch(v) for v in specs]
    buf = b"".join(parts)
    cut = data.draw(st.integers(0, len(buf)), label="cut")
    bounds, pos = [], 0
    for p in parts:
        bounds.append((pos, pos + len(p)))
        pos += len(p)
    whole = [bd for bd in bounds if bd[1] <= cut]
    got = []
    try:
        for s, e, _h in iter_batches(buf[:cut]):
            got.append((s, e))
    except BatchError as e:
        assert cut not in {0, *[bd[1] for bd in bounds]}
        assert e.position == (whole[-1][1] if whole else 0)
        assert e.error_code == ErrorCode.corrupt_message
    else:
        assert cut in {0, *[bd[1] for bd in bounds]}
    assert got == whole


@given(st.binary(max_size=300), st.booleans())
def test_iter_batches_on_garbage_only_raises_batch_error(junk, validate):
    try:
        for s, e, _ in iter_batches(junk, validate=validate):
            assert 0 <= s < e <= len(junk)
    except BatchError:
        pass


def test_validate_for_append_error_codes():
    good = encode_batch([b"a", b"b"])
    assert [h.records_count for h in validate_for_append(good + good, 1000)] == [2, 2]
    cases = {
        b"": ErrorCode.invalid_record,
        good[:30]: ErrorCode.corrupt_message,
        good[:-1]: ErrorCode.corrupt_message,
        stamped(good, 5): ErrorCode.invalid_record,  # a producer's base offset is 0
    }
    legacy = bytearray(good)
    legacy[16] = 1
    cases[bytes(legacy)] = ErrorCode.unsupported_for_message_format
    bad_crc = bytearray(good)
    bad_crc[-1] ^= 1
    cases[bytes(bad_crc)] = ErrorCode.corrupt_message
    for buf, code in cases.items():
        with pytest.raises(BatchError) as e:
            validate_for_append(buf, 1000)
        assert e.value.error_code == code, (buf, e.value)
    with pytest.raises(BatchError) as e:
        validate_for_append(good, len(good) - 1)
    assert e.value.error_code == ErrorCode.message_too_large and "message.max.bytes" in str(e.value)
    for attrs, code in ((0x07, ErrorCode.unsupported_compression_type), (0x20, ErrorCode.invalid_record)):
        b = bytearray(good)
        struct.pack_into(">h", b, 21, attrs)
        struct.pack_into(">I", b, 17, crc32c.crc32c(bytes(b[CRC_START:])))
        with pytest.raises(BatchError) as e:
            validate_for_append(bytes(b), 1000)
        assert e.value.error_code == code
    b = bytearray(good)
    struct.pack_into(">i", b, 57, 3)  # records count != last offset delta + 1
    struct.pack_into(">I", b, 17, crc32c.crc32c(bytes(b[CRC_START:])))
    with pytest.raises(BatchError, match="records count 3 and last offset delta 1") as e:
        validate_for_append(bytes(b), 1000)
    assert e.value.error_code == ErrorCode.invalid_record


def test_split_batches_and_errors_name_the_position():
    b = encode_batch([b"x"])
    assert split_batches(b + b) == [b, b]
    with pytest.raises(BatchError, match=f"truncated batch header at byte {len(b)}"):
        split_batches(b + b[:HEADER_SIZE - 1])
    with pytest.raises(BatchError, match=f"truncated batch at byte {len(b)}"):
        split_batches(b + b[:-1])
