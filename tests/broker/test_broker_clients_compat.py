"""Real clients against a real `wrack-broker` process on loopback: confluent-kafka
(librdkafka) and kafka-python create a topic, produce with acks 0, 1 and all, consume
from the beginning, list offsets (earliest, latest, by timestamp), commit and fetch
offsets, read the flush policy through DescribeConfigs; then SIGTERM (clean-shutdown
marker), restart, and everything is read again, offsets included."""

from __future__ import annotations

import time

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")
kafka = pytest.importorskip("kafka")

from confluent_kafka import Consumer, Producer  # noqa: E402
from confluent_kafka import TopicPartition as CkTP  # noqa: E402
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic  # noqa: E402


def ck_produce(bs: str, topic: str, partition: int, values: list[bytes], acks: str) -> list[int]:
    offsets: list[int] = []
    errors: list[object] = []

    def cb(err, msg):
        (errors.append(err) if err is not None else offsets.append(msg.offset()))

    p = Producer({"bootstrap.servers": bs, "acks": acks, "linger.ms": 2})
    for v in values:
        p.produce(topic, v, partition=partition, timestamp=int(time.time() * 1000), on_delivery=cb)
    assert p.flush(30) == 0
    assert errors == []
    return offsets


def ck_read_all(bs: str, topic: str, partition: int, n: int, group: str = "reader") -> list[tuple[int, bytes]]:
    c = Consumer({"bootstrap.servers": bs, "group.id": group, "enable.auto.commit": False})
    c.assign([CkTP(topic, partition, 0)])
    got: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + 30
    while len(got) < n and time.monotonic() < deadline:
        for m in c.consume(500, 0.5):
            assert m.error() is None, m.error()
            got.append((m.offset(), m.value()))
    c.close()
    return got


def test_confluent_kafka_end_to_end_with_restart(fleet):
    b = fleet.single(extra={"log.flush.interval.messages": "1"}).start()
    bs = b.bootstrap
    admin = AdminClient({"bootstrap.servers": bs})
    topic = "compat-ck"
    for f in admin.create_topics([NewTopic(topic, 2, 1)], operation_timeout=10).values():
        f.result(15)
    with pytest.raises(confluent_kafka.KafkaException, match="TOPIC_ALREADY_EXISTS"):
        for f in admin.create_topics([NewTopic(topic, 2, 1)]).values():
            f.result(15)
    md = admin.list_topics(topic, timeout=10)
    assert sorted(md.topics[topic].partitions) == [0, 1] and md.topics[topic].partitions[0].leader == 0

    t_before = int(time.time() * 1000)
    zero = ck_produce(bs, topic, 0, [f"zero-{i}".encode() for i in range(50)], "0")
    one = ck_produce(bs, topic, 0, [f"one-{i}".encode() for i in range(50)], "1")
    t_mid = int(time.time() * 1000) + 1
    time.sleep(0.05)
    alls = ck_produce(bs, topic, 0, [f"all-{i}".encode() for i in range(50)], "all")
    assert len(zero) == 50 and one == list(range(50, 100)) and alls == list(range(100, 150))
    want = [f"{k}-{i}".encode() for k in ("zero", "one", "all") for i in range(50)]

    got = ck_read_all(bs, topic, 0, 150)
    assert [o for o, _ in got] == list(range(150)) and [v for _, v in got] == want

    c = Consumer({"bootstrap.servers": bs, "group.id": "g1", "enable.auto.commit": False})
    assert c.get_watermark_offsets(CkTP(topic, 0), timeout=10) == (0, 150)
    assert c.get_watermark_offsets(CkTP(topic, 1), timeout=10) == (0, 0)
    assert c.offsets_for_times([CkTP(topic, 0, t_before)], timeout=10)[0].offset == 0
    assert c.offsets_for_times([CkTP(topic, 0, t_mid)], timeout=10)[0].offset == 100
    c.assign([CkTP(topic, 0, 0)])
    c.commit(offsets=[CkTP(topic, 0, 120), CkTP(topic, 1, 0)], asynchronous=False)
    committed = c.committed([CkTP(topic, 0), CkTP(topic, 1)], timeout=10)
    assert [(x.partition, x.offset) for x in committed] == [(0, 120), (1, 0)]
    c.close()

    res = admin.describe_configs([ConfigResource("topic", topic), ConfigResource("broker", "0")])
    topic_cfg = {k: v.value for k, v in res[ConfigResource("topic", topic)].result(10).items()}
    broker_cfg = {k: v.value for k, v in res[ConfigResource("broker", "0")].result(10).items()}
    assert topic_cfg["flush.messages"] == "1" and "wrack.flush.policy" not in topic_cfg  # a broker's line only
    assert broker_cfg["log.flush.interval.messages"] == "1" and "every write" in broker_cfg["wrack.flush.policy"]

    assert b.terminate() == 0
    assert "clean-shutdown marker written" in b.log_text()
    b.start()
    got = ck_read_all(bs, topic, 0, 150, group="again")
    assert [v for _, v in got] == want
    c = Consumer({"bootstrap.servers": bs, "group.id": "g1", "enable.auto.commit": False})
    assert [x.offset for x in c.committed([CkTP(topic, 0)], timeout=10)] == [120]
    c.close()
    assert "storage: clean shutdown" in b.log_text().split("---- start 2")[1]

    for f in admin.delete_topics([topic], operation_timeout=10).values():
        f.result(15)
    assert topic not in admin.list_topics(timeout=10).topics


