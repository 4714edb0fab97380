"""The controller's admin requests (broker/core/controller.py, admin_rules.py, election.py):
CreatePartitions, CreateTopics with manual assignments and configs, AlterConfigs as
ConfigRecords, ElectLeaders, and reassignments; every change is a metadata record, so a
controller rebuilt from the log (a failover, or a restart from the file) has the same image."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode
from test_core_quorum_controller import BROKER, Net

from broker.core.controller import Controller, ControllerConfig, LocalMetadataQuorum
from broker.core.election import ElectionPolicy, change_partition, reassignment_revert, reassignment_to
from broker.core.messages import (
    CONFIG_APPEND,
    CONFIG_DELETE,
    CONFIG_SET,
    CONFIG_SUBTRACT,
    PREFERRED_ELECTION,
    UNCLEAN_ELECTION,
    AlterConfigsRequest,
    AlterPartitionRequest,
    AlterReassignmentRequest,
    BrokerHeartbeatRequest,
    BrokerIdAndEpoch,
    BrokerRegistrationRequest,
    ConfigChange,
    CreatePartitionsRequest,
    CreateTopicRequest,
    ElectLeadersRequest,
    TopicPartition,
)
from broker.core.metadata import (
    BROKER_RESOURCE,
    TOPIC_RESOURCE,
    ConfigRecord,
    PartitionRegistration,
    decode_line,
    encode_record,
    metadata_log_from_lines,
)
from broker.core.properties import Scope, in_scope

E = ErrorCode
TP = TopicPartition("t", 0)


def reply(acts):
    return acts.sends[-1].message


class Cluster:
    """A controller with brokers 1..4 registered and unfenced."""

    def __init__(self, brokers=(1, 2, 3, 4), **cfg) -> None:
        self.quorum = LocalMetadataQuorum()
        self.c = Controller(ControllerConfig(**cfg), self.quorum)
        self.epochs: dict[int, int] = {}
        for b in brokers:
            self.epochs[b] = reply(self.c.handle(b, BrokerRegistrationRequest(1, b, f"i{b}"), 0)).broker_epoch
            self.heartbeat(b)

    def heartbeat(self, b, **kw):
        return reply(self.c.handle(b, BrokerHeartbeatRequest(2, b, self.epochs[b], self.quorum.end_offset, **kw), 0))

    def ask(self, msg):
        return reply(self.c.handle("admin", msg, 0))

    def create(self, name="t", n=1, rf=3, configs=(), assignments=(), validate_only=False):
        return self.ask(CreateTopicRequest(3, name, n, rf, tuple(configs), tuple(assignments), validate_only))

    def alter_configs(self, *changes, name="t", replace=False, validate_only=False, resource=TOPIC_RESOURCE):
        return self.ask(AlterConfigsRequest(4, resource, name, tuple(changes), replace, validate_only))

    def alter_broker(self, *changes, name="", replace=False):
        return self.alter_configs(*changes, name=name, replace=replace, resource=BROKER_RESOURCE)

    def isr_add(self, tp, broker):
        """The leader asks to add `broker` to the ISR (as after it caught up)."""
        reg = self.c.image.partitions[tp]
        isr = (*reg.isr, broker)
        req = AlterPartitionRequest(9, reg.leader, self.epochs[reg.leader], tp, reg.leader_epoch, reg.partition_epoch,
                                    tuple(BrokerIdAndEpoch(b, self.epochs[b]) for b in isr))
        return reply(self.c.handle(reg.leader, req, 0))

    def reg(self, tp=TP):
        return self.c.image.partitions[tp]

    def rebuilt(self) -> Controller:
        """A controller built from this one's log, as a new active controller is."""
        return Controller(ControllerConfig(), LocalMetadataQuorum(self.quorum.log))


