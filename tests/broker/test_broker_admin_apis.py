"""The admin APIs through real clients (confluent-kafka's AdminClient, kafka-python's
KafkaAdminClient) against real `wrack-broker` processes on loopback: CreatePartitions,
CreateTopics with manual assignments and topic configs, AlterConfigs and
IncrementalAlterConfigs, DescribeConfigs, ElectLeaders, partition reassignments and
DescribeLogDirs; the older versions on the wire; and the changes surviving a restart (the
metadata log replayed)."""

from __future__ import annotations

import signal
import time

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")
kafka = pytest.importorskip("kafka")

from broker_procs import BrokerFleet, metadata, start_cluster, wait_until  # noqa: E402
from confluent_kafka import ElectionType, KafkaException, Producer  # noqa: E402
from confluent_kafka import TopicPartition as CkTP  # noqa: E402
from confluent_kafka.admin import (  # noqa: E402
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
)
from kafka import KafkaAdminClient, KafkaConsumer  # noqa: E402
from kafka import TopicPartition as KpTP  # noqa: E402
from kio.schema.errors import ErrorCode as E  # noqa: E402

from broker.core.properties import Scope, in_scope  # noqa: E402
from broker.wire import kafka as k  # noqa: E402
from broker.wire.client import RawClient  # noqa: E402


@pytest.fixture(scope="module")
def cluster():
    """A controller and brokers 0..2 (FAST settings), shared by the tests of this module."""
    with BrokerFleet(prefix="wrack-test-admin-apis-") as fleet:
        ctl, brokers, bs, admin = start_cluster(fleet)
        kp = KafkaAdminClient(bootstrap_servers=bs, request_timeout_ms=20000)
        try:
            yield fleet, brokers, bs, admin, kp
        finally:
            kp.close()
        assert "Traceback" not in fleet.logs()


def error_of(fut) -> E:
    """The Kafka error code a confluent-kafka future failed with (E.none if it did not)."""
    try:
        fut.result(20)
    except KafkaException as e:
        return E(e.args[0].code())
    return E.none


def configs(admin, topic: str) -> dict:
    res = ConfigResource("topic", topic)
    return admin.describe_configs([res])[res].result(20)


def test_create_partitions_and_topic_configs(cluster):
    fleet, brokers, bs, admin, kp = cluster
    given = {p.topic_name: p.default if p.default is not None else "1" for p in in_scope(Scope.TOPIC)}
    given["min.insync.replicas"] = "2"
    assert error_of(admin.create_topics([NewTopic("grow", 1, 2, config=given)])["grow"]) is E.none
    assert error_of(admin.create_partitions([NewPartitions("grow", 3)])["grow"]) is E.none
    assert len(metadata(admin, "grow")) == 3
    assert error_of(admin.create_partitions([NewPartitions("grow", 3)])["grow"]) is E.invalid_partitions
    assert error_of(admin.create_partitions([NewPartitions("grow", 2)])["grow"]) is E.invalid_partitions
    assert error_of(admin.create_partitions([NewPartitions("grow", 5)], validate_only=True)["grow"]) is E.none
    assert error_of(admin.create_partitions([NewPartitions("nope", 5)])["nope"]) is E.unknown_topic_or_partition
    assert len(metadata(admin, "grow")) == 3 and all(len(p.replicas) == 2 for p in metadata(admin, "grow").values())

    c = configs(admin, "grow")
    assert (c["min.insync.replicas"].value, c["min.insync.replicas"].source) == ("2", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
    assert "retention.bytes" in c and not c["min.insync.replicas"].is_read_only

    res = ConfigResource("topic", "grow", incremental_configs=[
        ConfigEntry("min.insync.replicas", None, incremental_operation=AlterConfigOpType.DELETE),
        ConfigEntry("unclean.leader.election.enable", "true", incremental_operation=AlterConfigOpType.SET)])
    assert error_of(admin.incremental_alter_configs([res])[res]) is E.none
    c = configs(admin, "grow")
    assert c["min.insync.replicas"].source != ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert c["min.insync.replicas"].value == "2"  # the brokers' (FAST settings)
    assert (c["unclean.leader.election.enable"].value, c["unclean.leader.election.enable"].source) == (
        "true", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)

    for bad, code in (([ConfigEntry("no.such.config", "1", incremental_operation=AlterConfigOpType.SET)], E.invalid_config),
                      ([ConfigEntry("min.insync.replicas", "x", incremental_operation=AlterConfigOpType.SET)],
                       E.invalid_config)):
        res = ConfigResource("topic", "grow", incremental_configs=bad)
        assert error_of(admin.incremental_alter_configs([res])[res]) is code
    res = ConfigResource("topic", "nope", incremental_configs=[
        ConfigEntry("min.insync.replicas", "1", incremental_operation=AlterConfigOpType.SET)])
    assert error_of(admin.incremental_alter_configs([res])[res]) is E.unknown_topic_or_partition

    legacy = ConfigResource("topic", "grow", set_config={"min.insync.replicas": "1"})  # AlterConfigs: the whole set
    with pytest.warns(DeprecationWarning):
        assert error_of(admin.alter_configs([legacy])[legacy]) is E.none
    c = configs(admin, "grow")
    assert c["min.insync.replicas"].value == "1" and c["unclean.leader.election.enable"].value == "false"


def _alter_broker(b, name: str, **changes: str | None) -> E:
    """IncrementalAlterConfigs sent to broker `b` for broker `name` ("": the cluster-wide
    default; clients refuse an empty name, hence the wire): SET, or DELETE for None."""
    with RawClient(b.host, b.port) as c:
        r = c.call(k.INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [{"resource_type": 4, "resource_name": name, "configs": [
            {"name": key.replace("_", "."), "config_operation": 0 if v is not None else 1, "value": v}
            for key, v in changes.items()]}], "validate_only": False})
    return r.responses[0].error_code