def test_kafka_python_end_to_end_with_restart(fleet):
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import NewTopic as KpNewTopic
    from kafka.structs import OffsetAndMetadata

    b = fleet.single().start()
    bs = b.bootstrap
    topic = "compat-kp"
    admin = KafkaAdminClient(bootstrap_servers=bs, request_timeout_ms=15000)
    admin.create_topics([KpNewTopic(topic, 1, 1)], timeout_ms=10000)
    assert topic in admin.list_topics()
    want: list[bytes] = []
    t_before = int(time.time() * 1000)
    for acks in (0, 1, "all"):
        p = KafkaProducer(bootstrap_servers=bs, acks=acks, linger_ms=2, enable_idempotence=False)
        futs = [p.send(topic, f"{acks}-{i}".encode(), partition=0) for i in range(40)]
        p.flush(30)
        metas = [f.get(30) for f in futs]
        if acks != 0:
            assert [m.offset for m in metas] == list(range(len(want), len(want) + 40))
        want += [f"{acks}-{i}".encode() for i in range(40)]
        p.close(5)
    tp = TopicPartition(topic, 0)

    def read() -> list[bytes]:
        c = KafkaConsumer(bootstrap_servers=bs, enable_auto_commit=False, consumer_timeout_ms=4000)
        c.assign([tp])
        c.seek_to_beginning()
        vals = [m.value for m in c]
        c.close()
        return vals

    assert read() == want
    c = KafkaConsumer(bootstrap_servers=bs, group_id="kp-group", enable_auto_commit=False)
    assert c.beginning_offsets([tp]) == {tp: 0}
    assert c.end_offsets([tp]) == {tp: 120}
    assert c.offsets_for_times({tp: t_before})[tp].offset == 0
    assert c.offsets_for_times({tp: int(time.time() * 1000) + 60000})[tp] is None
    c.assign([tp])
    c.commit({tp: OffsetAndMetadata(77, "meta", -1)})
    assert c.committed(tp) == 77
    c.close()

    assert b.terminate() == 0
    b.start()
    assert read() == want
    c = KafkaConsumer(bootstrap_servers=bs, group_id="kp-group", enable_auto_commit=False)
    assert c.committed(tp) == 77
    c.close()
    admin.close()


def test_topics_are_created_on_demand_by_metadata(fleet):
    b = fleet.single().start()
    p = Producer({"bootstrap.servers": b.bootstrap, "acks": "all"})
    done: list[object] = []
    p.produce("made-on-demand", b"v", on_delivery=lambda e, m: done.append((e, m.offset())))
    assert p.flush(30) == 0
    assert done == [(None, 0)]
    assert "auto-created topic made-on-demand" in b.log_text()
