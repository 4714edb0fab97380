"""Fault stories on real brokers (local backend, 5 nodes, a topic with RF 3 and min ISR 2 under
an acks=all producer): each bug trigger (broker/triggers, the definitions the simulation plays
too) played by the real-node driver: its steps happen as its history events say (roles read
from the metadata, every wait met), and afterwards the cluster is healed: no rule in the
harness's firewall chain, every broker running and not stopped, nothing left killed or
paused, and the partitions have leaders and full ISRs again."""

from __future__ import annotations

import random
import sys
import threading
import time
from pathlib import Path

import pytest

from contracts.history import HistoryWriter, read_events
from nemesis.core import FaultOp, Nemesis
from nemesis.schedule import prepare
from nemesis.targets import KafkaMetadata, partition_view
from suites.wrack.db import BrokerDB, BrokerOptions
from suites.wrack.leadercut import install_leader_cut
from suites.wrack.stories import story_package

pytestmark = pytest.mark.root

BROKER = str(Path(sys.executable).parent / "wrack-broker")
TOPIC = "t"
# the stories keep the active controller out (Story.choose); it is one of the three voters n1-n3,
# and 5 partitions of RF 3 on 5 nodes leave a partition without each of them (2 did not: n2
# and n3 held a replica of both)
PARTITIONS = 5

