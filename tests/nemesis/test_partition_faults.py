"""Partitions on real nodes (namespaces and containers): exactly the chosen pairs lose TCP, heal restores it, one-way is one-way."""

from __future__ import annotations

import random

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
                                  {"components": [["n1", "n2"], ["n3", "n4", "n5"]]}])
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
