"""Broker lifecycle on the simulation: registration, fencing, controlled shutdown with the
clean-shutdown file, HWM checkpoints, leadership following restarts."""

from __future__ import annotations

from broker.core.broker import RUNNING
from broker.core.messages import TopicPartition
from broker.sim.cluster import SimCluster

TP = TopicPartition("t", 0)


def started(seed=11):
    c = SimCluster(seed)
    c.run_for(3000)
    assert c.create_topic("t", 1, 3, {"min.insync.replicas": "2"}).error.value == 0
    return c


def test_brokers_register_with_increasing_epochs_and_run_unfenced():
    c = started()
    epochs = [c.brokers[i].broker.broker_epoch for i in (1, 2, 3)]
    assert len(set(epochs)) == 3 and all(c.brokers[i].broker.state == RUNNING for i in (1, 2, 3))
    assert not any(b.fenced for b in c.controller.image.brokers.values())


def test_controlled_shutdown_writes_the_clean_marker_and_keeps_eligibility():
    c = started()
    assert c.produce_and_wait(TP, b"x") is not None
    epoch = c.brokers[1].broker.broker_epoch
    c.controlled_shutdown(1)
    assert c.run_until_true(lambda: not c.running(1), 10000)
    assert c.brokers[1].disk.clean_shutdown_epoch == epoch
    assert c.leader(TP) == 2 and 1 not in c.registration(TP).isr
    c.start_broker(1)
    assert c.run_until_true(lambda: c.registration(TP).isr == (1, 2, 3), 30000)
    assert c.brokers[1].broker.previous_broker_epoch == epoch and c.brokers[1].disk.clean_shutdown_epoch == -1
    assert c.oracle.violations == []


def test_session_timeout_moves_leadership_and_a_restart_rejoins_the_isr():
    c = started()
    for i in range(5):
        assert c.produce_and_wait(TP, f"v{i}".encode()) is not None
    c.crash(1)
    assert c.run_until_true(lambda: c.leader(TP) == 2, 15000)
    assert c.now >= 9000  # not before the session timeout
    assert c.produce_and_wait(TP, b"after") is not None
    c.start_broker(1)
    assert c.run_until_true(lambda: c.registration(TP).isr == (1, 2, 3), 30000)
    assert c.values(1, TP) == c.values(2, TP) and b"after" in c.values(1, TP)
    assert c.brokers[1].disk.hwm_checkpoint or c.run_until_true(lambda: bool(c.brokers[1].disk.hwm_checkpoint), 6000)
    assert c.oracle.violations == []


def test_acks_all_is_refused_below_min_isr_and_acks_1_is_not():
    c = started()
    c.crash(2)
    c.crash(3)
    c.run_for(12000)
    assert c.produce_and_wait(TP, b"all", timeout_ms=3000) is None
    assert c.producer("sync").errors.get("not_enough_replicas", 0) >= 1
    assert c.produce_and_wait(TP, b"one", acks=1) is not None


def test_a_lost_connection_retries_the_fetch_after_the_backoff():
    c = started()
    b2 = c.brokers[2].broker
    assert b2._fetchers[1].correlation_id >= 0  # a fetch to leader 1 is always in flight
    c.crash(1)
    c.brokers[2].broker.connection_lost(1, c.now)
    assert b2._fetchers[1].correlation_id < 0 and b2.partitions[TP].fetch_backoff_until == c.now + 1000
    assert b2.next_deadline() <= c.now + 1000
