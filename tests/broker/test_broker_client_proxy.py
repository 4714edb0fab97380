"""The client-path proxy (nemesis/kproxy.py) between librdkafka and a real `wrack-broker`:

- clients bootstrap through it and stay on it (Metadata and FindCoordinator answers name
  its listeners);
- an idempotent producer with 5 requests in flight through dropped answers, duplicated and
  reordered requests and delayed ones: every record once, in order, and every action journaled;
- a drop cuts its connection as a failed TCP link would: what was sent before it arrives,
  the dropped frame and everything after it do not, and the client is cut off;
- a held EndTxn names its node, transactional id and commit, and the commit completes
  once released;
- a rule naming an unknown request type or action is refused."""

from __future__ import annotations

import threading
import time

import pytest

from broker.records import encode_batch
from broker.wire import kafka as k
from broker.wire.client import RawClient
from nemesis.kproxy import KafkaProxy, ProxyRule, api_key_of

confluent_kafka = pytest.importorskip("confluent_kafka")

from confluent_kafka import Consumer, Producer  # noqa: E402
from confluent_kafka import TopicPartition as CkTP  # noqa: E402
from confluent_kafka.admin import AdminClient  # noqa: E402


def create(b, topic: str) -> None:
    with RawClient(b.host, b.port) as c:
        r = c.call(k.CREATE_TOPICS, 7, {"topics": [{"name": topic, "num_partitions": 1, "replication_factor": 1,
                                                    "assignments": [], "configs": []}], "timeout": 10000})
    assert r.topics[0].error_code.value == 0


@pytest.fixture
def proxied(fleet):
    b = fleet.single().start()
    journal: list[dict] = []
    lock = threading.Lock()

    def note(ev: dict) -> None:
        with lock:
            journal.append(ev)

    proxy = KafkaProxy({b.host: "b0"}, note, seed=7)
    try:
        yield b, proxy, proxy.route(b.bootstrap), journal
    finally:
        proxy.close()


def test_clients_stay_on_the_proxy_and_idempotence_survives_its_faults(proxied):
    b, proxy, via, journal = proxied
    create(b, "t")
    md = AdminClient({"bootstrap.servers": via}).list_topics(timeout=10)
    assert {f"{x.host}:{x.port}" for x in md.brokers.values()} == {via}  # rewritten to the listener
    proxy.set_rules([ProxyRule("Produce", "drop", "response", p=0.1, limit=4),
                     ProxyRule("Produce", "duplicate", p=0.1, limit=4),
                     ProxyRule("Produce", "reorder", "response", p=0.1, limit=4),
                     ProxyRule("Produce", "delay", p=0.1, delay_ms=300, limit=4),
                     # past the client's timeout: it retries on a new connection, then the
                     # original reaches the broker too (the proxy delivers it after the hang-up)
                     ProxyRule("Produce", "delay", p=0.05, delay_ms=3000, limit=2)], owner="t")
    p = Producer({"bootstrap.servers": via, "enable.idempotence": True, "max.in.flight.requests.per.connection": 5,
                  "linger.ms": 0, "request.timeout.ms": 2000, "socket.timeout.ms": 2000, "message.timeout.ms": 0,
                  "retry.backoff.ms": 50})
    errors: list = []
    for i in range(300):  # groups of 5 records, each its own request: 5 in flight at once
        p.produce("t", str(i).encode(), partition=0, on_delivery=lambda e, m: e and errors.append(e))
        p.poll(0)
        if i % 5 == 4:
            assert p.flush(60) == 0
    assert not errors
    counts = proxy.clear_rules("t")
    assert sum(counts) >= 4 and len(journal) == sum(counts) and counts[-1] >= 1
    assert {e["action"] for e in journal} <= {"drop", "duplicate", "reorder", "delay"}
    assert all(e["api"] == "Produce" and e["node"] == "b0" for e in journal)
    c = Consumer({"bootstrap.servers": via, "group.id": "g", "enable.auto.commit": False})
    c.assign([CkTP("t", 0, 0)])
    got: list[int] = []
    deadline = time.monotonic() + 30
    while len(got) < 300 and time.monotonic() < deadline:
        got += [int(m.value()) for m in c.consume(500, 0.3) if m.error() is None]
    c.close()
    assert got == list(range(300))  # once each, in order


def _produce_body(topic: str, value: bytes) -> dict:
    return {"acks": 1, "timeout": 5000, "topic_data": [
        {"name": topic, "partition_data": [{"index": 0, "records": encode_batch([value])}]}]}


def _next_offset(b, topic: str) -> int:
    """The offset the broker gives the next record of `topic` (written straight to it)."""
    with RawClient(b.host, b.port) as c:
        return c.call(k.PRODUCE, 9, _produce_body(topic, b"probe")).responses[0].partition_responses[0].base_offset


@pytest.mark.parametrize("direction", ["request", "response"])
def test_a_drop_cuts_its_connection_as_a_failed_link_would(proxied, direction):
    b, proxy, via, journal = proxied
    create(b, "d")
    host, port = via.rsplit(":", 1)
    with RawClient(host, int(port)) as c:
        assert c.call(k.PRODUCE, 9, _produce_body("d", b"before")).responses[0].partition_responses[0].base_offset == 0
        proxy.set_rules([ProxyRule("Produce", "drop", direction, limit=1)], owner="t")
        c.send(k.PRODUCE, 9, _produce_body("d", b"dropped"))
        if direction == "request":  # pipelined behind the dropped one: lost with it
            c.send(k.PRODUCE, 9, _produce_body("d", b"after"))
        with pytest.raises(ConnectionError):
            c.recv(k.PRODUCE, 9)
    assert [e["action"] for e in journal] == ["drop"]
    # a lost request was never written, and nothing after it; a lost answer's record was
    assert _next_offset(b, "d") == (1 if direction == "request" else 2)


def test_a_held_end_txn_names_its_coordinator_and_commits_once_released(proxied):
    b, proxy, via, _journal = proxied
    create(b, "x")
    p = Producer({"bootstrap.servers": via, "transactional.id": "tx-1", "linger.ms": 0})
    p.init_transactions(20)
    p.begin_transaction()
    p.produce("x", b"1", partition=0)
    held = proxy.hold("EndTxn")
    done = threading.Event()
    threading.Thread(target=lambda: (p.commit_transaction(30), done.set()), daemon=True).start()
    assert held.caught.wait(20)
    assert held.node == "b0" and held.info["transactional_id"] == "tx-1" and held.info["committed"] is True
    assert not done.wait(1.0)  # held: the commit cannot complete
    held.release()
    assert done.wait(20)


def test_unknown_request_types_and_actions_are_refused():
    assert api_key_of("EndTxn") == k.END_TXN and api_key_of("InitProducerId") == k.INIT_PRODUCER_ID
    for bad in ({"api": "Teleport", "action": "drop"}, {"api": "Produce", "action": "explode"},
                {"api": "Produce", "action": "drop", "direction": "sideways"},
                {"api": "Produce", "action": "drop", "p": 0}, {"api": "Produce", "action": "drop", "when": 1}):
        with pytest.raises(ValueError):
            ProxyRule.from_dict(bad)