# ---------------------------------------------------------------- CreatePartitions
def test_create_partitions_grows_a_topic_and_refuses_to_shrink_it():
    k = Cluster()
    k.create(n=2, rf=2)
    r = k.ask(CreatePartitionsRequest(5, "t", 5))
    assert r.error is E.none
    parts = sorted(tp.partition for tp in k.c.image.partitions if tp.topic == "t")
    assert parts == [0, 1, 2, 3, 4]
    assert all(len(k.reg(TopicPartition("t", p)).replicas) == 2 for p in parts)
    assert k.ask(CreatePartitionsRequest(5, "t", 5)).error is E.invalid_partitions
    assert k.ask(CreatePartitionsRequest(5, "t", 3)).error is E.invalid_partitions
    assert k.ask(CreatePartitionsRequest(5, "nope", 3)).error is E.unknown_topic_or_partition


def test_create_partitions_validate_only_writes_nothing_and_manual_assignments_are_checked():
    k = Cluster()
    k.create(n=1, rf=2)
    end = k.quorum.end_offset
    assert k.ask(CreatePartitionsRequest(5, "t", 3, validate_only=True)).error is E.none
    assert k.quorum.end_offset == end
    bad = {((1, 2),): E.invalid_replica_assignment,  # 2 partitions added, 1 assignment
           ((1, 2), (3,)): E.invalid_replica_assignment,  # replication factor 1, not 2
           ((1, 2), (3, 9)): E.invalid_replica_assignment,  # broker 9 is not registered
           ((1, 1), (3, 4)): E.invalid_replica_assignment}
    for assignments, code in bad.items():
        assert k.ask(CreatePartitionsRequest(5, "t", 3, assignments)).error is code, assignments
    assert k.quorum.end_offset == end
    assert k.ask(CreatePartitionsRequest(5, "t", 3, ((4, 3), (2, 1)))).error is E.none
    assert k.reg(TopicPartition("t", 1)).replicas == (4, 3) and k.reg(TopicPartition("t", 1)).leader == 4
    assert k.reg(TopicPartition("t", 2)).replicas == (2, 1)


# ---------------------------------------------------------------- CreateTopics
def test_manual_assignment_is_validated_as_kafka_does():
    k = Cluster()
    k.heartbeat(4, want_fence=True)
    cases = {
        ((1, 2), (3, 3)): E.invalid_replica_assignment,  # a broker twice
        ((1, 2), (3,)): E.invalid_replica_assignment,  # replication factors differ
        ((1, 7),): E.invalid_replica_assignment,  # not registered
        ((4,),): E.invalid_replica_assignment,  # every replica fenced
        ((),): E.invalid_replica_assignment,  # empty
    }
    for assignments, code in cases.items():
        r = k.create(n=-1, rf=-1, assignments=assignments)
        assert r.error is code, (assignments, r)
        assert "t" not in k.c.image.topics
    assert k.create(n=2, rf=-1, assignments=((1, 2),)).error is E.invalid_request  # counts must be -1
    r = k.create(n=-1, rf=-1, assignments=((4, 2, 3), (3, 1, 2)))
    assert r.error is E.none
    first = k.reg()
    assert first.replicas == (4, 2, 3) and first.isr == (2, 3) and first.leader == 2  # the fenced one is out of the ISR
    assert k.reg(TopicPartition("t", 1)).leader == 3


def test_create_topic_accepts_every_topic_scoped_property_and_validate_only_writes_nothing():
    k = Cluster()
    configs = [(p.topic_name, p.default if p.default is not None else "1") for p in in_scope(Scope.TOPIC)]
    assert configs, "the table has topic-scoped properties"
    end = k.quorum.end_offset
    assert k.create(configs=configs, validate_only=True).error is E.none
    assert k.quorum.end_offset == end and "t" not in k.c.image.topics
    assert k.create(configs=configs).error is E.none
    assert set(k.c.image.topics["t"]) == {name for name, _ in configs}
    assert k.create(name="u", configs=[("no.such.config", "1")]).error is E.invalid_config
    assert k.create(name="u", configs=[("min.insync.replicas", "zero")]).error is E.invalid_config
    assert k.create(name="u", rf=5).error is E.invalid_replication_factor
    assert k.create(name="t").error is E.topic_already_exists