def _broker_configs(b, name: str) -> dict:
    """DescribeConfigs of broker `name` sent to broker `b`: name -> (value, source, read_only)."""
    with RawClient(b.host, b.port) as c:
        r = c.call(k.DESCRIBE_CONFIGS, 4, {"resources": [{"resource_type": 4, "resource_name": name, "configuration_keys": None}],
                                           "include_synonyms": False, "include_documentation": False})
    assert r.results[0].error_code is E.none
    return {x.name: (x.value, x.config_source, x.read_only) for x in r.results[0].configs}


def test_dynamic_broker_configs(cluster):
    """Dynamic broker configs (Kafka's DynamicBrokerConfig, through the controller): a topic
    config's synonym as the cluster-wide default or one broker's, honoured by the topics that
    do not set it; read-only and listener configs refused; unknown ones accepted."""
    fleet, brokers, bs, admin, kp = cluster
    b0, b1 = brokers[0], brokers[1]
    assert error_of(admin.create_topics([NewTopic("dyn", 1, 2)])["dyn"]) is E.none
    big = b"x" * 3000
    dynamic, default = ConfigSource.DYNAMIC_BROKER_CONFIG.value, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
    try:
        assert _alter_broker(b1, "", message_max_bytes="2000") is E.none
        assert _broker_configs(b0, "") == {"message.max.bytes": ("2000", default, False)}  # the cluster-wide ones only
        assert _broker_configs(b0, "0")["message.max.bytes"] == ("2000", default, False)
        c = wait_until(lambda: (x := configs(admin, "dyn"))["max.message.bytes"].value == "2000" and x, 10, "topic default")
        assert c["max.message.bytes"].source == default
        # honoured by the leader (once its metadata has the record: the answer waited for broker 1's)
        wait_until(lambda: _produce_error(bs, "dyn", big) == "MSG_SIZE_TOO_LARGE", 20, "the leader refuses 3000 bytes")
        assert _alter_broker(b0, "0", log_retention_ms="60000", sasl_kerberos_min_time_before_relogin="58000") is E.none
        got = _broker_configs(b0, "0")
        assert got["log.retention.ms"] == ("60000", dynamic, False)
        assert got["sasl.kerberos.min.time.before.relogin"] == ("58000", dynamic, False)  # unknown here: accepted
        assert got["advertised.listeners"] == (f"PLAINTEXT://{b0.bootstrap}", ConfigSource.DEFAULT_CONFIG.value, False)
        assert got["num.partitions"][2] and got["node.id"][2] and got["wrack.flush.policy"][2]  # read-only
        assert _broker_configs(b1, "1")["log.retention.ms"][1] != dynamic
        assert _alter_broker(b0, "0", num_partitions="3") is E.invalid_request  # static broker configs
        assert _alter_broker(b0, "0", advertised_listeners="PLAINTEXT://127.0.0.1:1") is E.invalid_request
        assert _alter_broker(b0, "1", log_retention_ms="1") is E.invalid_request  # broker 1's, asked of broker 0
        assert _alter_broker(b0, "", log_retention_ms="soon") is E.invalid_config
    finally:
        assert _alter_broker(b0, "", message_max_bytes=None) is E.none
        assert _alter_broker(b0, "0", log_retention_ms=None, sasl_kerberos_min_time_before_relogin=None) is E.none
    wait_until(lambda: _produce_error(bs, "dyn", big) is None, 20, "the leader takes 3000 bytes again")
    assert wait_until(lambda: _broker_configs(b1, "") == {}, 10, "no cluster-wide dynamic config left")


