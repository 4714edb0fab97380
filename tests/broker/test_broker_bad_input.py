"""Bad input to a running broker: the right Kafka error code, or a closed connection for
broken framing; the broker never crashes and other clients are unaffected."""

from __future__ import annotations

import struct

import pytest
from broker_procs import BrokerFleet
from kio.schema.errors import ErrorCode as E

from broker.records import encode_batch
from broker.wire import kafka as k
from broker.wire.client import RawClient, encode_request, request

MAX_REQUEST = 300_000
MAX_MESSAGE = 100_000


@pytest.fixture(scope="module")
def broker():
    with BrokerFleet() as fleet:
        b = fleet.single(extra={"socket.request.max.bytes": str(MAX_REQUEST), "message.max.bytes": str(MAX_MESSAGE),
                                "auto.create.topics.enable": "false"}).start()
        with RawClient(b.host, b.port) as c:
            r = c.call(k.CREATE_TOPICS, 7, {"topics": [{"name": "t", "num_partitions": 2, "replication_factor": 1,
                                                        "assignments": [], "configs": []}], "timeout": 10000})
            assert r.topics[0].error_code is E.none
        yield b
        assert b.running, fleet.logs()
        assert "Traceback" not in b.log_text(), b.log_text()[-5000:]


@pytest.fixture
def client(broker):
    with RawClient(broker.host, broker.port) as c:
        yield c


def healthy(broker, topic: str = "t") -> None:
    """Another client still gets metadata, produces and fetches (on `topic`, 2 partitions)."""
    with RawClient(broker.host, broker.port) as c:
        md = c.call(k.METADATA, 12, {"topics": [{"name": topic}], "allow_auto_topic_creation": False,
                                     "include_topic_authorized_operations": False})
        assert md.topics[0].error_code is E.none and len(md.topics[0].partitions) == 2
        pr = produce(c, topic, 1, encode_batch([b"ok"]), acks=1)
        assert pr.error_code is E.none
        fr = fetch(c, topic, 1, pr.base_offset)
        assert fr.error_code is E.none and fr.records


def produce(c: RawClient, topic: str, partition: int, records: bytes | None, acks: int = 1, version: int = 9):
    r = c.call(k.PRODUCE, version, {"acks": acks, "timeout": 5000, "topic_data": [
        {"name": topic, "partition_data": [{"index": partition, "records": records}]}]})
    return r.responses[0].partition_responses[0]


def fetch(c: RawClient, topic: str, partition: int, offset: int, epoch: int = -1):
    r = c.call(k.FETCH, 12, {"max_wait": 0, "min_bytes": 1, "topics": [{"topic": topic, "partitions": [
        {"partition": partition, "fetch_offset": offset, "partition_max_bytes": 1 << 20, "current_leader_epoch": epoch}]}],
        "forgotten_topics_data": []})
    return r.responses[0].partitions[0]


