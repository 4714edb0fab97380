"""The hand-written Fetch response encoder writes exactly what kio writes, in every
version the broker serves."""

from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from broker.wire import kafka as k
from broker.wire.fetch_codec import NodeEndpoint, PartitionData, TopicData, encode_fetch_response

partitions = st.builds(
    PartitionData,
    st.integers(0, 2**31 - 1),
    st.sampled_from([0, 1, 3, 6, 74]),
    st.integers(-1, 2**62),
    st.integers(-1, 2**62),
    st.integers(-1, 2**62),
    st.none() | st.binary(max_size=300),
    st.none() | st.tuples(st.integers(0, 2**31 - 1), st.integers(0, 2**62)),
    st.none() | st.lists(st.tuples(st.integers(0, 2**62), st.integers(0, 2**62)), max_size=3),
    st.none() | st.tuples(st.integers(0, 2**31 - 1), st.integers(0, 2**31 - 1)),
)
topics = st.builds(TopicData, st.text(max_size=20), st.uuids(), st.lists(partitions, max_size=3))
endpoints = st.lists(st.builds(NodeEndpoint, st.integers(0, 2**31 - 1), st.text(max_size=20), st.integers(0, 65535),
                               st.none() | st.text(max_size=5)), max_size=3)


def kio_bytes(version: int, cid: int, error: int, ts: list[TopicData], nodes: list[NodeEndpoint] = ()) -> bytes:
    value = {"throttle_time": 0, "error_code": ErrorCode(error), "session_id": 0, "responses": [
        {"topic": t.name, "topic_id": t.topic_id, "partitions": [
            {"partition_index": p.index, "error_code": ErrorCode(p.error_code), "high_watermark": p.high_watermark,
             "last_stable_offset": p.last_stable_offset, "log_start_offset": p.log_start_offset,
             "aborted_transactions": None if p.aborted is None else [
                 {"producer_id": pid, "first_offset": first} for pid, first in p.aborted],
             "preferred_read_replica": -1, "records": p.records,
             **({"diverging_epoch": {"epoch": p.diverging[0], "end_offset": p.diverging[1]}}
                if p.diverging is not None and version >= 12 else {}),
             **({"current_leader": {"leader_id": p.current_leader[0], "leader_epoch": p.current_leader[1]}}
                if p.current_leader is not None and version >= 12 else {})}
            for p in t.partitions]} for t in ts],
        "node_endpoints": [{"node_id": n.node_id, "host": n.host, "port": n.port, "rack": n.rack} for n in nodes]}
    return k.encode_response(k.FETCH, version, cid, k.response(k.FETCH, version, value))


@settings(max_examples=300, deadline=None)
@given(st.integers(4, 16), st.integers(-(2**31), 2**31 - 1), st.sampled_from([0, 35]), st.lists(topics, max_size=3),
       endpoints)
def test_same_bytes_as_kio(version, cid, error, ts, nodes):
    if version < 12:
        ts = [t._replace(partitions=[p._replace(diverging=None, current_leader=None) for p in t.partitions]) for t in ts]
    if version < 16:
        nodes = []
    assert encode_fetch_response(version, cid, error, ts, node_endpoints=nodes) == kio_bytes(version, cid, error, ts, nodes)


def test_a_big_records_payload_is_written_once():
    recs = b"r" * (1 << 20)
    out = encode_fetch_response(12, 1, 0, [TopicData("t", uuid.uuid4(), [PartitionData(0, 0, 5, 5, 0, recs)])])
    assert out.endswith(recs + b"\x00\x00\x00") and int.from_bytes(out[:4], "big") == len(out) - 4