# ---------------------------------------------------------------- AlterConfigs
def test_incremental_alter_configs_set_delete_append_subtract():
    k = Cluster()
    k.create()
    assert k.alter_configs(ConfigChange("min.insync.replicas", CONFIG_SET, "2")).error is E.none
    assert k.c.image.topics["t"] == {"min.insync.replicas": "2"} and k.c.min_isr("t") == 2
    assert isinstance(k.quorum.log.records[-1], ConfigRecord)
    assert k.alter_configs(ConfigChange("wrack.safeguards.off", CONFIG_APPEND, "elr")).error is E.none
    assert k.alter_configs(ConfigChange("wrack.safeguards.off", CONFIG_APPEND, "leso-check,elr")).error is E.none
    assert k.c.image.topics["t"]["wrack.safeguards.off"] == "elr,leso-check"
    assert k.alter_configs(ConfigChange("wrack.safeguards.off", CONFIG_SUBTRACT, "elr")).error is E.none
    assert k.c.image.topics["t"]["wrack.safeguards.off"] == "leso-check"
    assert k.alter_configs(ConfigChange("min.insync.replicas", CONFIG_DELETE)).error is E.none
    assert "min.insync.replicas" not in k.c.image.topics["t"] and k.c.min_isr("t") == 1
    end = k.quorum.end_offset
    assert k.alter_configs(ConfigChange("min.insync.replicas", CONFIG_DELETE)).error is E.none
    assert k.quorum.end_offset == end  # nothing changed, nothing written


def test_alter_configs_errors_in_kafka_s_order_and_validate_only():
    k = Cluster()
    k.create()
    end = k.quorum.end_offset
    errors = {
        (ConfigChange("min.insync.replicas", CONFIG_APPEND, "2"),): E.invalid_config,  # not a list
        (ConfigChange("min.insync.replicas", CONFIG_SET, "-1"),): E.invalid_config,
        (ConfigChange("no.such", CONFIG_SET, "1"),): E.invalid_config,
        (ConfigChange("min.insync.replicas", CONFIG_SET, None),): E.invalid_request,
        (ConfigChange("min.insync.replicas", CONFIG_SET, "2"), ConfigChange("min.insync.replicas", CONFIG_DELETE)):
            E.invalid_request,
        (ConfigChange("min.insync.replicas", 7, "2"),): E.invalid_request,
    }
    for changes, code in errors.items():
        assert k.alter_configs(*changes).error is code, changes
    assert k.alter_configs(ConfigChange("min.insync.replicas", CONFIG_SET, "2"), name="nope").error \
        is E.unknown_topic_or_partition
    assert k.alter_configs(ConfigChange("min.insync.replicas", CONFIG_SET, "2"), validate_only=True).error is E.none
    assert k.quorum.end_offset == end


def test_legacy_alter_configs_replaces_the_whole_set():
    k = Cluster()
    k.create(configs=[("min.insync.replicas", "2"), ("unclean.leader.election.enable", "true")])
    assert k.alter_configs(ConfigChange("unclean.recovery.strategy", CONFIG_SET, "proactive"), replace=True).error is E.none
    assert k.c.image.topics["t"] == {"unclean.recovery.strategy": "proactive"}


def test_unknown_topic_comes_before_unknown_keys_and_legacy_duplicates_take_the_last_value():
    """KRaft checks the topic exists before validating its keys (librdkafka 0081); a legacy
    AlterConfigs that names a key twice (librdkafka sets back what it read, then the
    change) takes the last value, IncrementalAlterConfigs refuses it."""
    k = Cluster()
    k.create()
    assert k.alter_configs(ConfigChange("no.such", CONFIG_SET, "1"), name="nope").error is E.unknown_topic_or_partition
    twice = (ConfigChange("min.insync.replicas", CONFIG_SET, "1"), ConfigChange("min.insync.replicas", CONFIG_SET, "2"))
    assert k.alter_configs(*twice, replace=True).error is E.none
    assert k.c.image.topics["t"] == {"min.insync.replicas": "2"}
    assert k.alter_configs(*twice).error is E.invalid_request


