"""DeleteGroups, OffsetDelete, admin offset commits, ACLs, authorized operations and the
Kafka version clients infer, through real clients (confluent-kafka's and kafka-python's
admin clients) against real broker processes on loopback."""

from __future__ import annotations

import kafka.errors as Ke
import pytest
from broker_procs import cluster, wait_until
from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException, Producer, TopicCollection
from confluent_kafka import TopicPartition as CkTP
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
)
from confluent_kafka.admin import ResourcePatternType as Pt
from confluent_kafka.admin import ResourceType as Rt
from kafka import KafkaConsumer
from kafka import TopicPartition as KpTP
from kafka.admin import (
    ACL,
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    KafkaAdminClient,
    ResourcePattern,
    ResourcePatternFilter,
)
from kafka.admin import ResourceType as KpRt
from kafka.admin._acls import ACLResourcePatternType as KpPt
from kafka.protocol.broker_version_data import infer_broker_version_from_api_versions
from kafka.structs import OffsetAndMetadata
from kio.schema.errors import ErrorCode as E

from broker.core.acls import INT_MIN
from broker.wire import kafka as k
from broker.wire.client import RawClient

GROUP_FAST = {"group.min.session.timeout.ms": "1000", "group.initial.rebalance.delay.ms": "0"}
ANY_FILTER = AclBindingFilter(Rt.ANY, None, Pt.ANY, None, None, AclOperation.ANY, AclPermissionType.ANY)


def test_kafka_python_infers_kafka_3_7():
    """The version the broker emulates (the compat suite runs with KAFKA_VERSION=3.7.0):
    Fetch v16 is advertised, nothing that kafka-python ties to a later release."""
    assert infer_broker_version_from_api_versions(k.SUPPORTED) == (3, 7)


def committed(admin: AdminClient, group: str) -> dict[tuple[str, int], int]:
    res = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(10)
    return {(tp.topic, tp.partition): tp.offset for tp in res.topic_partitions if tp.offset >= 0}


def test_delete_groups_offset_delete_and_admin_commits(fleet):
    b = fleet.single(extra={**GROUP_FAST, "num.partitions": "1"}).start()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    kp = KafkaAdminClient(bootstrap_servers=b.bootstrap)
    for f in admin.create_topics([NewTopic("ga", 1, 1), NewTopic("gb", 1, 1)], operation_timeout=10).values():
        f.result(10)
    p = Producer({"bootstrap.servers": b.bootstrap})
    for i in range(5):
        p.produce("ga", str(i).encode())
    p.flush(10)
    # an empty group takes an admin's offsets (AlterConsumerGroupOffsets: generation -1, no member)
    for g in ("grp", "kept"):
        admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(g, [CkTP("ga", 0, 1), CkTP("gb", 0, 2)])])[g].result(10)
    consumer = KafkaConsumer("ga", bootstrap_servers=b.bootstrap, group_id="grp", session_timeout_ms=6000,
                             heartbeat_interval_ms=500, enable_auto_commit=False)
    try:
        wait_until(lambda: consumer.poll(200) is not None and consumer.assignment(), 20, "the consumer's assignment")
        # an active group: the admin's commit is refused as Kafka refuses it
        errs = kp.alter_group_offsets("grp", {KpTP("ga", 0): OffsetAndMetadata(3, "", None)})
        assert errs == {KpTP("ga", 0): Ke.UnknownMemberIdError}
        assert dict(kp.delete_groups(["grp", "nope"])) == {"grp": "NonEmptyGroupError", "nope": "GroupIdNotFoundError"}
        res = kp.delete_group_offsets("grp", [KpTP("ga", 0), KpTP("gb", 0), KpTP("missing", 0)])
        assert res == {KpTP("ga", 0): Ke.GroupSubscribedToTopicError, KpTP("gb", 0): Ke.NoError,
                       KpTP("missing", 0): Ke.UnknownTopicOrPartitionError}
        assert committed(admin, "grp") == {("ga", 0): 1}
    finally:
        consumer.close()
    wait_until(lambda: admin.describe_consumer_groups(["grp"])["grp"].result(10).state.name == "EMPTY", 20, "empty group")
    with RawClient(b.host, b.port) as c:
        r = c.call(k.OFFSET_DELETE, 0, {"group_id": "nope", "topics": [{"name": "ga", "partitions": [{"partition_index": 0}]}]})
        assert r.error_code is E.group_id_not_found
        r = c.call(k.OFFSET_DELETE, 0, {"group_id": "", "topics": []})
        assert r.error_code is E.invalid_group_id
    admin.delete_consumer_groups(["grp"])["grp"].result(10)
    assert committed(admin, "grp") == {}
    with pytest.raises(KafkaException, match="GROUP_ID_NOT_FOUND"):
        admin.delete_consumer_groups(["grp"])["grp"].result(10)
    kp.close()
    # durability: a restart keeps the deletions and the other group's offsets
    assert b.terminate() == 0
    b.start()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    assert committed(admin, "grp") == {}
    assert committed(admin, "kept") == {("ga", 0): 1, ("gb", 0): 2}
    # after the restart "kept" is known by its offsets only: Empty, and it may go
    listed = {g.group_id: g.state.name for g in admin.list_consumer_groups().result(10).valid}
    assert listed.get("kept") == "EMPTY"
    admin.delete_consumer_groups(["kept"])["kept"].result(10)
    assert committed(admin, "kept") == {}


