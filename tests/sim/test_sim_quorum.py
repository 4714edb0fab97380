"""The replication simulation on a controller quorum (broker/sim/cluster.py): voters are
dedicated nodes or brokers (combined), Raft travels through the simulated network,
brokers follow the active controller, and both oracles run."""

from __future__ import annotations

import pytest

from broker.core.broker import RUNNING
from broker.core.messages import TopicPartition
from broker.core.raft import Role
from broker.sim.cluster import CONTROLLER, ClusterSettings, SimCluster
from broker.sim.random_run import random_run

TP = TopicPartition("t", 0)


def started(seed: int = 5, **kw: object) -> SimCluster:
    c = SimCluster(seed, ClusterSettings(**kw))  # type: ignore[arg-type]
    assert c.run_until_true(lambda: all(n.broker is not None and n.broker.state == RUNNING for n in c.brokers.values()), 15000)
    assert c.create_topic("t", 1, 3, {"min.insync.replicas": "2"}).error.value == 0
    return c


def test_default_is_one_dedicated_voter():
    c = SimCluster(1)
    assert c.voter_ids == (CONTROLLER,) and not c.voters[CONTROLLER].is_broker


@pytest.mark.parametrize("combined", [False, True])
def test_the_active_controller_dies_another_takes_over_and_writes_go_on(combined):
    c = started(controllers=3, combined=combined)
    assert c.produce_and_wait(TP, b"before") is not None
    first = c.active_controller_id()
    assert first is not None and c.agreed_quorum_leader() == first
    c.crash(first)
    assert c.run_until_true(lambda: c.active_controller_id() not in (None, first), 10000)
    assert c.produce_and_wait(TP, b"after") is not None
    c.start_broker(first)
    assert c.run_until_true(lambda: c.agreed_quorum_leader() is not None, 10000)
    assert c.run_until_true(lambda: all(n.broker is not None and n.broker.state == RUNNING for n in c.brokers.values()), 20000)
    assert c.violations() == []


def test_an_active_controller_cut_from_the_voters_is_replaced_and_brokers_follow():
    c = started(controllers=3)
    old = c.active_controller_id()
    c.net.isolate(old, [v for v in c.voter_ids if v != old])  # the brokers still reach it
    assert c.run_until_true(lambda: c.active_controller_id() not in (None, old), 10000)
    new = c.active_controller_id()
    assert c.voters[old].quorum.controller is None  # check quorum: it resigned
    assert c.run_until_true(lambda: all(n.target.target == new for n in c.brokers.values()), 10000)
    assert c.produce_and_wait(TP, b"x") is not None
    assert c.violations() == []


def test_a_paused_controller_catches_up_in_order_when_resumed():
    c = started(controllers=3)
    v = c.active_controller_id()
    c.pause(v, 5000)
    assert c.run_until_true(lambda: c.active_controller_id() not in (None, v), 10000)
    c.run_for(5000)
    assert not c.voters[v].paused and c.voters[v].quorum.raft.role is Role.FOLLOWER
    assert c.violations() == []


def test_a_voter_losing_power_keeps_what_it_flushed():
    c = started(controllers=3)
    v = next(u for u in c.voter_ids if u != c.active_controller_id())
    before = len(c.voters[v].raft_log.durable)
    c.power_loss(v)
    assert len(c.voters[v].raft_log.entries) >= before
    c.start_broker(v)
    assert c.run_until_true(lambda: c.agreed_quorum_leader() is not None, 10000)
    assert c.violations() == []


def test_a_broker_cut_from_every_controller_is_fenced_and_returns():
    c = started(controllers=3)
    c.cut_from_controllers(3)
    assert c.run_until_true(lambda: not c.controller.image.is_usable(3), 20000)
    c.reconnect_to_controllers(3)
    assert c.run_until_true(lambda: c.controller.image.is_usable(3), 20000)
    assert c.violations() == []


def test_every_random_seed_strikes_the_controllers():
    for seed in range(12):
        r = random_run(seed)
        assert r.ok, r.summary()
        struck = [f for f in r.faults if " controller " in f and "no target" not in f]
        assert struck, f"seed {seed}: no controller fault in {r.faults}"
        assert r.config["controllers"] in (3, 5)


def test_one_voter_runs_as_before():
    r = random_run(3, controllers=1)
    assert r.ok and r.config["controllers"] == 1 and r.acked_all > 0


def test_a_broken_raft_rule_is_caught_by_the_raft_invariants():
    caught = next((r for r in (random_run(s, raft_unsafe=frozenset({"forget-vote"})) for s in range(12)) if not r.ok), None)
    assert caught is not None
    assert {v.name for v in caught.violations} & {"raft-vote-once", "raft-one-leader-per-epoch"}, caught.summary()
    assert random_run(caught.seed).ok
