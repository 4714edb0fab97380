"""The simulation's driver of the bug triggers (broker/sim/driver.py) on a small cluster: a drop
holds the messages it names and delivers them when it heals (not across a restart), a drop
replaced by itself keeps holding, a wait that is not met ends the play and the play undoes
what it did, and the roles are bound in election order."""

from __future__ import annotations

import random

from broker.core.broker import BrokerConfig
from broker.core.messages import FetchResponse, TopicPartition
from broker.sim.cluster import ClusterSettings, SimCluster
from broker.sim.driver import Filter, MessageFilters, TriggerPlay, run
from broker.triggers import steps as S

TP = TopicPartition("t", 0)


def cluster(seed: int = 1) -> SimCluster:
    c = SimCluster(seed, ClusterSettings(brokers=3, broker=BrokerConfig(node_id=-1, replica_lag_time_max_ms=5000,
                                                                        request_timeout_ms=5000)))
    c.run_for(3000)
    c.create_topic("t", 1, 3, {"min.insync.replicas": "2"})
    return c


def follower_leo(c: SimCluster, i: int) -> int:
    return c.brokers[i].disk.log(TP).log_end_offset


def test_a_hold_delivers_what_it_held_when_it_goes_and_nothing_to_a_restarted_node():
    c = cluster()
    leader = c.leader(TP)
    f = next(r for r in c.registration(TP).replicas if r != leader)
    filters = MessageFilters(c)
    hold = filters.add(Filter(lambda src, to, msg: src == leader and to == f and isinstance(msg, FetchResponse)))
    before = follower_leo(c, f)
    for i in range(5):
        assert c.produce_and_wait(TP, f"v{i}".encode(), acks=1) is not None
    c.run_for(500)
    assert hold.caught >= 1 and follower_leo(c, f) == before  # its answers held: it got nothing
    assert follower_leo(c, leader) >= before + 5
    filters.remove([hold])
    assert "send" not in vars(c)  # the cluster's own send again
    c.run_for(500)
    assert follower_leo(c, f) >= before + 5  # the held answer came, and the fetches after it
    hold = filters.add(Filter(lambda src, to, msg: src == leader and to == f and isinstance(msg, FetchResponse)))
    assert c.produce_and_wait(TP, b"w", acks=1) is not None
    c.run_for(600)
    c.crash(f)
    c.start_broker(f)
    held = len(hold.held)
    filters.remove([hold])
    assert held >= 1 and all(m[3] != c.nodes[f].incarnation for m in hold.held)  # addressed to the old process


def play(c: SimCluster, trigger: S.Trigger, seed: int = 1) -> tuple[TriggerPlay, list[str], list[tuple[str, bool]]]:
    log: list[str] = []
    steps: list[tuple[str, bool]] = []
    p = TriggerPlay(c, TP, trigger, random.Random(seed), log.append, MessageFilters(c), lambda n, ok: steps.append((n, ok)))
    done: list[bool] = []
    run(c, p.steps(), c.now + 60000, lambda: done.append(True))
    assert c.run_until_true(lambda: bool(done), 60000)
    return p, log, steps


def test_a_wait_not_met_ends_the_play_and_it_undoes_its_faults():
    c = cluster()
    t = S.Trigger("t", "elr", "stop B, isolate C, wait for nothing", S.Roles(followers=("b", "c")), (
        S.Stop("b"),
        S.Isolate("c"),
        S.Wait("never", S.LeaderIs("c"), 1.0),  # END: the steps after it are not played
        S.Kill(S.LEADER),
    ))
    p, log, steps = play(c, t)
    reg = c.registration(TP)
    assert p.roles["b"] == [r for r in reg.replicas if r != p.roles[S.LEADER]][0]  # election order
    assert steps == [("never", False)] and not any("crash" in x for x in log)
    assert not c.net.controller_cut and "send" not in vars(c)  # healed
    c.run_for(3000)
    assert all(c.running(i) for i in c.brokers)  # B started again


def test_a_drop_replaced_by_itself_keeps_holding_and_if_plays_its_steps_only_when_met():
    c = cluster()
    starve = S.Drop({"c": (S.LEADER,)}, only=S.FETCH_ANSWERS)
    t = S.Trigger("t", "elr", "starve C, replace the drop by itself", S.Roles(followers=("b", "c")), (
        starve,
        S.Sleep("starved", 1.0),
        S.Drop({"c": (S.LEADER,)}, only=S.FETCH_ANSWERS, replace=True),
        S.Sleep("still", 1.0),
        S.If(S.Wait("c-out", S.NotInIsr("c"), 0.5), S.Stop("b")),
        S.If(S.Wait("has-leader", S.HasLeader(), 0.5), S.Sleep("then", 0.1)),
    ))
    held: list[int] = []

    def on_step(name: str, ok: bool) -> None:
        if name == "still":
            held.extend([follower_leo(c, p.roles["c"]), follower_leo(c, p.roles[S.LEADER])])

    log: list[str] = []
    p = TriggerPlay(c, TP, t, random.Random(1), log.append, MessageFilters(c), on_step)
    for i in range(30):
        c.at(c.now + 100 * i, lambda i=i: c.produce_async(TP, f"v{i}".encode(), acks=1))
    done: list[bool] = []
    run(c, p.steps(), c.now + 60000, lambda: done.append(True))
    leo0 = None
    c.run_until_true(lambda: p.roles != {}, 10000)
    leo0 = follower_leo(c, p.roles["c"])
    c.run_until_true(lambda: bool(done), 60000)
    assert held[0] == leo0 < held[1]  # nothing released by the replacement: C got no answer for 2 s
    assert any("c-out not met" in x for x in log) and not any("controlled-shutdown" in x for x in log)
    assert any("has-leader met" in x for x in log)
