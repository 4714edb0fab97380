"""Transactions against real broker processes, with librdkafka's transactional producer
and read_committed consumers: commit visible, abort invisible, the LSO holding
read_committed readers behind an open transaction, send_offsets_to_transaction, fencing
of a second instance of one transactional.id, the safeguard producer-epoch-fence, and
(three brokers) markers written by other brokers and the coordinator's state surviving
the loss of its broker."""

from __future__ import annotations

import signal
import time

import pytest
from broker_procs import BrokerFleet, create_replicated, start_cluster, wait_until
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.errors import ErrorCode

from broker.wire import kafka as k
from broker.wire.client import RawClient

E = ErrorCode
FAST = {"num.partitions": "1", "group.initial.rebalance.delay.ms": "0", "group.min.session.timeout.ms": "1000"}


def producer(bs: str, txn_id: str, **extra: object) -> Producer:
    p = Producer({"bootstrap.servers": bs, "transactional.id": txn_id, "linger.ms": 0, **extra})
    p.init_transactions(30)
    return p


def read_all(bs: str, topic: str, partitions: int = 1, committed: bool = True, wait: float = 1.5,
             until: set[bytes] | None = None, timeout: float = 30.0) -> list[bytes]:
    """Every value a consumer reads from the start: until `wait` s pass without a record,
    or (with `until`) until it has read those values (or `timeout`), then 0.5 s more."""
    c = Consumer({"bootstrap.servers": bs, "group.id": "reader", "enable.auto.commit": False,
                  "isolation.level": "read_committed" if committed else "read_uncommitted"})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got: list[bytes] = []
    deadline = time.monotonic() + (timeout if until is not None else wait)
    while time.monotonic() < deadline:
        for m in c.consume(100, 0.3):
            if m.error() is None:
                got.append(m.value())
                if until is None:
                    deadline = time.monotonic() + wait
        if until is not None and until <= set(got):
            until, deadline = None, time.monotonic() + 0.5
    c.close()
    return got


@pytest.fixture
def single(fleet: BrokerFleet):
    b = fleet.single(extra=FAST).start()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    for f in admin.create_topics([NewTopic("t", 1, 1), NewTopic("src", 1, 1)]).values():
        f.result(10)
    return b


def test_commit_is_visible_abort_is_not_and_the_lso_holds_readers(single):
    bs = single.bootstrap
    p = producer(bs, "tx-basic")
    p.begin_transaction()
    p.produce("t", b"c1")
    p.commit_transaction(30)
    p.begin_transaction()
    p.produce("t", b"a1")
    p.flush()
    p.abort_transaction(30)
    p.begin_transaction()
    p.produce("t", b"open")
    p.flush()
    # an open transaction: read_committed stops at its first offset, ListOffsets says the LSO
    with RawClient(single.host, single.port) as c:
        def latest(isolation: int) -> int:
            r = c.call(k.LIST_OFFSETS, 7, {"replica_id": -1, "isolation_level": isolation, "topics": [
                {"name": "t", "partitions": [{"partition_index": 0, "timestamp": -1}]}]})
            return r.topics[0].partitions[0].offset
        assert latest(1) == 4 < latest(0) == 5  # c1, marker, a1, marker | open
    assert read_all(bs, "t", wait=1.0) == [b"c1"]
    assert read_all(bs, "t", committed=False, wait=1.0) == [b"c1", b"a1", b"open"]
    p.commit_transaction(30)
    assert read_all(bs, "t", until={b"c1", b"open"}) == [b"c1", b"open"]


def test_send_offsets_to_transaction_commits_with_it_and_not_on_abort(single):
    bs = single.bootstrap
    src = Producer({"bootstrap.servers": bs})
    for i in range(4):
        src.produce("src", str(i).encode())
    src.flush(10)
    consumer = Consumer({"bootstrap.servers": bs, "group.id": "copier", "enable.auto.commit": False,
                         "isolation.level": "read_committed", "auto.offset.reset": "earliest"})
    consumer.subscribe(["src"])
    msgs = wait_until(lambda: consumer.consume(4, 1.0), 30, "the source records")
    p = producer(bs, "tx-copier")

    def copy(commit: bool) -> None:
        p.begin_transaction()
        for m in msgs:
            p.produce("t", m.value())
        offsets = [TopicPartition("src", 0, msgs[-1].offset() + 1)]
        p.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata(), 30)
        (p.commit_transaction if commit else p.abort_transaction)(30)

    def committed() -> int:
        return consumer.committed([TopicPartition("src", 0)], 10)[0].offset

    copy(commit=False)
    assert committed() < 0
    copy(commit=True)
    assert committed() == msgs[-1].offset() + 1
    consumer.close()
    want = {m.value() for m in msgs}
    assert sorted(read_all(bs, "t", until=want)) == sorted(want)


def fence_and_zombie_write(bs: str) -> tuple[str | None, list[bytes]]:
    """Instance 1 of a transactional id writes in a transaction; instance 2 starts (its
    InitProducerId aborts that transaction and bumps the epoch) and writes in its own;
    instance 1, a zombie that does not know, writes again to the same partition; instance 2
    commits. Returns (instance 1's error, what a read_committed reader sees)."""
    errors: list[str] = []
    zombie = producer(bs, "tx-fence", error_cb=lambda err: errors.append(err.str()))
    zombie.begin_transaction()
    zombie.produce("t", b"zombie-1")
    zombie.flush(10)
    live = producer(bs, "tx-fence")
    live.begin_transaction()
    live.produce("t", b"live-1")
    live.flush(10)
    zombie.produce("t", b"zombie-2")
    try:
        zombie.flush(10)
    except KafkaException as e:
        errors.append(str(e))
    live.commit_transaction(30)
    try:
        zombie.commit_transaction(10)
    except KafkaException as e:
        errors.append(str(e))
    return (errors[0] if errors else None), read_all(bs, "t", until={b"live-1"})