def test_enabling_unclean_election_elects_a_leaderless_partition():
    k = Cluster(brokers=(1, 2))
    k.create(rf=2, configs=[("min.insync.replicas", "1")])
    k.heartbeat(2, want_fence=True)  # ISR {1}
    k.heartbeat(1, want_fence=True)  # no leader, ISR keeps 1 or ELR holds it
    assert k.reg().leader == -1
    k.heartbeat(2)  # 2 is back, but out of sync: no clean election
    assert k.reg().leader == -1
    assert k.alter_configs(ConfigChange("unclean.leader.election.enable", CONFIG_SET, "true")).error is E.none
    assert k.reg().leader == 2


# ---------------------------------------------------------------- dynamic broker configs
def test_dynamic_broker_configs_are_records_and_topic_defaults_below_the_topic_s_own():
    """A topic config's synonym set on the cluster-wide default ("") or on one broker is
    the default of the topics that do not set it: topic > that broker's > cluster's > static."""
    k = Cluster()
    k.create(configs=[("retention.ms", "5000")])
    k.create(name="u")
    assert k.alter_broker(ConfigChange("log.retention.ms", CONFIG_SET, "60000"),
                          ConfigChange("min.insync.replicas", CONFIG_SET, "2")).error is E.none
    assert k.alter_broker(ConfigChange("log.retention.ms", CONFIG_SET, "30000"), name="2").error is E.none
    image = k.c.image
    assert image.broker_configs == {"": {"log.retention.ms": "60000", "min.insync.replicas": "2"},
                                    "2": {"log.retention.ms": "30000"}}
    assert image.topic_config("t", "retention.ms", "1") == "5000"  # the topic's own
    assert image.topic_config("u", "retention.ms", "1") == "60000"  # the cluster's
    assert image.topic_config("u", "retention.ms", "1", node_id=2) == "30000"  # broker 2's
    assert image.topic_config("u", "retention.ms", "1", node_id=3) == "60000"
    assert image.topic_defaults(2) == {"retention.ms": "30000", "min.insync.replicas": "2"}
    assert k.c.min_isr("u") == 2
    assert k.alter_broker(ConfigChange("min.insync.replicas", CONFIG_DELETE, None)).error is E.none
    assert k.c.min_isr("u") == 1 and image.broker_configs[""] == {"log.retention.ms": "60000"}
    assert k.rebuilt().image.broker_configs == image.broker_configs


def test_dynamic_broker_configs_refused_as_kafka_refuses_them():
    k = Cluster()
    end = k.quorum.end_offset
    for name, change, code, text in (
            ("", ConfigChange("num.partitions", CONFIG_SET, "3"), E.invalid_request, "Cannot update these configs dynamically"),
            ("1", ConfigChange("node.id", CONFIG_SET, "3"), E.invalid_request, "Cannot update these configs dynamically"),
            ("1", ConfigChange("wrack.flush.policy", CONFIG_SET, "x"), E.invalid_request, "dynamically"),
            ("", ConfigChange("advertised.listeners", CONFIG_SET, "PLAINTEXT://h:1"), E.invalid_request,
             "broker id must be specified"),
            ("1", ConfigChange("advertised.listeners", CONFIG_SET, "PLAINTEXT://h:1"), E.invalid_request,
             "reconfiguration of listeners"),
            ("x", ConfigChange("log.retention.ms", CONFIG_SET, "1"), E.invalid_request, "Invalid broker name"),
            ("", ConfigChange("log.retention.ms", CONFIG_SET, "soon"), E.invalid_config, "log.retention.ms"),
            ("", ConfigChange("log.retention.ms", CONFIG_APPEND, "1"), E.invalid_config, "not LIST")):
        r = k.alter_broker(change, name=name)
        assert (r.error, text in r.message) == (code, True), (change, r)
    assert k.quorum.end_offset == end