def _produce_error(bs: str, topic: str, value: bytes) -> str | None:
    """The error name of one acks=all send of `value` (None: acknowledged)."""
    got: list = []
    p = Producer({"bootstrap.servers": bs, "acks": "all", "message.timeout.ms": 20000})
    p.produce(topic, value, callback=lambda err, msg: got.append(err))
    p.flush(30)
    return got[0].name() if got and got[0] is not None else None


def test_manual_assignment_and_preferred_election(cluster):
    fleet, brokers, bs, admin, kp = cluster
    topic = NewTopic("placed", 2, replica_assignment=[[0, 1], [1, 2]])
    assert error_of(admin.create_topics([topic])["placed"]) is E.none
    assert {p: m.replicas for p, m in metadata(admin, "placed").items()} == {0: [0, 1], 1: [1, 2]}
    for bad in ([[0, 0]], [[0, 7]]):
        assert error_of(admin.create_topics([NewTopic("bad", 1, replica_assignment=bad)])["bad"]) \
            is E.invalid_replica_assignment
    wait_until(lambda: len(metadata(admin, "placed")[0].isrs) == 2, 20, "full ISR")

    assert kp.alter_partition_reassignments({KpTP("placed", 0): [1, 0]}, timeout_ms=10000) == {KpTP("placed", 0): None}
    wait_until(lambda: metadata(admin, "placed")[0].replicas == [1, 0], 20, "reordered")
    assert metadata(admin, "placed")[0].leader == 0  # reordering moves no leadership
    tp = CkTP("placed", 0)
    result = admin.elect_leaders(ElectionType.PREFERRED, [tp]).result(20)
    assert result[tp] is None
    wait_until(lambda: metadata(admin, "placed")[0].leader == 1, 20, "preferred leader")
    result = admin.elect_leaders(ElectionType.PREFERRED, [tp]).result(20)
    assert result[tp].code() == E.election_not_needed.value


def _produce(bs: str, topic: str, n: int) -> None:
    p = Producer({"bootstrap.servers": bs, "acks": "all"})
    for i in range(n):
        p.produce(topic, f"v{i}".encode(), partition=0)
    assert p.flush(30) == 0


def test_a_reassignment_moves_the_data(cluster):
    fleet, brokers, bs, admin, kp = cluster
    assert error_of(admin.create_topics([NewTopic("moved", 1, replica_assignment=[[0, 1]])])["moved"]) is E.none
    wait_until(lambda: len(metadata(admin, "moved")[0].isrs) == 2, 20, "full ISR")
    _produce(bs, "moved", 50)
    assert kp.alter_partition_reassignments({KpTP("moved", 0): [2, 1]}, timeout_ms=10000) == {KpTP("moved", 0): None}
    wait_until(lambda: metadata(admin, "moved")[0].replicas == [2, 1] and not kp.list_partition_reassignments(),
               30, "reassignment complete")
    assert metadata(admin, "moved")[0].leader == 2 and sorted(metadata(admin, "moved")[0].isrs) == [1, 2]
    c = KafkaConsumer(bootstrap_servers=bs, auto_offset_reset="earliest", consumer_timeout_ms=10000)
    c.assign([KpTP("moved", 0)])
    got = []
    for m in c:
        got.append(m.value)
        if len(got) == 50:
            break
    c.close()
    assert got == [f"v{i}".encode() for i in range(50)]

    def moved_sizes():
        out = {}
        for b in kp.describe_log_dirs():
            for d in b["log_dirs"]:
                for t in d["topics"]:
                    if t["name"] == "moved":
                        out[b["broker"]] = [(p["partition_size"], p["offset_lag"]) for p in t["partitions"]]
        return out

    sizes = wait_until(lambda: (s := moved_sizes()) and set(s) == {1, 2} and s, 20, "logs on 1 and 2 only")
    assert all(size > 0 and lag == 0 for (size, lag), in sizes.values())