# the waits each story must meet on a healthy cluster (others depend on the safeguards)
MUST = {
    "last-replica-standing": ["roles", "isr-is-leader", "healed"],
    "hw-truncation": ["roles", "b-elected", "c-elected", "healed"],
    "stale-hwm-leader": ["roles", "c-out-of-isr", "b-elected", "healed"],
    "wipe-during-expansion": ["roles", "f-out-of-isr", "commits-without-f", "f-unfenced", "f-catches-up",
                              "f-re-registers", "healed"],
    "stale-alter-partition": ["roles", "shrink-held", "b-fenced-out", "commits-without-b", "healed"],
    "leader-churn": ["roles", "leader-2", "leader-3", "leader-4", "healed"],
    "unclean-candidates": ["roles", "x-out-of-isr", "healed"],
    "lagging-follower-in-isr": ["roles", "c-out-of-isr", "commits-without-c", "healed"],
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    from clusters.testing import can_run_local, local_clusters
    from workloads.kafka_io import create_topics

    if not can_run_local():
        pytest.skip("needs root, iproute2 and util-linux (network namespaces)")
    tmp = tmp_path_factory.mktemp("stories")
    with local_clusters() as make:
        c = make(5)
        db = BrokerDB(c, BrokerOptions(command=[BROKER], extra={"unclean.leader.election.enable": "false"}))
        hist = HistoryWriter(tmp / "history.jsonl")
        md = KafkaMetadata(db.bootstrap_servers(), active_controller=db.active_controller)
        nem = Nemesis(c, db, hist, rng=random.Random(7), metadata=md)
        pick = lambda rng: [(TOPIC, p) for p in range(PARTITIONS)]  # noqa: E731
        prepare(nem, [story_package(name, pick) for name in MUST])
        install_leader_cut(nem)
        try:
            db.start_all(60)
            create_topics(db.bootstrap_servers(), {TOPIC: PARTITIONS}, replication_factor=3,
                          config={"min.insync.replicas": "2"}, timeout=60)
            stop = threading.Event()
            sender = threading.Thread(target=produce, args=(db.bootstrap_servers(), stop), daemon=True)
            sender.start()
            yield c, db, nem, hist, md
            stop.set()
            sender.join(30)
        finally:
            nem.teardown()
            for n in c.nodes:
                db.collect(n, tmp / "nodes", data=False)  # the brokers' logs stay for a failure's reader
            db.kill_all()
            hist.close()


def produce(bootstrap: str, stop: threading.Event) -> None:
    """acks=all sends to every partition, up to about 1,000/s, until `stop` (the stories need
    traffic: a follower that restarts must fall behind; what happens to the sends is not this
    test's business)."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "log_level": 0, "linger.ms": 5,
                  "message.timeout.ms": 5000})
    i = 0
    while not stop.is_set():
        p.produce(TOPIC, str(i).encode(), partition=i % PARTITIONS)
        p.poll(0)
        i += 1
        time.sleep(0.001)
    p.flush(1)  # what is still unsent does not matter


LAST: list = []  # the last views (or error) `healthy` saw, for the assertion messages


def healthy(c, md) -> bool:
    addrs = {n.name: n.address for n in c.nodes}
    try:
        m = md()
        views = [partition_view(m, TOPIC, p, addrs) for p in range(PARTITIONS)]
    except Exception as e:  # noqa: BLE001
        LAST[:] = [repr(e)]
        return False
    LAST[:] = views
    return all(v.leader is not None and len(v.isr) == 3 for v in views)


def await_healthy(c, md, timeout: float = 60) -> bool:
    """Poll `healthy` every 0.5 s until it holds or `timeout` s pass; its last answer."""
    deadline = time.monotonic() + timeout
    while not healthy(c, md) and time.monotonic() < deadline:
        time.sleep(0.5)
    return healthy(c, md)


@pytest.mark.parametrize("story", list(MUST))
def test_story_plays_its_steps_and_heals(cluster, story):
    c, db, nem, hist, md = cluster
    assert await_healthy(c, md), f"the cluster was not healthy before the story: {LAST}"
    first = len(list(read_events(hist.path)))
    nem.invoke(FaultOp(story))
    events = list(read_events(hist.path))[first:]
    fs = [e["f"] for e in events]
    assert fs[0] == f"start-{story}" and fs[-1] == f"stop-{story}", fs
    assert "error" not in events[-1]["value"], events[-1]["value"]
    waits = {e["value"]["step"]: e["value"]["ok"] for e in events if e["f"] == "story-step"}
    missing = [s for s in MUST[story] if not waits.get(s)]
    assert not missing, (missing, waits)
    # every fault the story made is in the history, between its start and stop events
    made = [s["fault"] for s in events[-1]["value"]["steps"] if "fault" in s]
    assert [f for f in fs[1:-1] if f != "story-step"] == made
    # healed: no firewall rule, every broker running (not stopped), nothing left killed or paused
    assert all(nem.net.rules(n.name) == [] for n in c.nodes)
    assert all(db.running(n) and not n.daemon_state(db.pidfile(n)).stopped for n in c.nodes)
    assert nem.killed == set() and nem.paused == set()
    assert await_healthy(c, md), f"the partitions did not get leaders and full ISRs back: {LAST}"


def test_leader_cut_leaves_the_leader_its_isr_alone_and_power_loss_targets_it(cluster):
    """`partition-leader`'s cut: the leader, cut off from its ISR followers only, keeps the
    controller and shrinks the ISR to itself (the op waits for it); the `lone-leader` role
    (the broker's `power-loss` target) then names it. Healed, the ISR is full again."""
    c, db, nem, hist, md = cluster
    assert await_healthy(c, md), f"the cluster was not healthy before the cut: {LAST}"
    first = len(list(read_events(hist.path)))
    nem.invoke(FaultOp("cut-leader", {"candidates": [[TOPIC, p] for p in range(PARTITIONS)]}))
    events = list(read_events(hist.path))[first:]
    assert [e["f"] for e in events] == ["start-partition", "cut-leader"]
    cut = events[1]["value"]
    assert cut["isr_alone"] is True and len(cut["followers"]) == 2, cut
    assert events[0]["value"]["spec"] == {"cut": [[cut["leader"]], cut["followers"]]}
    lone: list[str] = []
    deadline = time.monotonic() + 10  # librdkafka's answer may lag the controller's by a poll
    while lone != [cut["leader"]] and time.monotonic() < deadline:
        lone = nem.targets({"role": "lone-leader", "topics": [TOPIC], "else": []})
        time.sleep(0.5)
    assert lone == [cut["leader"]]
    nem.invoke(FaultOp("stop-partition"))
    assert await_healthy(c, md), f"the ISR did not fill again after the cut: {LAST}"
