"""Idempotent producers against real `wrack-broker` processes (KIP-98):

- both client libraries with their defaults (kafka-python's producer is idempotent by
  default and used to fail with IncompatibleBrokerVersion, InitProducerId not being
  advertised) and librdkafka with enable.idempotence=true: every record once, in order;
- the sequence rules on the wire (raw client): a retry of a recent batch gets the first
  copy's offset and is not appended, a gap is OUT_OF_ORDER_SEQUENCE_NUMBER, an older
  epoch INVALID_PRODUCER_EPOCH; after a SIGTERM and after a SIGKILL the state is rebuilt
  from the log (the retry is still recognised) and InitProducerId hands out a new id;
- librdkafka's idempotent producer through a leader SIGKILL on a three-broker cluster:
  every acknowledged record is read back exactly once, no value twice."""

from __future__ import annotations

import signal
import time

import pytest
from broker_procs import create_replicated, metadata, read_back, start_cluster, wait_until
from kio.schema.errors import ErrorCode as E

from broker.records import decode_values, encode_batch, split_batches
from broker.wire import kafka as k
from broker.wire.client import RawClient

confluent_kafka = pytest.importorskip("confluent_kafka")
kafka = pytest.importorskip("kafka")

from confluent_kafka import Consumer, Producer  # noqa: E402
from confluent_kafka import TopicPartition as CkTP  # noqa: E402


def read_all(bs: str, topic: str, partition: int, n: int, timeout: float = 30) -> list[tuple[int, bytes]]:
    c = Consumer({"bootstrap.servers": bs, "group.id": "idem-reader", "enable.auto.commit": False})
    c.assign([CkTP(topic, partition, 0)])
    got: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + timeout
    while len(got) < n and time.monotonic() < deadline:
        for m in c.consume(500, 0.3):
            assert m.error() is None, m.error()
            got.append((m.offset(), m.value()))
    extra = c.consume(100, 1.0)  # nothing beyond the n records
    c.close()
    return got + [(m.offset(), m.value()) for m in extra if m.error() is None]


def create(c: RawClient, topic: str, partitions: int = 1) -> None:
    r = c.call(k.CREATE_TOPICS, 7, {"topics": [{"name": topic, "num_partitions": partitions, "replication_factor": 1,
                                                "assignments": [], "configs": []}], "timeout": 10000})
    assert r.topics[0].error_code is E.none


def test_both_clients_with_their_defaults_and_librdkafka_idempotent(fleet):
    b = fleet.single().start()
    with RawClient(b.host, b.port) as c:
        create(c, "kp")
        create(c, "ck")
    p = kafka.KafkaProducer(bootstrap_servers=b.bootstrap)  # defaults: idempotence on, acks=all
    futures = [p.send("kp", f"kp-{i}".encode(), partition=0) for i in range(200)]
    p.flush(30)
    assert [f.get(10).offset for f in futures] == list(range(200))
    assert p._transaction_manager is not None and p._transaction_manager.producer_id_and_epoch.producer_id >= 0
    p.close()
    assert read_all(b.bootstrap, "kp", 0, 200) == [(i, f"kp-{i}".encode()) for i in range(200)]

    errors: list[object] = []
    offsets: list[int] = []
    cp = Producer({"bootstrap.servers": b.bootstrap, "enable.idempotence": True, "linger.ms": 2})
    for i in range(500):
        cp.produce("ck", f"ck-{i}".encode(), partition=0,
                   on_delivery=lambda e, m: errors.append(e) if e is not None else offsets.append(m.offset()))
    assert cp.flush(30) == 0
    assert errors == [] and sorted(offsets) == list(range(500))
    assert read_all(b.bootstrap, "ck", 0, 500) == [(i, f"ck-{i}".encode()) for i in range(500)]
    assert "Traceback" not in b.log_text()


def init_pid(c: RawClient) -> tuple[int, int]:
    r = c.call(k.INIT_PRODUCER_ID, 4, {"transactional_id": None, "transaction_timeout": 60000,
                                        "producer_id": -1, "producer_epoch": -1})
    assert r.error_code is E.none
    return r.producer_id, r.producer_epoch


def produce(c: RawClient, records: bytes, acks: int = -1):
    r = c.call(k.PRODUCE, 9, {"acks": acks, "timeout": 5000, "topic_data": [
        {"name": "raw", "partition_data": [{"index": 0, "records": records}]}]})
    p = r.responses[0].partition_responses[0]
    return p.error_code, p.base_offset


