"""The controller: registration, heartbeats and fencing, topics, AlterPartition checks."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from broker.core import safeguards as sg
from broker.core.controller import Controller, ControllerConfig
from broker.core.messages import (
    AlterPartitionRequest,
    AlterPartitionResponse,
    BrokerHeartbeatRequest,
    BrokerIdAndEpoch,
    BrokerRegistrationRequest,
    CreateTopicRequest,
    MetadataFetchRequest,
    MetadataFetchResponse,
    TopicPartition,
)
from broker.core.metadata import PartitionChangeRecord

TP = TopicPartition("t", 0)


def reply(acts):
    assert len(acts.sends) >= 1
    return acts.sends[-1].message


class Cluster:
    """A controller with brokers 1..3 registered, unfenced, and topic t (RF 3)."""

    def __init__(self, **cfg):
        self.c = Controller(ControllerConfig(**cfg))
        self.now = 0
        self.epochs = {}
        for b in (1, 2, 3):
            self.register(b)
            self.heartbeat(b)

    def register(self, b, incarnation=None, previous=-1):
        r = reply(self.c.handle(b, BrokerRegistrationRequest(1, b, incarnation or f"i{b}", previous), self.now))
        if r.error is ErrorCode.none:
            self.epochs[b] = r.broker_epoch
        return r

    def heartbeat(self, b, **kw):
        req = BrokerHeartbeatRequest(2, b, self.epochs[b], self.c.quorum.end_offset - 1, **kw)  # last applied offset
        return reply(self.c.handle(b, req, self.now))

    def create(self, **configs):
        return reply(self.c.handle("admin", CreateTopicRequest(3, "t", 1, 3, tuple(configs.items())), self.now))

    def alter(self, isr, leader=1, partition_epoch=None, leader_epoch=None, broker_epoch=None, epochs=None):
        reg = self.c.image.partitions[TP]
        req = AlterPartitionRequest(
            9, leader, self.epochs[leader] if broker_epoch is None else broker_epoch, TP,
            reg.leader_epoch if leader_epoch is None else leader_epoch,
            reg.partition_epoch if partition_epoch is None else partition_epoch,
            tuple(BrokerIdAndEpoch(b, (epochs or {}).get(b, self.epochs[b])) for b in isr),
        )
        return reply(self.c.handle(leader, req, self.now))

    @property
    def reg(self):
        return self.c.image.partitions[TP]


def test_registration_hands_out_monotonic_epochs_and_brokers_start_fenced():
    c = Controller(ControllerConfig())
    e1 = reply(c.handle(1, BrokerRegistrationRequest(1, 1, "a"), 0)).broker_epoch
    e2 = reply(c.handle(2, BrokerRegistrationRequest(1, 2, "b"), 0)).broker_epoch
    assert e2 > e1 and c.image.brokers[1].fenced
    r = reply(c.handle(1, BrokerHeartbeatRequest(2, 1, e1, c.quorum.end_offset), 10))
    assert r.error is ErrorCode.none and not r.is_fenced and not c.image.brokers[1].fenced


def test_heartbeat_with_a_stale_epoch_is_rejected():
    k = Cluster()
    r = reply(k.c.handle(1, BrokerHeartbeatRequest(2, 1, k.epochs[1] - 1, 0), 0))
    assert r.error is ErrorCode.stale_broker_epoch


def test_a_new_incarnation_replaces_the_live_one_at_once():
    """A restarted broker (new incarnation) is registered while its old session is still
    alive: the old epoch is fenced at once, it leaves the leadership and the ISR, and its
    requests are stale from then on (issue 14: back in service within 2 s of a restart)."""
    k = Cluster(broker_session_timeout_ms=9000)
    k.create()
    old = k.epochs[1]
    assert k.reg.leader == 1
    k.now = 500
    r = k.register(1, incarnation="restarted", previous=-1)
    assert r.error is ErrorCode.none and r.broker_epoch > old
    assert k.c.image.brokers[1].fenced and k.c.image.brokers[1].incarnation_id == "restarted"
    assert k.reg.leader != 1 and 1 not in k.reg.isr  # the dead incarnation leads nothing
    assert reply(k.c.handle(1, BrokerHeartbeatRequest(2, 1, old, 0), k.now)).error is ErrorCode.stale_broker_epoch
    hb = k.heartbeat(1)  # the new incarnation, caught up: unfenced
    assert hb.error is ErrorCode.none and not k.c.image.brokers[1].fenced


def test_session_timeout_fences_and_elects():
    k = Cluster(broker_session_timeout_ms=9000)
    k.create()
    assert k.reg.leader == 1
    k.now = 5000
    for b in (2, 3):
        k.heartbeat(b)
    k.c.tick(9500)
    assert k.c.image.brokers[1].fenced and k.reg.leader == 2 and k.reg.isr == (2, 3) and k.reg.leader_epoch == 1


def test_create_topic_places_replicas_and_validates():
    k = Cluster()
    assert k.create(**{"min.insync.replicas": "2"}).error is ErrorCode.none
    assert k.reg.replicas == (1, 2, 3) and k.reg.isr == (1, 2, 3) and k.reg.leader == 1
    assert k.create().error is ErrorCode.topic_already_exists
    bad = reply(k.c.handle("a", CreateTopicRequest(4, "u", 1, 3, (("wrack.safeguards.off", "bogus"),)), 0))
    assert bad.error is ErrorCode.invalid_config and "bogus" in bad.message
    bad = reply(k.c.handle("a", CreateTopicRequest(4, "u", 1, 4), 0))
    assert bad.error is ErrorCode.invalid_replication_factor


def test_alter_partition_success_bumps_the_partition_epoch():
    k = Cluster()
    k.create(**{"min.insync.replicas": "2"})
    r = k.alter((1, 2))
    assert isinstance(r, AlterPartitionResponse) and r.error is ErrorCode.none
    assert r.isr == (1, 2) and r.partition_epoch == 1 and k.reg.isr == (1, 2)


def test_alter_partition_checks_in_kafkas_order():
    k = Cluster()
    k.create()
    k.alter((1, 2))  # partition epoch 1
    assert k.alter((1, 2, 3), broker_epoch=k.epochs[1] - 1).error is ErrorCode.stale_broker_epoch
    assert k.alter((1, 2, 3), leader_epoch=5).error is ErrorCode.not_controller
    assert k.alter((1, 2, 3), partition_epoch=5).error is ErrorCode.not_controller
    assert k.alter((1, 2, 3), leader_epoch=-1).error is ErrorCode.fenced_leader_epoch
    assert k.alter((1, 2, 3), leader=2).error is ErrorCode.invalid_request
    assert k.alter((1, 2, 3), partition_epoch=0).error is ErrorCode.invalid_update_version
    assert k.alter((2, 3)).error is ErrorCode.invalid_request  # leader missing
    assert k.alter((1, 2, 3), epochs={3: k.epochs[3] - 1}).error is ErrorCode.ineligible_replica
    k.heartbeat(3, want_fence=True)
    assert k.alter((1, 2, 3)).error is ErrorCode.ineligible_replica  # fenced (KIP-841)


def test_switching_the_epoch_checks_off_accepts_stale_requests():
    off = sg.SafeguardSet(frozenset({sg.PARTITION_EPOCH_CHECK, sg.BROKER_EPOCH_CHECK}))
    k = Cluster(safeguards=off)
    k.create()
    k.alter((1, 2))
    r = k.alter((1, 2, 3), partition_epoch=0, epochs={3: 12345})
    assert r.error is ErrorCode.none and k.reg.isr == (1, 2, 3)


def test_unclean_registration_moves_the_broker_from_elr_to_last_known_elr():
    k = Cluster()
    k.create(**{"min.insync.replicas": "2"})
    k.alter((1, 3))
    k.alter((1,))
    assert k.reg.elr == (3,)
    k.now = 20000
    k.heartbeat(1)
    k.heartbeat(2)
    k.c.tick(k.now)  # 3's session expired
    assert k.c.image.brokers[3].fenced and k.reg.elr == (3,)
    k.register(3, incarnation="new", previous=-1)
    assert k.reg.elr == () and k.reg.last_known_elr == (3,)


def test_clean_registration_keeps_the_elr():
    k = Cluster()
    k.create(**{"min.insync.replicas": "2"})
    k.alter((1, 3))
    k.alter((1,))
    old = k.epochs[3]
    k.now = 20000
    k.heartbeat(1)
    k.c.tick(k.now)
    k.register(3, incarnation="new", previous=old)
    assert k.reg.elr == (3,)


def test_controlled_shutdown_moves_leadership_then_says_shut_down():
    k = Cluster()
    k.create()
    r = k.heartbeat(1, want_shut_down=True)
    assert k.reg.leader == 2 and 1 not in k.reg.isr
    assert not r.should_shut_down  # the broker has not seen the changes yet
    r = k.heartbeat(1, want_shut_down=True)  # now with the newer metadata offset
    assert r.should_shut_down and k.c.image.brokers[1].fenced


def test_metadata_fetch_parks_until_a_record_is_committed():
    k = Cluster()
    end = k.c.quorum.end_offset
    acts = k.c.handle(1, MetadataFetchRequest(5, 1, end, 500), 0)
    assert acts.sends == []
    acts = k.c.handle("admin", CreateTopicRequest(3, "t", 1, 3), 10)
    fetched = [s.message for s in acts.sends if isinstance(s.message, MetadataFetchResponse)]
    assert fetched and any(isinstance(r, PartitionChangeRecord) or r for r in fetched[0].records)
    acts = k.c.handle(1, MetadataFetchRequest(6, 1, k.c.quorum.end_offset, 500), 20)
    assert acts.sends == [] and k.c.next_deadline() <= 520
    assert isinstance(k.c.tick(520).sends[0].message, MetadataFetchResponse)


def test_min_isr_above_the_replication_factor_is_capped():
    k = Cluster()
    reply(k.c.handle("admin", CreateTopicRequest(3, "t", 1, 1, (("min.insync.replicas", "2"),)), 0))
    assert k.reg.replicas == (1,) and k.reg.elr == ()
    k.heartbeat(1, want_fence=True)
    assert k.reg.leader == -1 and k.reg.elr == (1,)  # ISR 0 < effective min ISR 1


# ---------------------------------------------------------------- metadata batches
def test_parked_fetch_gets_a_whole_create_topics_batch():
    """Regression: parked fetches were answered after every record, so a broker's image
    held a topic without (all) its partitions and Metadata answered it partially."""
    cl = Cluster()
    end = cl.c.quorum.end_offset
    assert cl.c.handle(1, MetadataFetchRequest(50, 1, end, 500), cl.now).sends == []  # parked
    acts = cl.c.handle("admin", CreateTopicRequest(3, "big", 4, 3), cl.now)
    fetches = [s.message for s in acts.sends if isinstance(s.message, MetadataFetchResponse)]
    assert len(fetches) == 1 and len(fetches[0].records) == 5  # TopicRecord + 4 PartitionRecords
    assert acts.sends[-1].message.error is ErrorCode.none  # the admin answer comes after the fetch


def test_fetch_cap_never_cuts_a_batch():
    c = Controller(ControllerConfig(max_metadata_records_per_fetch=3))
    c.handle(1, BrokerRegistrationRequest(1, 1, "i1"), 0)  # offset 0
    c.handle(1, BrokerHeartbeatRequest(2, 1, 0, 0), 0)  # offset 1: unfenced
    c.handle("admin", CreateTopicRequest(3, "a", 4, 1), 0)  # offsets 2-6 (one batch)
    c.handle("admin", CreateTopicRequest(4, "b", 1, 1), 0)  # offsets 7-8
    sizes = []
    off = 0
    while off < c.quorum.end_offset:
        r = reply(c.handle(1, MetadataFetchRequest(9, 1, off, 0), 0))
        sizes.append(len(r.records))
        off += len(r.records)
    assert sizes == [2, 5, 2]  # capped at 3 but the 5-record batch goes whole


def test_unfencing_record_reaches_the_broker_before_the_heartbeat_answer():
    c = Controller(ControllerConfig())
    epoch = reply(c.handle(1, BrokerRegistrationRequest(1, 1, "i1"), 0)).broker_epoch
    r = reply(c.handle(1, MetadataFetchRequest(2, 1, 0, 500), 0))
    assert c.handle(1, MetadataFetchRequest(3, 1, len(r.records), 500), 0).sends == []  # parked
    acts = c.handle(1, BrokerHeartbeatRequest(4, 1, epoch, len(r.records) - 1), 10)
    kinds = [type(s.message).__name__ for s in acts.sends]
    assert kinds == ["MetadataFetchResponse", "BrokerHeartbeatResponse"]
    assert acts.sends[1].message.is_fenced is False