def test_old_versions_on_the_wire(cluster):
    """The non-flexible versions of the new APIs decode and answer (ApiVersions lists them)."""
    fleet, brokers, bs, admin, kp = cluster
    b = brokers[0]
    with RawClient(b.host, b.port) as c:
        versions = {a.api_key: (a.min_version, a.max_version) for a in c.call(k.API_VERSIONS, 3, {}).api_keys}
        for key in (k.CREATE_PARTITIONS, k.ALTER_CONFIGS, k.INCREMENTAL_ALTER_CONFIGS, k.ELECT_LEADERS,
                    k.ALTER_PARTITION_REASSIGNMENTS, k.LIST_PARTITION_REASSIGNMENTS, k.DESCRIBE_LOG_DIRS):
            assert versions[key] == k.SUPPORTED[key]
        r = c.call(k.CREATE_PARTITIONS, 0, {"topics": [{"name": "grow", "count": 4, "assignments": None}],
                                            "timeout": 10000, "validate_only": True})
        assert r.results[0].error_code is E.none
        r = c.call(k.ALTER_CONFIGS, 0, {"resources": [{"resource_type": 2, "resource_name": "grow", "configs": [
            {"name": "min.insync.replicas", "value": "1"}]}], "validate_only": True})
        assert r.responses[0].error_code is E.none
        r = c.call(k.INCREMENTAL_ALTER_CONFIGS, 0, {"resources": [{"resource_type": 2, "resource_name": "grow", "configs": [
            {"name": "min.insync.replicas", "config_operation": 0, "value": "1"}]}], "validate_only": True})
        assert r.responses[0].error_code is E.none
        r = c.call(k.ELECT_LEADERS, 0, {"topic_partitions": [{"topic": "grow", "partitions": [0]}], "timeout": 10000})
        assert r.replica_election_results[0].partition_result[0].error_code in (E.none, E.election_not_needed)
        r = c.call(k.LIST_PARTITION_REASSIGNMENTS, 0, {"timeout": 10000, "topics": None})
        assert r.error_code is E.none
        r = c.call(k.DESCRIBE_LOG_DIRS, 1, {"topics": None})
        assert r.results[0].error_code is E.none and r.results[0].log_dir.endswith("b0")


def _raw_metadata(b, topic: str) -> tuple[list[int], list[int]]:
    """(live broker ids, replicas of partition 0 of `topic`) as broker `b` answers Metadata."""
    with RawClient(b.host, b.port) as c:
        r = c.call(k.METADATA, 12, {"topics": [{"name": topic}], "allow_auto_topic_creation": False,
                                    "include_topic_authorized_operations": False})
    parts = r.topics[0].partitions  # none while `b`'s metadata lags the CreateTopics another broker answered
    return [x.node_id for x in r.brokers], list(parts[0].replica_nodes) if parts else []


def test_a_stuck_reassignment_is_listed_and_cancelled(cluster):
    """Broker 2 paused (fenced): the replica it should add never joins the ISR, so the
    reassignment stays in progress until it is cancelled."""
    fleet, brokers, bs, admin, kp = cluster
    assert error_of(admin.create_topics([NewTopic("stuck", 1, replica_assignment=[[0, 1]])])["stuck"]) is E.none
    brokers[2].signal(signal.SIGSTOP)  # clients that pick broker 2 would wait: ask broker 0 only
    kp = None
    try:
        wait_until(lambda: (m := _raw_metadata(brokers[0], "stuck")) and 2 not in m[0] and m[1], 30,
                   "broker 2 fenced, and broker 0 knows the topic")
        # a client that never heard of broker 2; broker 0 names itself the controller
        kp = KafkaAdminClient(bootstrap_servers=brokers[0].bootstrap, request_timeout_ms=20000)
        tp = KpTP("stuck", 0)
        assert kp.alter_partition_reassignments({tp: [0, 1, 2]}, timeout_ms=10000) == {tp: None}
        time.sleep(1)
        assert kp.list_partition_reassignments() == {tp: {"replicas": [0, 1, 2], "adding_replicas": [2],
                                                          "removing_replicas": []}}
        assert kp.alter_partition_reassignments({tp: None}, timeout_ms=10000) == {tp: None}
        assert kp.list_partition_reassignments() == {}
        assert _raw_metadata(brokers[0], "stuck")[1] == [0, 1]
    finally:
        if kp is not None:
            kp.close()
        brokers[2].signal(signal.SIGCONT)


def test_admin_changes_survive_a_restart(fleet):
    """One node: the records are replayed from its metadata log file on restart."""
    b = fleet.single().start()
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    assert error_of(admin.create_topics([NewTopic("kept", 1, 1, config={"min.insync.replicas": "1"})])["kept"]) is E.none
    assert error_of(admin.create_partitions([NewPartitions("kept", 2)])["kept"]) is E.none
    res = ConfigResource("topic", "kept", incremental_configs=[
        ConfigEntry("unclean.recovery.strategy", "proactive", incremental_operation=AlterConfigOpType.SET)])
    assert error_of(admin.incremental_alter_configs([res])[res]) is E.none
    assert _alter_broker(b, "", log_retention_bytes="1000000") is E.none
    assert b.terminate() == 0
    b.start()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    c = wait_until(lambda: configs(admin, "kept"), 20, "configs after restart")
    assert c["unclean.recovery.strategy"].value == "proactive" and c["min.insync.replicas"].value == "1"
    assert (c["retention.bytes"].value, c["retention.bytes"].source) == (
        "1000000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)
    assert len(metadata(admin, "kept")) == 2
    assert "Traceback" not in b.log_text()