def test_a_second_instance_fences_the_first(single):
    err, seen = fence_and_zombie_write(single.bootstrap)
    assert err is not None and "fenced" in err.lower(), err
    assert seen == [b"live-1"]


def test_without_producer_epoch_fence_a_zombie_write_joins_the_next_transaction(fleet):
    b = fleet.single(extra={**FAST, "wrack.safeguards.off": "producer-epoch-fence"}).start()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic("t", 1, 1)])["t"].result(10)
    _err, seen = fence_and_zombie_write(b.bootstrap)
    assert seen == [b"live-1", b"zombie-2"]  # an aborted instance's write, committed: the anomaly


def find_txn_coordinator(host: str, port: int, txn_id: str) -> int:
    with RawClient(host, port) as c:
        r = c.call(k.FIND_COORDINATOR, 3, {"key": txn_id, "key_type": 1})
        assert r.error_code is E.none, r
        return r.node_id


def test_three_brokers_markers_everywhere_and_coordinator_failover(fleet):
    _ctl, brokers, bs, admin = start_cluster(fleet, **FAST, **{"transaction.abort.timed.out.transaction.cleanup."
                                                                 "interval.ms": "1000"})
    create_replicated(admin, "t", partitions=3)
    p = producer(bs, "tx-ha")
    p.begin_transaction()
    for i in range(3):
        p.produce("t", f"c{i}".encode(), partition=i)
    p.commit_transaction(30)
    p.begin_transaction()
    for i in range(3):
        p.produce("t", f"open{i}".encode(), partition=i)
    p.flush(10)
    # the coordinator dies with a transaction open: its successor must know the id
    # (its producer id and epoch) and abort that transaction
    coord = find_txn_coordinator(brokers[0].host, brokers[0].port, "tx-ha")
    victim = brokers[coord]
    victim.signal(signal.SIGKILL)
    victim.proc.wait(10)
    rest = ",".join(b.bootstrap for b in brokers if b is not victim)
    wait_until(lambda: _other_coordinator(brokers, victim, "tx-ha"), 30, "a new transaction coordinator")
    p2 = producer(rest, "tx-ha")
    p2.begin_transaction()
    for i in range(3):
        p2.produce("t", f"after{i}".encode(), partition=i)
    p2.commit_transaction(30)
    with pytest.raises(KafkaException):
        p.commit_transaction(10)
    want = {b"c0", b"c1", b"c2", b"after0", b"after1", b"after2"}
    assert sorted(read_all(rest, "t", partitions=3, until=want)) == sorted(want)


def _other_coordinator(brokers, victim, txn_id: str) -> bool:
    live = next(b for b in brokers if b is not victim)
    try:
        return find_txn_coordinator(live.host, live.port, txn_id) != int(victim.props["node.id"])
    except (AssertionError, OSError):
        return False


def test_a_successor_coordinator_finishes_a_prepared_commit(fleet):
    """The coordinator stores PrepareCommit and answers, but a partition's leader is paused
    so the marker cannot be written; the coordinator is killed; once the leader is back the
    broker that took over the state partition writes the marker without any client asking."""
    _ctl, brokers, bs, admin = start_cluster(fleet, **FAST)
    for f in admin.create_topics([NewTopic("t", 3, 1)]).values():
        f.result(10)
    p = producer(bs, "tx-prep")
    coord = find_txn_coordinator(brokers[0].host, brokers[0].port, "tx-prep")
    parts = wait_until(lambda: {i: pm.leader for i, pm in admin.list_topics("t", timeout=10).topics["t"].partitions.items()
                                if pm.leader >= 0}, 20, "leaders of t")
    part, paused = next((i, brokers[leader]) for i, leader in parts.items() if leader != coord)
    p.begin_transaction()
    p.produce("t", b"prepared", partition=part)
    p.flush(10)
    paused.signal(signal.SIGSTOP)
    try:
        p.commit_transaction(30)  # answered once PrepareCommit is stored; the marker waits
        brokers[coord].signal(signal.SIGKILL)
        brokers[coord].proc.wait(10)
    finally:
        paused.signal(signal.SIGCONT)
    rest = ",".join(b.bootstrap for i, b in enumerate(brokers) if i != coord)
    assert read_all(rest, "t", partitions=3, until={b"prepared"}, timeout=40) == [b"prepared"]


def test_a_transaction_older_than_its_timeout_is_aborted_and_its_producer_fenced(fleet):
    b = fleet.single(extra={**FAST, "transaction.abort.timed.out.transaction.cleanup.interval.ms": "300"}).start()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic("t", 1, 1)])["t"].result(10)
    p = producer(b.bootstrap, "tx-slow", **{"transaction.timeout.ms": 1000})
    p.begin_transaction()
    p.produce("t", b"slow")
    p.flush(10)
    after = Producer({"bootstrap.servers": b.bootstrap})
    after.produce("t", b"later")
    after.flush(10)
    # the abort moves the LSO past the transaction: the later record becomes readable
    assert read_all(b.bootstrap, "t", until={b"later"}, timeout=15) == [b"later"]
    with pytest.raises(KafkaException):
        p.commit_transaction(10)