def test_unknown_broker_configs_are_accepted_and_legacy_alter_configs_replaces_a_broker_s_set():
    """Kafka accepts configs it does not define on a broker (librdkafka 0081 sets
    sasl.kerberos.min.time.before.relogin, for listeners this broker has not)."""
    k = Cluster()
    assert k.alter_broker(ConfigChange("sasl.kerberos.min.time.before.relogin", CONFIG_SET, "58000"),
                          ConfigChange("num.io.threads", CONFIG_SET, "8"), name="1").error is E.none
    assert k.c.image.broker_configs["1"] == {"sasl.kerberos.min.time.before.relogin": "58000", "num.io.threads": "8"}
    assert k.alter_broker(ConfigChange("log.segment.bytes", CONFIG_SET, "1048576"), name="1", replace=True).error is E.none
    assert k.c.image.broker_configs["1"] == {"log.segment.bytes": "1048576"}
    assert k.alter_broker(name="1", replace=True).error is E.none and "1" not in k.c.image.broker_configs


def test_enabling_unclean_election_as_a_broker_default_elects_a_leaderless_partition():
    k = Cluster(brokers=(1, 2))
    k.create(rf=2, configs=[("min.insync.replicas", "1")])
    k.heartbeat(2, want_fence=True)
    k.heartbeat(1, want_fence=True)
    k.heartbeat(2)
    assert k.reg().leader == -1
    assert k.alter_broker(ConfigChange("unclean.leader.election.enable", CONFIG_SET, "true")).error is E.none
    assert k.reg().leader == 2


# ---------------------------------------------------------------- ElectLeaders
def test_preferred_election_moves_the_leadership_to_the_first_replica():
    k = Cluster()
    k.create(n=-1, rf=-1, assignments=((1, 2, 3),))
    ask = ElectLeadersRequest(6, TP, PREFERRED_ELECTION)
    assert k.ask(ask).error is E.election_not_needed
    k.heartbeat(1, want_fence=True)
    assert k.reg().leader == 2
    assert k.ask(ask).error is E.preferred_leader_not_available  # 1 is fenced (and out of the ISR)
    k.heartbeat(1)
    k.isr_add(TP, 1)
    epoch = k.reg().leader_epoch
    r = k.ask(ask)
    assert r.error is E.none and r.leader == 1 and k.reg().leader == 1 and k.reg().leader_epoch == epoch + 1
    assert k.ask(ElectLeadersRequest(6, TP, UNCLEAN_ELECTION)).error is E.election_not_needed
    assert k.ask(ElectLeadersRequest(6, TopicPartition("t", 9), PREFERRED_ELECTION)).error is E.unknown_topic_or_partition


# ---------------------------------------------------------------- reassignments
def test_a_reassignment_adds_replicas_waits_for_the_isr_then_removes_the_old_ones():
    k = Cluster()
    k.create(n=-1, rf=-1, assignments=((1, 2, 3),))
    assert k.ask(AlterReassignmentRequest(7, TP, (4, 2, 3))).error is E.none
    reg = k.reg()
    assert (reg.replicas, reg.adding_replicas, reg.removing_replicas) == ((4, 2, 3, 1), (4,), (1,))
    assert set(reg.isr) == {1, 2, 3}
    assert reg.leader == 1
    epoch = reg.leader_epoch
    r = k.isr_add(TP, 4)  # 4 caught up: the reassignment completes, 1 leaves (and led)
    assert r.error is E.new_leader_elected
    reg = k.reg()
    assert reg.replicas == (4, 2, 3) and set(reg.isr) == {2, 3, 4} and not reg.reassigning
    assert reg.leader == 4 and reg.leader_epoch == epoch + 1


