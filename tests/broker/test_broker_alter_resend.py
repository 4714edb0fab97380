"""A leader's AlterPartition requests go through a channel like Kafka's controller channel
(broker/core/alter_channel.py `AlterPartitionChannel`): one request per partition in flight until answered,
sent again, unchanged, whenever the link to the controller breaks, also after newer metadata
replaced the proposal (the request may then reach the controller after the controller changed
the partition: what the partition-epoch and broker-epoch checks are for; the real-node
`wipe-follower` and `stale-alter-partition` stories rely on it). A newer proposal waits
behind the unanswered one."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from broker.core.messages import Actions, AlterPartitionRequest, AlterPartitionResponse, TopicPartition
from broker.sim.cluster import ClusterSettings, SimCluster

TP = TopicPartition("t", 0)


def leader_with_alter_in_flight():
    c = SimCluster(1, ClusterSettings(brokers=3))
    c.run_for(3000)
    c.create_topic("t", 1, 3, {"min.insync.replicas": "2"})
    c.run_for(2000)
    leader = c.brokers[c.leader(TP)].broker
    r = leader.partitions[TP]
    req = r._alter_request(r.isr[:2], r.recovery_state, c.now, leader.image)  # a shrink, not yet answered
    leader.alter_channel.send(req, c.now, Actions())
    return c, leader, r, req


def alters(acts: Actions) -> list[AlterPartitionRequest]:
    return [s.message for s in acts.sends if isinstance(s.message, AlterPartitionRequest)]


def test_an_unanswered_alter_partition_is_sent_again_on_a_broken_controller_link():
    c, leader, r, req = leader_with_alter_in_flight()
    assert alters(leader.controller_connection_lost(c.now + 10)) == [req]  # same correlation id, epochs, ISR


def test_it_is_sent_again_even_after_newer_metadata_replaced_the_proposal():
    c, leader, r, req = leader_with_alter_in_flight()
    r.pending_alter = None  # what apply_registration does on a newer partition epoch
    assert alters(leader.controller_connection_lost(c.now)) == [req]


def test_a_newer_proposal_waits_for_the_answer_and_an_answered_one_is_not_sent_again():
    c, leader, r, req = leader_with_alter_in_flight()
    r.pending_alter = None
    newer = r._alter_request(r.isr[:1], r.recovery_state, c.now, leader.image)
    acts = Actions()
    leader.alter_channel.send(newer, c.now, acts)
    assert alters(acts) == []  # queued behind the unanswered request
    acts = Actions()
    answer = AlterPartitionResponse(req.correlation_id, TP, ErrorCode.invalid_update_version)
    leader.alter_channel.answered(answer, c.now, acts)
    assert alters(acts) == [newer]
    assert alters(leader.controller_connection_lost(c.now)) == [newer]  # the answered one is gone


def test_an_unanswered_request_is_sent_again_after_the_request_timeout():
    """A lost answer without a broken link (the simulation drops messages): the request
    goes again after the request timeout, or the partition's next proposal waits forever."""
    c, leader, r, req = leader_with_alter_in_flight()
    r.pending_alter = None
    assert req not in alters(leader.tick(c.now + 1))
    assert req in alters(leader.tick(c.now + leader.config.request_timeout_ms))
