"""A leader must not drop a follower's parked fetch because the link *it* opened to that
follower broke (broker/core/broker.py `Broker.connection_lost`, broker/server/node.py
`Node.on_link_lost`).

The leader parks a follower's fetch that has nothing to return (up to `max_wait_ms`); the
follower sends no other fetch to that leader until it is answered, or until the request
timeout (`replica.socket.timeout.ms`, 30 s). A broker reaches a peer over two links: the
one it opened (its own fetches when it follows the peer) and the one the peer opened (the
peer's fetches). After a follower restarts, the leader may find its link to the old
incarnation dead only once the new incarnation already fetches on a link of its own (the
reset was lost to a network fault, the link check closes it seconds later, or the heal lets
the new kernel's reset through). Seen in a real run (bug zoo, queue-acksall-mix, leso
story): node 3 crash-restarted, rejoined queue1-0's ISR under node 4 at 13:44:39.45; at
40.33 node 4 logged "<link to node 3 (broker)>: lost" (its link to node 3's old
incarnation); node 3 then fetched nothing, node 4 shrank it out at 48.29, and it came back
at 13:45:10.22, its 30 s fetch timeout after the dropped fetch, 29.8 s after node 2, which
restarted with it, had joined. The controller logged nothing for queue1-0 in between."""

from __future__ import annotations

import logging
from types import SimpleNamespace

from broker.core.broker import BrokerConfig
from broker.core.messages import NO_LEADER, FetchResponse, TopicPartition
from broker.io.links import LinkKey
from broker.server.node import Node
from broker.sim.cluster import ClusterSettings, SimCluster
from broker.wire import internal

TP = TopicPartition("t", 0)
LAG_MS = 6000  # the test clusters' replica.lag.time.max.ms


def cluster(seed: int = 3) -> SimCluster:
    c = SimCluster(seed, ClusterSettings(brokers=3, broker=BrokerConfig(node_id=-1, replica_lag_time_max_ms=LAG_MS)))
    assert c.run_until_true(lambda: c.controller is not None
                            and sum(not b.fenced for b in c.controller.image.brokers.values()) == 3, 30000)
    c.create_topic("t", 1, 3, {"min.insync.replicas": "2"})
    assert c.run_until_true(lambda: len(c.registration(TP).isr) == 3, 10000)
    return c


def keep_producing(c: SimCluster, every_ms: int = 100) -> None:
    """acks=all writes from now on, one every `every_ms` (the HWM moves, fetches return records)."""
    n = [0]

    def one() -> None:
        n[0] += 1
        if c.leader(TP) != NO_LEADER:
            c.produce(TP, value=b"v%d" % n[0])
        c.at(c.now + every_ms, one)

    c.at(c.now, one)


def shell_of(c: SimCluster, i: int) -> Node:
    """The process shell (`Node`) around broker i of the simulation, as far as its link-loss
    handling goes: its routing layer is the simulated process's, the effects go back into
    the simulation."""
    node = object.__new__(Node)
    node.io = c.brokers[i].io
    node.links = SimpleNamespace(forget=lambda link: True)  # the link was the current one
    node.life = SimpleNamespace(shutting_down=False)
    node.log = logging.getLogger("test.shell")
    node.now = lambda: c.now
    node._perform = lambda effects: c._run(c.brokers[i], effects)
    node._drain = lambda: None
    return node


def restarted_follower_parked(c: SimCluster) -> tuple[int, int]:
    """Crash-restart a follower of TP and wait until it is back in the ISR with a fetch
    parked at the leader (nothing to return). Returns (leader, follower)."""
    leader = c.leader(TP)
    f = next(r for r in c.registration(TP).replicas if r != leader)
    c.crash(f)
    c.run_for(1)
    c.start_broker(f)
    assert c.run_until_true(lambda: f not in c.registration(TP).isr, 5000)
    assert c.run_until_true(lambda: f in c.registration(TP).isr, 10000)
    lb = c.brokers[leader].broker
    assert c.run_until_true(lambda: any(p.src == f for p in lb._parked), 5000)
    return leader, f


def test_a_lost_link_to_a_restarted_followers_old_incarnation_keeps_its_new_fetch():
    """The leader's own (outbound) link to the follower's old incarnation is found lost while
    the new incarnation's fetch is parked: the follower keeps fetching and stays in the ISR
    (before the fix the parked fetch was dropped unanswered, the follower waited 30 s for it,
    and the leader shrank it out of the ISR after replica.lag.time.max.ms)."""
    c = cluster()
    keep_producing(c)
    c.run_for(1000)
    leader, f = restarted_follower_parked(c)
    fb = c.brokers[f].broker
    stuck_cid = fb._fetchers[leader].correlation_id
    assert stuck_cid >= 0  # the parked fetch, in flight on the follower's side

    shell_of(c, leader).on_link_lost(SimpleNamespace(peer_id=f, key=LinkKey(f, internal.ROLE_BROKER, True)))

    # the parked fetch is answered (at the latest at its max_wait), the follower fetches on
    ok = c.run_until_true(lambda: fb._fetchers[leader].correlation_id != stuck_cid,
                          fb.config.replica_fetch_wait_max_ms + 100)
    assert ok, f"follower {f}'s parked fetch was dropped: no answer for {fb.config.replica_fetch_wait_max_ms + 100} ms"
    start = c.now
    out_at: list[int] = []

    def watch() -> bool:
        if f not in c.registration(TP).isr and not out_at:
            out_at.append(c.now - start)
        return False

    for t in range(start, start + LAG_MS + 6000, 100):  # past the shrink the stall used to cause
        c.probe(t, watch)
    c.run_until(start + LAG_MS + 6000)
    assert not out_at, f"follower {f} left the ISR {out_at[0]} ms after its leader lost the link to its old incarnation"
    assert c.values(f, TP)[-5:] == c.values(leader, TP)[-5:] or c.run_until_true(
        lambda: c.values(f, TP) == c.values(leader, TP), 2000)
    assert c.oracle.violations == []


def test_only_a_lost_link_from_the_follower_drops_its_parked_fetch():
    """The core: `connection_lost(node, now, outbound_only=True)` (only the link this broker
    opened to `node` broke) keeps `node`'s parked fetches, answered at their max_wait; the
    default (every link to `node` is gone, e.g. it died) drops them: no one could get the
    answers."""
    c = cluster()
    leader, f = restarted_follower_parked(c)
    lb = c.brokers[leader].broker
    parked = [p for p in lb._parked if p.src == f]
    lb.connection_lost(f, c.now, outbound_only=True)
    assert [p for p in lb._parked if p.src == f] == parked
    acts = lb.tick(parked[0].deadline)
    assert any(s.to == f and isinstance(s.message, FetchResponse)
               and s.message.correlation_id == parked[0].request.correlation_id for s in acts.sends)

    c2 = cluster()
    leader, f = restarted_follower_parked(c2)
    lb = c2.brokers[leader].broker
    lb.connection_lost(f, c2.now)
    assert not [p for p in lb._parked if p.src == f]
