"""Topic configs honoured by a real `wrack-broker` process, through real clients
(issue 16): CreateTopics with the configs Kafka users set, then compaction, retention,
DeleteRecords, LogAppendTime, recompression, max.message.bytes and keyless records on a
compacted topic, as confluent-kafka (librdkafka) and kafka-python see them; and on a
three-broker cluster, followers following the leader's log start offset."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")

from confluent_kafka import Consumer, KafkaError, Producer  # noqa: E402
from confluent_kafka import TopicPartition as CkTP  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from broker.wire import kafka as wire  # noqa: E402
from broker.wire.client import RawClient  # noqa: E402
from tests.broker.broker_procs import start_cluster, wait_until  # noqa: E402

ROOT = str(Path(__file__).resolve().parents[2])
FAST_PASSES = {"log.retention.check.interval.ms": "200", "log.flush.start.offset.checkpoint.interval.ms": "200"}


def create(admin: AdminClient, topic: str, configs: dict[str, str], partitions: int = 1, rf: int = 1) -> None:
    for f in admin.create_topics([NewTopic(topic, partitions, rf, config=configs)], operation_timeout=10).values():
        f.result(15)


def produce(bs: str, topic: str, items: list[tuple[bytes | None, bytes | None]], **conf: object) -> list:
    """(key, value) pairs to partition 0; the delivered messages (or their errors)."""
    out: list = []
    p = Producer({"bootstrap.servers": bs, "linger.ms": 5, "enable.idempotence": False, **conf})
    for k, v in items:
        p.produce(topic, v, k, partition=0, on_delivery=lambda err, msg: out.append(err if err is not None else msg))
    assert p.flush(30) == 0
    return out


def consume_all(bs: str, topic: str, start: int = 0, idle: float = 2.0) -> list:
    c = Consumer({"bootstrap.servers": bs, "group.id": "reader", "enable.auto.commit": False,
                  "auto.offset.reset": "earliest"})
    c.assign([CkTP(topic, 0, start)])
    got, last = [], time.monotonic()
    while time.monotonic() - last < idle:
        for m in c.consume(500, 0.3):
            assert m.error() is None, m.error()
            got.append(m)
            last = time.monotonic()
    c.close()
    return got


def watermarks(bs: str, topic: str) -> tuple[int, int]:
    c = Consumer({"bootstrap.servers": bs, "group.id": "wm"})
    try:
        return c.get_watermark_offsets(CkTP(topic, 0), timeout=10)
    finally:
        c.close()


def test_topic_configs_are_honoured_through_librdkafka(fleet):
    b = fleet.single(extra=FAST_PASSES)
    b.env["PYTHONPATH"] = ROOT  # this checkout's broker
    b.start()
    bs = b.bootstrap
    admin = AdminClient({"bootstrap.servers": bs})
    create(admin, "compacted", {"cleanup.policy": "compact", "segment.bytes": "1024", "delete.retention.ms": "0"})
    create(admin, "retained", {"retention.bytes": "2048", "segment.bytes": "1024"})
    create(admin, "stamped", {"message.timestamp.type": "LogAppendTime", "compression.type": "gzip"})
    create(admin, "small", {"max.message.bytes": "1000"})

    # compaction: the latest value of every key stays at its offset; keyless records are refused
    items = [(f"k{i % 10}".encode(), f"v{i}".encode()) for i in range(300)]
    delivered = produce(bs, "compacted", items, **{"batch.num.messages": 7})
    offsets = {m.key(): m.offset() for m in delivered}
    (err,) = produce(bs, "compacted", [(None, b"no key")])
    assert isinstance(err, KafkaError) and err.code() == KafkaError.INVALID_RECORD
    got = wait_until(lambda: (lambda ms: ms if len(ms) < 150 else None)(consume_all(bs, "compacted")), 30,
                     "the compacted topic reads back compacted")
    latest = {m.key(): (m.offset(), m.value()) for m in got}
    assert latest == {f"k{k}".encode(): (offsets[f"k{k}".encode()], f"v{290 + k}".encode()) for k in range(10)}
    assert [m.offset() for m in got] == sorted({m.offset() for m in got})

    # retention.bytes: whole old segments go, the log start moves, earliest answers it
    produce(bs, "retained", [(None, b"x" * 100) for _ in range(100)], **{"batch.num.messages": 5})
    low = wait_until(lambda: watermarks(bs, "retained")[0], 30, "retention moved the log start")
    assert watermarks(bs, "retained")[1] == 100
    rest = consume_all(bs, "retained")  # offset 0 is out of range: the consumer resets to earliest
    assert rest[0].offset() == low and rest[-1].offset() == 99

    # LogAppendTime + recompression: the broker's time, whatever the producer said
    before = int(time.time() * 1000)
    (m,) = produce(bs, "stamped", [(b"k", b"v" * 100)], **{"compression.type": "none"})
    ts_type, ts = m.timestamp()
    assert ts_type == confluent_kafka.TIMESTAMP_LOG_APPEND_TIME and before - 1000 <= ts <= int(time.time() * 1000) + 1000
    (r,) = consume_all(bs, "stamped", idle=1.0)
    assert r.timestamp() == (confluent_kafka.TIMESTAMP_LOG_APPEND_TIME, ts) and r.value() == b"v" * 100

    # max.message.bytes per topic
    (err,) = produce(bs, "small", [(None, b"y" * 2000)])
    assert isinstance(err, KafkaError) and err.code() == KafkaError.MSG_SIZE_TOO_LARGE
    assert not isinstance(produce(bs, "small", [(None, b"y" * 500)])[0], KafkaError)

    # DeleteRecords: the log start moves; beyond the high watermark is out of range
    (f,) = admin.delete_records([CkTP("retained", 0, 95)]).values()
    assert f.result(15).low_watermark == 95
    assert watermarks(bs, "retained")[0] == 95
    (f,) = admin.delete_records([CkTP("retained", 0, 500)]).values()
    with pytest.raises(confluent_kafka.KafkaException, match="OFFSET_OUT_OF_RANGE"):
        f.result(15)
    (f,) = admin.delete_records([CkTP("compacted", 0, 1)]).values()
    with pytest.raises(confluent_kafka.KafkaException, match="POLICY_VIOLATION"):
        f.result(15)

    # the configs survive a restart (they live in the metadata log)
    assert b.terminate() == 0
    b.start()
    assert watermarks(bs, "retained")[0] == 95
    (err,) = produce(bs, "compacted", [(None, b"still no key")])
    assert isinstance(err, KafkaError) and err.code() == KafkaError.INVALID_RECORD


def test_kafka_python_reads_a_compacted_log_and_deletes_records(fleet):
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import NewTopic as KpNewTopic

    b = fleet.single(extra=FAST_PASSES)
    b.env["PYTHONPATH"] = ROOT
    b.start()
    bs = b.bootstrap
    admin = KafkaAdminClient(bootstrap_servers=bs, request_timeout_ms=15000)
    admin.create_topics([KpNewTopic("zipped", 1, 1, topic_configs={
        "compression.type": "zstd", "cleanup.policy": "compact,delete", "segment.bytes": "1024"})], timeout_ms=10000)
    p = KafkaProducer(bootstrap_servers=bs, linger_ms=0, compression_type="gzip")
    for i in range(40):  # one batch each: compaction empties whole batches and thins others
        p.send("zipped", f"v{i}".encode(), key=f"k{i % 2}".encode(), partition=0).get(10)
    p.close(5)
    tp = TopicPartition("zipped", 0)

    def read() -> list:
        c = KafkaConsumer(bootstrap_servers=bs, enable_auto_commit=False, consumer_timeout_ms=1500)
        c.assign([tp])
        c.seek_to_beginning()
        got = [(m.offset, m.key, m.value) for m in c]
        c.close()
        return got

    got = wait_until(lambda: (lambda g: g if len(g) < 40 else None)(read()), 30, "kafka-python reads the compacted log")
    assert [o for o, _, _ in got] == sorted({o for o, _, _ in got}) and got[-2:] == [
        (38, b"k0", b"v38"), (39, b"k1", b"v39")]
    assert {k: (o, v) for o, k, v in got} == {b"k0": (38, b"v38"), b"k1": (39, b"v39")}
    assert admin.delete_records({tp: 39})[tp]["low_watermark"] == 39
    assert read() == [(39, b"k1", b"v39")]
    c = KafkaConsumer(bootstrap_servers=bs, enable_auto_commit=False)
    assert c.beginning_offsets([tp]) == {tp: 39}
    c.close()
    admin.close()


def log_start_checkpoint(data_dir: str, topic: str) -> int | None:
    """The log start offset a broker checkpointed for `<topic>-0` (None: not there yet)."""
    try:
        lines = Path(data_dir, "log-start-offset-checkpoint").read_text().split("\n")
    except OSError:
        return None
    for line in lines[2:]:
        parts = line.split()
        if len(parts) == 3 and parts[0] == topic and parts[1] == "0":
            return int(parts[2])
    return None


def test_followers_follow_the_leaders_log_start_offset(fleet):
    env = {"PYTHONPATH": ROOT}
    ctl, brokers, bs, admin = start_cluster_with_env(fleet, env, **FAST_PASSES)
    create(admin, "shared", {"segment.bytes": "1024"}, rf=3)
    produce(bs, "shared", [(None, b"z" * 100) for _ in range(60)], acks="all", **{"batch.num.messages": 5})
    # ListOffsets from Kafka's debug replica id -2: every replica answers its log end offset
    wait_until(lambda: [list_offset(b, "shared", -2) for b in brokers] == [60, 60, 60], 20, "every replica's log end")
    assert sorted(list_offset(b, "shared", -1) for b in brokers) == [-1, -1, 60]  # a consumer's: the leader only
    (f,) = admin.delete_records([CkTP("shared", 0, 40)]).values()
    assert f.result(15).low_watermark == 40
    wait_until(lambda: all(log_start_checkpoint(b.data_dir, "shared") == 40 for b in brokers), 30,
               "every replica's log start offset is 40")

    def first_bases() -> dict[str, list[int]]:
        out = {}
        for b in brokers:
            files = sorted(os.listdir(Path(b.data_dir, "shared-0")))
            out[b.name] = [int(n.split(".")[0]) for n in files if n.endswith(".log")]
        return out

    # segments wholly below the log start are deleted on every replica, at its next retention
    # pass (it may come after the checkpoint showed the new start). A follower's segments need
    # not be the leader's: it appends each fetched chunk to one segment, rolling only before it
    # (as Kafka's appendAsFollower), so one that fetched everything at once has a single segment
    def nothing_wholly_below(bases: list[int]) -> bool:
        return bool(bases) and bases[0] <= 40 and (len(bases) == 1 or bases[1] > 40)

    try:
        wait_until(lambda: all(nothing_wholly_below(b) for b in first_bases().values()), 30,
                   "segments below the log start deleted on every replica")
    except AssertionError as e:
        raise AssertionError(f"{e}: {first_bases()}") from None


def list_offset(b, topic: str, replica_id: int) -> int:
    """ListOffsets latest of partition 0 asked of broker `b` (-1 on an error answer)."""
    with RawClient(b.host, b.port) as c:
        r = c.call(wire.LIST_OFFSETS, 7, {"replica_id": replica_id, "isolation_level": 0, "topics": [
            {"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]})
    p = r.topics[0].partitions[0]
    return int(p.offset) if p.error_code.value == 0 else -1


def start_cluster_with_env(fleet, env, **extra):
    """`start_cluster` with `env` given to every process (this checkout's broker)."""
    orig = fleet.add

    def add(*a, **kw):
        kw["env"] = {**env, **(kw.get("env") or {})}
        return orig(*a, **kw)

    fleet.add = add
    try:
        return start_cluster(fleet, **extra)
    finally:
        fleet.add = orig