def log_values(b) -> list[bytes]:
    with RawClient(b.host, b.port) as c:
        r = c.call(k.FETCH, 12, {"max_wait": 0, "min_bytes": 1, "topics": [{"topic": "raw", "partitions": [
            {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20, "current_leader_epoch": -1}]}],
            "isolation_level": 0, "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
            "replica_id": -1, "max_bytes": 1 << 22})
        data = r.responses[0].partitions[0].records or b""
    return [v for batch in split_batches(data) for v in decode_values(batch)]


def test_sequence_rules_on_the_wire_and_the_state_after_restarts(fleet):
    b = fleet.single(extra={"log.flush.interval.messages": "1"}).start()

    def batch(pid: int, epoch: int, seq: int, n: int = 2) -> bytes:
        return encode_batch([f"{pid % 1000}-{epoch}-{seq + i}".encode() for i in range(n)],
                            producer_id=pid, producer_epoch=epoch, base_sequence=seq)

    with RawClient(b.host, b.port) as c:
        create(c, "raw")
        pid, epoch = init_pid(c)
        assert epoch == 0 and init_pid(c)[0] == pid + 1  # a new id every time
        assert produce(c, batch(pid, 0, 0)) == (E.none, 0)
        assert produce(c, batch(pid, 0, 2)) == (E.none, 2)
        assert produce(c, batch(pid, 0, 0)) == (E.none, 0)  # a retry: the first copy's offset
        assert produce(c, batch(pid, 0, 9))[0] is E.out_of_order_sequence_number
        assert produce(c, batch(pid, 1, 4))[0] is E.out_of_order_sequence_number  # a new epoch starts at 0
        assert produce(c, batch(pid, 1, 0)) == (E.none, 4)
        assert produce(c, batch(pid, 0, 4))[0] is E.invalid_producer_epoch
    assert b.terminate() == 0
    b.start()
    with RawClient(b.host, b.port) as c:
        assert produce(c, batch(pid, 1, 0)) == (E.none, 4)  # still recognised after a clean restart
        assert produce(c, batch(pid, 1, 2)) == (E.none, 6)
        assert init_pid(c)[0] > pid + 1  # a new broker epoch: a new block of ids
    b.signal(signal.SIGKILL)
    b.proc.wait(10)
    b.start()
    with RawClient(b.host, b.port) as c:
        assert produce(c, batch(pid, 1, 2)) == (E.none, 6)  # and after a SIGKILL (recovered log)
        assert produce(c, batch(pid, 1, 5))[0] is E.out_of_order_sequence_number
    values = log_values(b)
    assert len(values) == 8 and len(set(values)) == 8, values
    assert "Traceback" not in b.log_text()


def test_idempotent_librdkafka_producer_through_a_leader_kill(fleet):
    _ctl, brokers, bs, admin = start_cluster(fleet)
    topic = "idem-kill"
    create_replicated(admin, topic)
    victim = metadata(admin, topic)[0].leader
    acked: list[tuple[int, bytes]] = []
    errors: list[str] = []
    p = Producer({"bootstrap.servers": bs, "enable.idempotence": True, "linger.ms": 2, "message.timeout.ms": 60000})

    def cb(err, msg) -> None:
        (errors.append(str(err)) if err is not None else acked.append((msg.offset(), msg.value())))

    i = 0

    def send(n: int) -> None:
        nonlocal i
        for _ in range(n):
            while True:
                try:
                    p.produce(topic, str(i).encode(), partition=0, on_delivery=cb)
                    break
                except BufferError:
                    p.poll(0.05)
            i += 1
            p.poll(0)

    send(2000)
    wait_until(lambda: p.poll(0.1) is not None and len(acked) > 500, 30, "writes before the kill")
    brokers[victim].signal(signal.SIGKILL)
    send(3000)  # in flight while the leader dies: librdkafka retries them at the new leader
    assert p.flush(60) == 0
    assert errors == [] and len(acked) == i == 5000
    assert metadata(admin, topic)[0].leader not in (-1, victim)
    got = read_back(bs, topic, 0, {v for _, v in acked})
    values = [got[o] for o in sorted(got)]
    assert len(values) == len(set(values)), "a value was appended twice"
    assert {v for _, v in acked} <= set(values)
    assert [int(v) for v in values] == sorted(int(v) for v in values), "the order of a producer's records changed"
    assert all(got[o] == v for o, v in acked)