def test_reordering_completes_at_once_and_removing_bumps_the_leader_epoch():
    k = Cluster()
    k.create(n=-1, rf=-1, assignments=((1, 2, 3),))
    assert k.ask(AlterReassignmentRequest(7, TP, (3, 2, 1))).error is E.none
    reg = k.reg()
    assert reg.replicas == (3, 2, 1) and not reg.reassigning and reg.leader == 1
    epoch = reg.leader_epoch
    assert k.ask(AlterReassignmentRequest(7, TP, (1, 2))).error is E.none  # 3 leaves at once: all targets in the ISR
    assert k.reg().replicas == (1, 2) and k.reg().leader_epoch == epoch + 1 and k.reg().leader == 1


def test_cancel_reverts_and_targets_are_validated():
    k = Cluster()
    k.create(n=-1, rf=-1, assignments=((1, 2),))
    assert k.ask(AlterReassignmentRequest(7, TP, None)).error is E.no_reassignment_in_progress
    for bad in ((), (1, 1), (1, 9)):
        assert k.ask(AlterReassignmentRequest(7, TP, bad)).error is E.invalid_replica_assignment, bad
    assert k.ask(AlterReassignmentRequest(7, TP, (3, 4, 1), allow_rf_change=False)).error is E.invalid_replication_factor
    assert k.ask(AlterReassignmentRequest(7, TopicPartition("x", 0), (1,))).error is E.unknown_topic_or_partition
    assert k.ask(AlterReassignmentRequest(7, TP, (3, 4))).error is E.none
    assert k.reg().adding_replicas == (3, 4) and k.reg().removing_replicas == (1, 2)
    assert k.ask(AlterReassignmentRequest(7, TP, None)).error is E.none
    reg = k.reg()
    assert reg.replicas == (1, 2) and set(reg.isr) == {1, 2} and not reg.reassigning and reg.leader == 1


# ---------------------------------------------------------------- failover and the log file
def _exercise(k: Cluster) -> None:
    k.create(n=2, rf=2, configs=[("min.insync.replicas", "2")])
    k.ask(CreatePartitionsRequest(5, "t", 3))
    k.alter_configs(ConfigChange("unclean.recovery.strategy", CONFIG_SET, "proactive"))
    k.ask(AlterReassignmentRequest(7, TP, (3, 4)))  # left in progress
    k.ask(AlterReassignmentRequest(7, TopicPartition("t", 1), tuple(reversed(k.reg(TopicPartition("t", 1)).replicas))))


def test_a_controller_rebuilt_from_the_log_has_every_admin_change():
    k = Cluster()
    _exercise(k)
    new = k.rebuilt()
    assert new.image.topics == k.c.image.topics == {"t": {"min.insync.replicas": "2", "unclean.recovery.strategy": "proactive"}}
    assert new.image.partitions == k.c.image.partitions
    assert new.image.partitions[TP].adding_replicas == (3, 4)
    # the new controller completes what the old one started
    k2 = Cluster.__new__(Cluster)
    k2.quorum, k2.c, k2.epochs = LocalMetadataQuorum(k.quorum.log), new, k.epochs
    k2.isr_add(TP, 3)
    k2.isr_add(TP, 4)
    assert k2.reg().replicas == (3, 4) and not k2.reg().reassigning


def test_admin_records_survive_the_metadata_log_file():
    k = Cluster()
    _exercise(k)
    lines = [encode_record(off, rec) for off, rec in enumerate(k.quorum.log.records)]
    log = metadata_log_from_lines(lines)
    assert log.records == k.quorum.log.records
    old = b'{"offset": 0, "type": "PartitionRecord", "tp": ["t", 0], "registration": {"replicas": [1], "isr": [1], ' \
          b'"leader": 1, "leader_epoch": 0, "partition_epoch": 0, "elr": [], "last_known_elr": [], ' \
          b'"leader_recovery_state": 0}}\n'
    _off, rec = decode_line(old)  # written before reassignments existed
    assert rec.registration.adding_replicas == () and rec.registration.replicas == (1,)


