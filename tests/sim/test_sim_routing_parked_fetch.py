"""The parked-fetch link-loss bug (fixed in fde5eee), reproduced in the simulation through
the routing layer both shells run (broker/io/router.py `NodeRouter.on_link_lost`).

A broker reaches a peer over two links: the one it opened (its own fetches, when it follows
the peer) and the one the peer opened (the peer's fetches). The leader L of t-0 follows f
for t-1, so it holds a link to f. f is killed while cut off from L, so the reset of that
link never reaches L; f restarts and, after the heal, fetches t-0 from L on a link of its
own, where L parks its fetch. Then L finds its own link to f's old incarnation dead (the
process's link check closes it seconds later; here the fault `lose_link` says so). That
link says nothing of f's: the parked fetch must be answered and f must stay in the ISR.
Before the fix the loss dropped f's parked fetch; f sent no other fetch to L until its
request timeout (30 s) and L shrank it out of the ISR after `replica.lag.time.max.ms`.

`test_the_scenario_catches_the_old_rule` runs the same scenario with the old rule (any
lost link to a peer drops its parked fetches): the follower stalls and leaves the ISR.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from broker.core.broker import Broker, BrokerConfig
from broker.core.messages import TopicPartition
from broker.io.links import ROLE_BROKER
from broker.sim.cluster import ClusterSettings, SimCluster
from tests.broker.test_broker_parked_fetch_link_loss import LAG_MS, keep_producing

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)  # keep_producing writes to t-0


@dataclass
class Outcome:
    answered: bool  # the follower's parked fetch was answered (by its max wait)
    left_isr_after_ms: int | None  # when the follower left t-0's ISR after the loss, if it did


def started(seed: int) -> SimCluster:
    c = SimCluster(
        seed, ClusterSettings(brokers=3, broker=BrokerConfig(node_id=-1, replica_lag_time_max_ms=LAG_MS))
    )
    assert c.run_until_true(
        lambda: (
            c.controller is not None and sum(not b.fenced for b in c.controller.image.brokers.values()) == 3
        ),
        30000,
    )
    c.create_topic("t", 2, 3, {"min.insync.replicas": "2"})
    assert c.run_until_true(lambda: all(len(c.registration(tp).isr) == 3 for tp in (T0, T1)), 10000)
    return c


def parked_fetch_link_loss(seed: int = 3) -> Outcome:
    c = started(seed)
    leader, f = c.leader(T0), c.leader(T1)
    assert leader != f and leader in c.registration(T1).replicas  # L follows f for t-1
    keep_producing(c)
    assert c.run_until_true(lambda: c.link(leader, f) is not None, 5000)  # L's fetch link to f
    stale = c.link(leader, f)
    c.net.cut(leader, f)  # the reset of f's links does not reach L
    c.crash(f)
    c.run_for(100)
    c.net.heal()
    c.start_broker(f)
    assert c.run_until_true(lambda: f not in c.registration(T0).isr, 10000)
    assert c.run_until_true(lambda: f in c.registration(T0).isr, 10000) and c.leader(T0) == leader
    lb, fb = c.brokers[leader].broker, c.brokers[f].broker
    assert lb is not None and fb is not None
    assert c.run_until_true(lambda: any(p.src == f for p in lb._parked), 5000)
    assert c.link(leader, f) is stale and stale.acceptor_inc != c.brokers[f].incarnation  # to the old process
    stuck = fb._fetchers[leader].correlation_id
    assert stuck >= 0  # the parked fetch, in flight on the follower's side

    assert c.lose_link(leader, f, ROLE_BROKER, outbound=True)  # L's link check finds it dead

    answered = c.run_until_true(
        lambda: fb._fetchers[leader].correlation_id != stuck, fb.config.replica_fetch_wait_max_ms + 100
    )
    start, out_at = c.now, []

    def watch() -> bool:
        if f not in c.registration(T0).isr and not out_at:
            out_at.append(c.now - start)
        return False

    for t in range(start, start + LAG_MS + 6000, 100):  # past the shrink the stall used to cause
        c.probe(t, watch)
    c.run_until(start + LAG_MS + 6000)
    assert c.violations() == []
    return Outcome(answered, out_at[0] if out_at else None)


def test_a_lost_link_to_a_followers_old_process_keeps_its_parked_fetch():
    o = parked_fetch_link_loss()
    assert o.answered, "the follower's parked fetch was dropped: no answer by its max wait"
    assert o.left_isr_after_ms is None, (
        f"the follower left the ISR {o.left_isr_after_ms} ms after the link loss"
    )


def test_the_scenario_catches_the_old_rule(monkeypatch: pytest.MonkeyPatch):
    """With fde5eee reverted (a lost link to a peer, whichever side opened it, drops the
    peer's parked fetches), the same scenario stalls the follower out of the ISR."""
    fixed = Broker.connection_lost
    monkeypatch.setattr(
        Broker,
        "connection_lost",
        lambda self, node, now, outbound_only=False: fixed(self, node, now, outbound_only=False),
    )
    o = parked_fetch_link_loss()
    assert not o.answered
    assert o.left_isr_after_ms is not None and o.left_isr_after_ms <= LAG_MS + 1000