def kp_filter(principal=None, host=None, name=None, pattern=KpPt.ANY, rtype=KpRt.ANY) -> ACLFilter:
    return ACLFilter(principal, host, ACLOperation.ANY, ACLPermissionType.ANY, ResourcePatternFilter(rtype, name, pattern))


def test_acls_through_the_controller_and_both_clients(fleet):
    """Two brokers, broker 0 the controller: ACLs created through broker 1 are listed by
    broker 0, deleted through broker 0, survive a restart of the controller's node, and
    the Metadata/Fetch extras of this change answer as Kafka's do."""
    _, (b0, b1) = cluster(fleet, brokers=2, separate_controller=False, extra={"num.partitions": "2"})
    b0.start()
    b1.start()
    via1 = AdminClient({"bootstrap.servers": b1.bootstrap})
    alice = AclBinding(Rt.TOPIC, "orders", Pt.LITERAL, "User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW)
    bob = AclBinding(Rt.TOPIC, "logs-", Pt.PREFIXED, "User:bob", "10.0.0.1", AclOperation.WRITE, AclPermissionType.DENY)
    group = AclBinding(Rt.GROUP, "g1", Pt.LITERAL, "User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW)
    cluster_bad = AclBinding(Rt.BROKER, "not-kafka-cluster", Pt.LITERAL, "User:x", "*", AclOperation.ALTER,
                             AclPermissionType.ALLOW)
    res = via1.create_acls([alice, bob, group, cluster_bad])
    for acl in (alice, bob, group):
        assert res[acl].result(10) is None
    try:
        res[cluster_bad].result(10)
        raise AssertionError("a CLUSTER ACL not named kafka-cluster was stored")
    except KafkaException as e:
        assert "INVALID_REQUEST" in str(e) or "kafka-cluster" in str(e)
    via0 = AdminClient({"bootstrap.servers": b0.bootstrap})
    assert set(map(str, via0.describe_acls(ANY_FILTER).result(10))) == set(map(str, (alice, bob, group)))
    match = AclBindingFilter(Rt.TOPIC, "logs-today", Pt.MATCH, None, None, AclOperation.ANY, AclPermissionType.ANY)
    assert via0.describe_acls(match).result(10) == [bob]
    # kafka-python sees the same, and deletes alice's two ACLs through broker 0
    kp = KafkaAdminClient(bootstrap_servers=b0.bootstrap)
    acls, err = kp.describe_acls(kp_filter(principal="User:alice"))
    assert err is Ke.NoError and sorted(a.resource_pattern.resource_name for a in acls) == ["g1", "orders"]
    [(_, deleted, err)] = kp.delete_acls([kp_filter(principal="User:alice")])
    assert err is Ke.NoError and len(deleted) == 2
    created = kp.create_acls([ACL("User:carol", "*", ACLOperation.DESCRIBE, ACLPermissionType.ALLOW,
                                  ResourcePattern(KpRt.TOPIC, "t", KpPt.LITERAL))])
    assert len(created["succeeded"]) == 1 and not created["failed"]
    kp.close()
    left = set(map(str, via1.describe_acls(ANY_FILTER).result(10)))
    assert len(left) == 2 and str(bob) in left
    # the controller's node restarts: its metadata log is replayed into the image
    assert b0.terminate() == 0
    b0.start()
    via0 = AdminClient({"bootstrap.servers": b0.bootstrap})
    wait_until(lambda: set(map(str, via0.describe_acls(ANY_FILTER).result(10))) == left, 20, "ACLs after the restart")
    check_authorized_operations_and_leader_hints(via0, b0, b1)


def check_authorized_operations_and_leader_hints(admin: AdminClient, b0, b1) -> None:
    for f in admin.create_topics([NewTopic("ops", 2, 1)], operation_timeout=10).values():
        f.result(10)
    d = admin.describe_topics(TopicCollection(["ops"]), include_authorized_operations=True)["ops"].result(10)
    assert {op.name for op in d.authorized_operations} == {
        "READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE", "DESCRIBE_CONFIGS", "ALTER_CONFIGS"}
    with RawClient(b0.host, b0.port) as c:
        for asked in (True, False):
            md = c.call(k.METADATA, 10, {"topics": [{"name": "ops"}], "allow_auto_topic_creation": False,
                                         "include_cluster_authorized_operations": asked,
                                         "include_topic_authorized_operations": asked})
            assert md.cluster_authorized_operations == (8096 if asked else INT_MIN)
            assert md.topics[0].topic_authorized_operations == (3576 if asked else INT_MIN)
        # Fetch v16 (KIP-951): a partition led elsewhere comes with its leader and endpoint
        md = c.call(k.METADATA, 12, {"topics": [{"name": "ops"}], "allow_auto_topic_creation": False,
                                     "include_topic_authorized_operations": False})
        other = next(p for p in md.topics[0].partitions if p.leader_id == 1)
        r = c.call(k.FETCH, 16, {"max_wait": 0, "min_bytes": 1, "topics": [{"topic_id": md.topics[0].topic_id, "partitions": [
            {"partition": other.partition_index, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}],
            "forgotten_topics_data": []})
        part = r.responses[0].partitions[0]
        assert part.error_code is E.not_leader_or_follower
        assert (part.current_leader.leader_id, part.current_leader.leader_epoch) == (1, other.leader_epoch)
        assert [(n.node_id, n.host, n.port) for n in r.node_endpoints] == [(1, b1.host, b1.port)]
