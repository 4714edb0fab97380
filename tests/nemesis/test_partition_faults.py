"""Partitions on real nodes (namespaces and containers): exactly the chosen pairs lose TCP, heal restores it, one-way is one-way."""

from __future__ import annotations

import random
import threading
import time

import pytest
from netcheck import all_pairs, reachability, start_listeners

from contracts.history import HistoryWriter, fault_windows, read_events
from nemesis.core import FaultOp, Nemesis
from nemesis.grudge import blocked_pairs

pytestmark = pytest.mark.root


def _setup(make_backend_cluster, n, tmp_path):
    c = make_backend_cluster(n)
    start_listeners(c)
    hist = HistoryWriter(tmp_path / "history.jsonl")
    return c, Nemesis(c, history=hist, rng=random.Random(7)), hist


@pytest.mark.parametrize("spec", ["halves", "one", "majorities-ring", "bridge", {"isolate": "n2"},
                                  {"cut": [["n1"], ["n2", "n3"]]}, {"components": [["n1", "n2"], ["n3", "n4", "n5"]]}])
def test_partition_blocks_exactly_the_grudge_and_heals(make_backend_cluster, tmp_path, spec):
    c, nem, hist = _setup(make_backend_cluster, 5, tmp_path)
    full = all_pairs(c)
    assert reachability(c) == full
    ev = nem.invoke(FaultOp("start-partition", spec))
    grudge = {k: frozenset(v) for k, v in ev["value"]["grudge"].items()}
    blocked = blocked_pairs(grudge)
    assert blocked, "the partition must block something"
    # a full DROP grudge kills TCP in both directions (replies are dropped too)
    expected_dead = blocked | {(d, s) for s, d in blocked}
    assert reachability(c) == full - expected_dead
    nem.invoke(FaultOp("stop-partition"))
    assert reachability(c) == full
    for n in c.nodes:
        assert nem.net.rules(n.name) == []
    hist.close()
    windows = fault_windows(e for e in read_events(hist.path) if e["process"] == "nemesis")
    assert [(w.kind, w.stop is not None) for w in windows] == [("partition", True)]


def test_one_way_partition_is_one_way(make_backend_cluster, tmp_path):
    c, nem, _ = _setup(make_backend_cluster, 3, tmp_path)
    full = all_pairs(c)
    nem.invoke(FaultOp("start-partition", {"one-way": {"from": ["n1"], "to": ["n2"]}}))
    reach = reachability(c)
    assert ("n1", "n2") not in reach  # n2 refuses n1
    assert ("n2", "n1") in reach  # but n2 reaches n1
    assert reach == full - {("n1", "n2")}
    nem.heal_all()
    assert reachability(c) == full


def test_heal_removes_only_the_harness_rules(make_backend_cluster, tmp_path):
    c, nem, _ = _setup(make_backend_cluster, 3, tmp_path)
    n1 = c.nodes[0]
    n1.exec(["iptables", "-w", "-A", "INPUT", "-p", "udp", "--dport", "9", "-j", "DROP"])
    nem.invoke(FaultOp("start-partition", "one"))
    nem.teardown()
    rules = n1.exec(["iptables", "-w", "-S", "INPUT"]).stdout
    assert "--dport 9" in rules and "WRACK" not in rules
    assert reachability(c) == all_pairs(c)


def test_isolate_the_leader_named_by_the_metadata(make_backend_cluster, tmp_path):
    from nemesis.targets import Metadata, PartitionInfo

    c, _, hist = _setup(make_backend_cluster, 3, tmp_path)
    md = Metadata({i: n.address for i, n in enumerate(c.nodes)}, controller_id=0,
                  partitions={("t", 0): PartitionInfo(leader=1, replicas=[0, 1, 2], isrs=[0, 1, 2])})
    nem = Nemesis(c, history=hist, rng=random.Random(1), metadata=lambda: md)
    ev = nem.invoke(FaultOp("start-partition", {"isolate": {"role": "leader", "topic": "t", "partition": 0}}))
    assert set(ev["value"]["grudge"]["n2"]) == {"n1", "n3"}
    reach = reachability(c)
    assert reach == {("n1", "n3"), ("n3", "n1")}
    nem.heal_all()
    assert reachability(c) == all_pairs(c)


SINK = """
import socket, sys, threading
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], 7301)); s.listen(8)
def serve(c):
    tag = c.recv(1)
    while True:
        b = c.recv(65536)
        if not b:
            return
        with open(sys.argv[2], "a") as f:
            f.write(tag.decode() + ":" + b.hex() + "\\n")
while True:
    threading.Thread(target=serve, args=(s.accept()[0],), daemon=True).start()
"""

SEND = """
import socket, sys, time
def conn(tag):
    c = socket.create_connection((sys.argv[1], 7301)); c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    c.sendall(tag); time.sleep(0.2); return c
frame = lambda head: (8).to_bytes(4, "big") + head + b"data"
a, b = conn(b"a"), conn(b"b")
a.sendall(frame(b"OKOK")); time.sleep(0.3)
a.sendall(frame(b"HOLD")); time.sleep(0.3)
a.sendall(frame(b"OKOK")); b.sendall(frame(b"OKOK")); time.sleep(2)
"""


def test_a_held_frame_holds_its_connection(make_cluster, tmp_path):
    """`frame` holds: the segment starting that frame is dropped and so is everything after it on
    its connection (a frame of another kind behind it, for the 2 s the sender waits, while
    the hold is replaced by itself ten times: `replace` is one commit, no gap), while
    another connection between the same nodes passes."""
    from clusters.node import DaemonSpec

    c, nem, _ = _setup(make_cluster, 2, tmp_path)  # namespaces only: a container's iptables is the same
    n1, n2 = c.nodes
    got = n2.path("sink.out")
    n2.start_daemon(DaemonSpec("sink", ["python3", "-c", SINK, n2.address, got], n2.path("sink.pid"),
                               n2.path("sink.log")))
    n2.sh("for i in $(seq 50); do ss -ltn | grep -q :7301 && break; sleep 0.1; done")
    nem.net.drop({"n2": {"n1"}}, frame=b"HOLD")
    sender = threading.Thread(target=n1.exec, args=(["python3", "-c", SEND, n2.address],), kwargs={"timeout": 30})
    sender.start()
    time.sleep(1.0)
    for _ in range(10):  # the same hold put in force again while TCP retransmits: it never lapses
        nem.net.drop({"n2": {"n1"}}, frame=b"HOLD", replace=True)
    sender.join(30)
    lines = n2.sh(f"cat {got}").stdout.split()
    ok = ((8).to_bytes(4, "big") + b"OKOKdata").hex()
    assert sorted(lines) == [f"a:{ok}", f"b:{ok}"], lines
    assert nem.net.frames_dropped("n2") >= 1
    nem.heal_all()
    assert nem.net.rules("n2") == [] and reachability(c) == all_pairs(c)
