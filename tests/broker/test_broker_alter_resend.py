"""A leader sends its pending AlterPartition again, unchanged, when its link to the controller
breaks (Kafka's AlterPartitionManager retries on a disconnect): the request may then reach the
controller after the controller changed the partition (the real-node `wipe-follower` story
relies on it)."""

from __future__ import annotations

from broker.core.messages import AlterPartitionRequest, TopicPartition
from broker.sim.cluster import ClusterSettings, SimCluster

TP = TopicPartition("t", 0)


def leader_with_pending_alter():
    c = SimCluster(1, ClusterSettings(brokers=3))
    c.run_for(3000)
    c.create_topic("t", 1, 3, {"min.insync.replicas": "2"})
    c.run_for(2000)
    leader = c.brokers[c.leader(TP)].broker
    r = leader.partitions[TP]
    req = r._alter_request(r.isr[:2], r.recovery_state, c.now, leader.image)  # a shrink, not yet answered
    return c, leader, r, req


def test_pending_alter_partition_is_sent_again_on_a_broken_controller_link():
    c, leader, r, req = leader_with_pending_alter()
    acts = leader.controller_connection_lost(c.now + 10)
    sent = [(to, m) for to, m in ((s.to, s.message) for s in acts.sends) if isinstance(m, AlterPartitionRequest)]
    assert sent == [(leader.config.controller_id, req)]  # the same request: same correlation id, epochs, ISR
    assert r.pending_alter is not None and r.pending_alter.sent_at == c.now + 10


def test_an_answered_or_outdated_alter_partition_is_not_sent_again():
    c, leader, r, req = leader_with_pending_alter()
    r.pending_alter.outdated = True
    assert not [s for s in leader.controller_connection_lost(c.now).sends if isinstance(s.message, AlterPartitionRequest)]
    r.pending_alter = None
    assert not [s for s in leader.controller_connection_lost(c.now).sends if isinstance(s.message, AlterPartitionRequest)]
