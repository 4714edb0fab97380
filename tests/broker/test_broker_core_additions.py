"""What the shell added to the sans-IO core: DeleteTopics, advertised listeners in the
registration, topic ids, consumer long polls (min_bytes / max_bytes), ListOffsets and
the acks=0 leadership check, reassignments. Driven through the deterministic simulation."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from broker.core.broker import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP
from broker.core.controller import Controller, ControllerConfig
from broker.core.messages import (
    AlterReassignmentRequest,
    AlterReassignmentResponse,
    BrokerRegistrationRequest,
    DeletePartitionLog,
    DeleteTopicRequest,
    DeleteTopicResponse,
    Endpoint,
    FetchPartition,
    FetchRequest,
    FetchResponse,
    MetadataFetchRequest,
    ProduceRequest,
    ProduceResponse,
    TopicPartition,
)
from broker.core.metadata import decode_line, encode_record, metadata_log_from_lines
from broker.sim.batches import encode_batch
from broker.sim.cluster import ADMIN, CONTROLLER, SimCluster

TP = TopicPartition("t", 0)


class Inbox:
    """A client of the simulation that records what it receives."""

    def __init__(self) -> None:
        self.got: list[object] = []

    def handle(self, msg: object, now: int) -> list:
        self.got.append(msg)
        return []


def cluster(seed: int = 3) -> SimCluster:
    c = SimCluster(seed)
    c.run_for(3000)
    assert c.create_topic("t", 1, 3, {"min.insync.replicas": "2"}).error is ErrorCode.none
    return c


def test_listeners_travel_from_registration_to_every_image_and_survive_the_file_encoding():
    ctl = Controller(ControllerConfig())
    eps = (Endpoint("PLAINTEXT", "127.0.0.1", 9092), Endpoint("CONTROLLER", "127.0.0.1", 9093))
    ctl.handle(1, BrokerRegistrationRequest(1, 1, "inc", -1, eps), 0)
    assert ctl.image.brokers[1].listeners == eps
    resp = ctl.handle(1, MetadataFetchRequest(2, 1, 0, 0), 0).sends[0].message
    lines = [encode_record(i, r) for i, r in enumerate(resp.records)]
    assert [decode_line(x)[1] for x in lines] == list(resp.records)
    rebuilt = Controller(ControllerConfig(), None)
    for i, r in enumerate(metadata_log_from_lines(lines).records):
        rebuilt.image.apply(i, r)
    assert rebuilt.image.brokers[1].listeners == eps


def test_delete_topic_removes_replicas_asks_for_log_deletion_and_allows_recreation():
    c = cluster()
    assert c.produce_and_wait(TP, b"before") is not None
    old_id = c.controller.image.topic_ids["t"]
    deleted: list[tuple[int, object]] = []
    perform = c._perform  # each action of a machine, as the routing layer hands it over

    def spy(n, o):
        if isinstance(o, DeletePartitionLog):
            deleted.append((n.id, o))
        perform(n, o)

    c._perform = spy
    c.send(ADMIN, CONTROLLER, DeleteTopicRequest(77, "t"))
    c.run_for(2000)
    resp = [r for r in c.admin_responses if isinstance(r, DeleteTopicResponse)]
    assert resp and resp[0].error is ErrorCode.none and resp[0].correlation_id == 77
    assert "t" not in c.controller.image.topics and TP not in c.controller.image.partitions
    for i in (1, 2, 3):
        assert TP not in c.brokers[i].broker.partitions
    assert sorted(n for n, _ in deleted) == [1, 2, 3] and all(o.tp == TP for _, o in deleted)
    # deleting again: unknown topic
    c.send(ADMIN, CONTROLLER, DeleteTopicRequest(78, "t"))
    c.run_for(500)
    again = [r for r in c.admin_responses if isinstance(r, DeleteTopicResponse) and r.correlation_id == 78]
    assert again[0].error is ErrorCode.unknown_topic_or_partition
    # the shell's checks see it as unknown (the core itself answers NOT_LEADER_OR_FOLLOWER
    # for any partition it has no replica of, as before)
    assert c.brokers[1].broker.leader_error(TP) is ErrorCode.unknown_topic_or_partition
    inbox = c.clients["x"] = Inbox()
    c.send("x", 1, ProduceRequest(5, TP, 1, encode_batch([b"v"])))
    c.run_for(100)
    assert [m.error for m in inbox.got if isinstance(m, ProduceResponse)] == [ErrorCode.not_leader_or_follower]
    assert c.create_topic("t", 1, 3).error is ErrorCode.none
    assert c.controller.image.topic_ids["t"] != old_id
    assert c.brokers[2].broker.image.topic_ids["t"] == c.controller.image.topic_ids["t"]
    assert c.produce_and_wait(TP, b"after") is not None
    leader = c.leader(TP)
    assert c.values(leader, TP) == [b"after"] or c.values(leader, TP)[-1] == b"after"


def consumer_fetch(c: SimCluster, leader: int, offset: int, cid: int, **kw) -> None:
    part = FetchPartition(TP, -1, offset, -1, 0, kw.pop("partition_max_bytes", 1 << 20))
    c.send("cons", leader, FetchRequest(cid, -1, -1, (part,), **kw))


def test_consumer_fetch_long_polls_until_records_are_committed():
    c = cluster()
    inbox = c.clients["cons"] = Inbox()
    leader = c.leader(TP)
    start = c.now
    consumer_fetch(c, leader, 0, 1, max_wait_ms=5000)
    c.run_for(300)
    assert inbox.got == []  # nothing to return: parked
    assert c.produce_and_wait(TP, b"v1") is not None
    c.run_for(50)
    got = [m for m in inbox.got if isinstance(m, FetchResponse)]
    assert len(got) == 1 and got[0].partitions[0].records and c.now - start < 5000
    # nothing new: answered empty at the deadline
    consumer_fetch(c, leader, got[0].partitions[0].high_watermark, 2, max_wait_ms=700)
    t0 = c.now
    c.run_until_true(lambda: len(inbox.got) == 2, 5000)
    assert c.now - t0 >= 690 and inbox.got[1].partitions[0].records == b""


def test_consumer_fetch_waits_for_min_bytes_and_caps_max_bytes():
    c = cluster()
    inbox = c.clients["cons"] = Inbox()
    leader = c.leader(TP)
    for i in range(3):
        assert c.produce_and_wait(TP, f"value-{i}".encode() * 10) is not None
    consumer_fetch(c, leader, 0, 1, max_wait_ms=1000, min_bytes=10**6)
    t0 = c.now
    c.run_until_true(lambda: len(inbox.got) == 1, 5000)
    assert c.now - t0 >= 990 and inbox.got[0].partitions[0].records  # min_bytes never reached
    consumer_fetch(c, leader, 0, 2, max_wait_ms=0, max_bytes=1)
    c.run_for(50)
    one = inbox.got[1].partitions[0].records
    assert len(one) > 1  # at least one whole batch even above max_bytes
    consumer_fetch(c, leader, 0, 3, max_wait_ms=0)
    c.run_for(50)
    assert len(inbox.got[2].partitions[0].records) > len(one)


def test_list_offsets_and_leader_error():
    c = cluster()
    leader = c.leader(TP)
    b = c.brokers[leader].broker
    follower = next(i for i in (1, 2, 3) if i != leader)
    assert b.list_offset(TP, -1, LATEST_TIMESTAMP).offset == 0
    for i in range(4):
        assert c.produce_and_wait(TP, f"v{i}".encode()) is not None
    latest = b.list_offset(TP, -1, LATEST_TIMESTAMP)
    assert latest.error is ErrorCode.none and latest.offset == 4 and latest.leader_epoch == b.partitions[TP].leader_epoch
    assert b.list_offset(TP, -1, EARLIEST_TIMESTAMP).offset == 0
    assert b.list_offset(TP, b.partitions[TP].leader_epoch + 1, LATEST_TIMESTAMP).error is ErrorCode.unknown_leader_epoch
    assert c.brokers[follower].broker.list_offset(TP, -1, LATEST_TIMESTAMP).error is ErrorCode.not_leader_or_follower
    assert b.list_offset(TopicPartition("nope", 0), -1, LATEST_TIMESTAMP).error is ErrorCode.unknown_topic_or_partition
    assert b.leader_error(TP) is ErrorCode.none
    assert c.brokers[follower].broker.leader_error(TP) is ErrorCode.not_leader_or_follower


def test_a_restarted_combined_node_registers_at_once():
    from broker.core.messages import BrokerHeartbeatRequest

    ctl = Controller(ControllerConfig())
    epoch = ctl.handle(0, BrokerRegistrationRequest(1, 0, "old"), 0).sends[0].message.broker_epoch
    ctl.handle(0, BrokerHeartbeatRequest(9, 0, epoch, epoch), 10)
    assert not ctl.image.brokers[0].fenced
    resp = ctl.handle(0, BrokerRegistrationRequest(3, 0, "new"), 1000).sends[-1].message
    assert resp.error is ErrorCode.none and ctl.image.brokers[0].incarnation_id == "new"
    assert resp.broker_epoch > epoch and ctl.image.brokers[0].fenced  # fenced until it has caught up


def test_registration_retries_from_100_ms_doubling_to_the_max_after_broken_controller_links():
    """Regression (start-up): a broker started before its controller retried the
    registration a full replica.fetch.backoff.ms (1 s) after each refused connection."""
    from broker.core.broker import Broker, BrokerConfig
    from broker.core.messages import BrokerRegistrationResponse

    b = Broker(BrokerConfig(node_id=1, controller_id=0), lambda tp: None, "inc")  # type: ignore[arg-type,return-value]
    now = 0
    assert any(isinstance(s.message, BrokerRegistrationRequest) for s in b.start(now).sends)
    delays = []
    for _ in range(6):
        b.controller_connection_lost(now)
        at = b.next_deadline()
        delays.append(at - now)
        now = at
        sends = b.tick(now).sends
        assert [type(s.message) for s in sends] == [BrokerRegistrationRequest]
    assert delays == [100, 200, 400, 800, 1000, 1000]
    cid = sends[0].message.correlation_id
    b.handle(0, BrokerRegistrationResponse(cid, ErrorCode.none, 7), now)
    b.controller_connection_lost(now)  # a success resets the backoff
    assert b._metadata_retry_at - now == 100


def test_a_reassignment_copies_the_log_to_the_new_replica_and_deletes_the_old_one():
    """AlterReassignment in the simulation: the added replica fetches the whole log, joins
    the ISR, the reassignment completes, the dropped replica deletes its log (keeping the
    topic's offsets), and the invariants hold throughout."""
    c = SimCluster(5)
    c.run_for(3000)
    assert c.create_topic("m", 1, 2).error is ErrorCode.none
    tp = TopicPartition("m", 0)
    for i in range(20):
        assert c.produce_and_wait(tp, f"v{i}".encode()) is not None
    old = c.controller.image.partitions[tp].replicas
    (new,) = [b for b in (1, 2, 3) if b not in old]
    target = (old[1], new)
    deleted: list[tuple[int, object]] = []
    perform = c._perform  # each action of a machine, as the routing layer hands it over

    def spy(n, o):
        if isinstance(o, DeletePartitionLog):
            deleted.append((n.id, o))
        perform(n, o)

    c._perform = spy
    c.send(ADMIN, CONTROLLER, AlterReassignmentRequest(90, tp, target))
    assert c.run_until_true(lambda: c.controller.image.partitions[tp].replicas == target, 20000)
    reg = c.controller.image.partitions[tp]
    assert not reg.reassigning and set(reg.isr) == set(target)
    assert [r.error for r in c.admin_responses if isinstance(r, AlterReassignmentResponse)] == [ErrorCode.none]
    c.run_for(1000)
    assert deleted == [(old[0], DeletePartitionLog(tp, topic_deleted=False))]
    assert tp not in c.brokers[old[0]].broker.partitions
    assert c.values(new, tp)[:20] == [f"v{i}".encode() for i in range(20)]
    assert c.produce_and_wait(tp, b"after") is not None
    assert c.violations() == []