def closed(c: RawClient, timeout: float = 5.0) -> bool:
    c.sock.settimeout(timeout)
    try:
        return c.sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def test_api_versions_at_an_unknown_version_answers_v0_with_the_supported_list(broker, client):
    client.send_raw(encode_request(k.API_VERSIONS, 0, 41, request(k.API_VERSIONS, 0, {})).replace(
        struct.pack(">hh", k.API_VERSIONS, 0), struct.pack(">hh", k.API_VERSIONS, 9), 1))
    cid, body = client.recv(k.API_VERSIONS, 0)
    assert cid == 41 and body.error_code is E.unsupported_version
    assert {a.api_key: (a.min_version, a.max_version) for a in body.api_keys} == k.SUPPORTED
    assert client.call(k.API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"}).error_code is E.none


def test_a_version_beyond_ours_gets_unsupported_version_in_that_version(broker, client):
    body = client.call(k.FETCH, 17, {"max_wait": 0, "min_bytes": 1, "topics": [], "forgotten_topics_data": []})
    assert body.error_code is E.unsupported_version
    md = client.call(k.METADATA, 13, {"topics": [{"name": "t"}], "allow_auto_topic_creation": False,
                                      "include_topic_authorized_operations": False})
    assert md.topics[0].error_code is E.unsupported_version
    healthy(broker)


@pytest.mark.parametrize("frame", [
    struct.pack(">i", -5),
    struct.pack(">i", MAX_REQUEST + 1),
    struct.pack(">ihhi", 8, 999, 0, 1),  # unknown API key
    struct.pack(">ihhih", 10, k.METADATA, 12, 1, 0) + b"\x07\x07",  # body that does not decode
    struct.pack(">i", 3) + b"abc",  # shorter than a request header
])
def test_broken_framing_and_undecodable_requests_close_the_connection(broker, client, frame):
    client.send_raw(frame)
    assert closed(client)
    healthy(broker)


def test_produce_errors(broker, client):
    good = encode_batch([b"a", b"b"])
    corrupt = bytearray(good)
    corrupt[-1] ^= 0xFF
    old_magic = bytearray(good)
    old_magic[16] = 1
    assert produce(client, "t", 0, bytes(corrupt)).error_code is E.corrupt_message
    assert produce(client, "t", 0, bytes(old_magic)).error_code is E.unsupported_for_message_format
    assert produce(client, "t", 0, good + good).error_code is E.invalid_record  # v3+: one batch per partition
    assert produce(client, "t", 0, good[:30]).error_code is E.corrupt_message
    assert produce(client, "t", 0, encode_batch([b"x" * MAX_MESSAGE])).error_code is E.message_too_large
    assert produce(client, "t", 0, None).error_code is E.invalid_record
    assert produce(client, "nope", 0, good).error_code is E.unknown_topic_or_partition
    assert produce(client, "t", 7, good).error_code is E.unknown_topic_or_partition
    assert produce(client, "t", 0, good, acks=2).error_code is E.invalid_required_acks
    ok = produce(client, "t", 0, good, acks=-1)
    assert ok.error_code is E.none and ok.base_offset >= 0
    healthy(broker)


def test_an_acks_0_produce_that_fails_closes_the_connection(broker, client):
    client.send(k.PRODUCE, 9, {"acks": 0, "timeout": 5000, "topic_data": [
        {"name": "nope", "partition_data": [{"index": 0, "records": encode_batch([b"v"])}]}]})
    assert closed(client)
    healthy(broker)


def test_fetch_by_topic_id(broker, client):
    import uuid

    md = client.call(k.METADATA, 12, {"topics": [{"name": "t"}], "allow_auto_topic_creation": False,
                                      "include_topic_authorized_operations": False})
    tid = md.topics[0].topic_id
    assert tid is not None and tid.int != 0
    produce(client, "t", 0, encode_batch([b"by-id"]), acks=1)
    r = client.call(k.FETCH, 15, {"max_wait": 0, "min_bytes": 1, "topics": [
        {"topic_id": tid, "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]},
        {"topic_id": uuid.uuid4(), "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}],
        "forgotten_topics_data": []})
    assert r.responses[0].topic_id == tid and r.responses[0].partitions[0].error_code is E.none
    assert r.responses[0].partitions[0].records
    assert r.responses[1].partitions[0].error_code is E.unknown_topic_id


def test_fetch_and_list_offsets_errors(broker, client):
    assert fetch(client, "nope", 0, 0).error_code is E.unknown_topic_or_partition
    assert fetch(client, "t", 0, 10**9).error_code is E.offset_out_of_range
    assert fetch(client, "t", 0, 0, epoch=99).error_code is E.unknown_leader_epoch
    r = client.call(k.LIST_OFFSETS, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": "t", "partitions": [{"partition_index": 0, "timestamp": -1}, {"partition_index": 9, "timestamp": -1},
                                     {"partition_index": 1, "timestamp": -7}]}]})
    errs = [p.error_code for p in r.topics[0].partitions]
    assert errs == [E.none, E.unknown_topic_or_partition, E.invalid_request]
    r = client.call(k.OFFSET_FOR_LEADER_EPOCH, 4, {"replica_id": -1, "topics": [
        {"topic": "t", "partitions": [{"partition": 0, "leader_epoch": 0}, {"partition": 5, "leader_epoch": 0}]}]})
    assert [p.error_code for p in r.topics[0].partitions] == [E.none, E.unknown_topic_or_partition]
    healthy(broker)


def test_create_topics_validation(broker, client):
    r = client.call(k.CREATE_TOPICS, 7, {"timeout": 10000, "topics": [
        {"name": "bad name!", "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []},
        {"name": "t", "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []},
        {"name": "rf9", "num_partitions": 1, "replication_factor": 9, "assignments": [], "configs": []},
        {"name": "cfg", "num_partitions": 1, "replication_factor": 1, "assignments": [],
         "configs": [{"name": "no.such.config", "value": "1"}]},
        {"name": "zero", "num_partitions": 0, "replication_factor": 1, "assignments": [], "configs": []},
    ]})
    assert [t.error_code for t in r.topics] == [E.invalid_topic_exception, E.topic_already_exists,
                                                E.invalid_replication_factor, E.invalid_config, E.invalid_partitions]
    healthy(broker)


def test_many_pipelined_requests_are_answered_in_order(broker, client):
    n = 200
    for _ in range(n):
        client.send(k.METADATA, 12, {"topics": [{"name": "t"}], "allow_auto_topic_creation": False,
                                     "include_topic_authorized_operations": False})
        client.send(k.PRODUCE, 9, {"acks": 1, "timeout": 5000, "topic_data": [
            {"name": "t", "partition_data": [{"index": 0, "records": encode_batch([b"p"])}]}]})
    seen = []
    offsets = []
    for i in range(2 * n):
        api = k.METADATA if i % 2 == 0 else k.PRODUCE
        cid, body = client.recv(api, 12 if api == k.METADATA else 9)
        seen.append(cid)
        if api == k.PRODUCE:
            offsets.append(body.responses[0].partition_responses[0].base_offset)
    assert seen == list(range(1, 2 * n + 1))
    assert offsets == sorted(offsets) and len(set(offsets)) == n