def test_admin_records_replay_on_the_new_active_controller_after_failover():
    net = Net(seed=3)
    net.run(4000)
    (leader,) = net.active()
    net.send(leader, BrokerRegistrationRequest(1, BROKER, "inc-a"))
    net.run(200)
    epoch = next(m for _, m in net.inbox if hasattr(m, "broker_epoch")).broker_epoch
    net.send(leader, BrokerHeartbeatRequest(2, BROKER, epoch, 1 << 40))
    net.run(200)
    net.send(leader, CreateTopicRequest(3, "t", -1, -1, (("min.insync.replicas", "1"),), ((BROKER,),)))
    net.send(leader, AlterConfigsRequest(4, TOPIC_RESOURCE, "t", (ConfigChange("unclean.leader.election.enable", CONFIG_SET,
                                                                                  "true"),)))
    net.send(leader, CreatePartitionsRequest(5, "t", 2, ((BROKER,),)))
    net.run(500)
    answers = {type(m).__name__: m.error for _, m in net.inbox if type(m).__name__.endswith(("TopicResponse",
                                                                                             "ConfigsResponse",
                                                                                             "PartitionsResponse"))}
    assert answers == {"CreateTopicResponse": E.none, "AlterConfigsResponse": E.none, "CreatePartitionsResponse": E.none}
    net.down.add(leader)
    net.run(6000)
    (new,) = net.active()
    image = net.nodes[new].controller.image
    assert new != leader
    assert image.topics["t"] == {"min.insync.replicas": "1", "unclean.leader.election.enable": "true"}
    assert sorted(tp.partition for tp in image.partitions if tp.topic == "t") == [0, 1]


# ---------------------------------------------------------------- the reassignment rules (pure)
_ids = st.lists(st.integers(0, 6), min_size=1, max_size=5, unique=True)


@settings(max_examples=300, deadline=None)
@given(_ids, _ids, st.data())
def test_a_reassignment_completes_exactly_when_the_isr_holds_the_target(current, target, data):
    current, target = tuple(current), tuple(target)
    isr = tuple(data.draw(st.lists(st.sampled_from(current), min_size=1, unique=True)))
    reg = PartitionRegistration(replicas=current, isr=isr, leader=isr[0], leader_epoch=3, partition_epoch=5)
    policy, usable = ElectionPolicy(min_isr=1), lambda b: True
    a = reassignment_to(reg, target)
    assert a.replicas[:len(target)] == target and set(a.replicas) == set(current) | set(target)
    assert set(a.adding) == set(target) - set(current) and set(a.removing) == set(current) - set(target)
    res = change_partition(reg, target_isr=isr, usable=usable, policy=policy, assignment=a)
    started = reg if res is None else res.registration
    if set(target) <= set(isr):  # nothing to wait for: done at once
        assert started.replicas == target and not started.reassigning and set(started.isr) == set(isr) & set(target)
    else:
        assert started.replicas == a.replicas and started.leader == reg.leader
        assert (started.adding_replicas, started.removing_replicas) == (a.adding, a.removing)
    # every target replica caught up: the change that adds them completes the move
    res = change_partition(started, target_isr=set(started.isr) | set(target), usable=usable, policy=policy)
    done = started if res is None else res.registration
    assert done.replicas == target and not done.reassigning
    assert set(done.isr) <= set(target) and done.leader in done.isr
    fenced = not set(current) <= set(target) or done.leader != reg.leader  # replicas left, or the leader moved
    assert (done.leader_epoch > reg.leader_epoch) if fenced else (done.leader_epoch == reg.leader_epoch)
    # cancelling instead restores the original replicas, with an ISR drawn from them
    if started.reassigning:
        original, revert_isr, _unclean = reassignment_revert(started)
        assert set(original.replicas) == set(current) and set(revert_isr) <= set(current)  # order: as KRaft, target first
