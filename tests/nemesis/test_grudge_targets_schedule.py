"""Pure parts of the nemesis: grudge shapes, target specs and roles from metadata, combined schedules."""

from __future__ import annotations

import random
import subprocess
import sys
import textwrap
from itertools import islice

import pytest

from nemesis import grudge as G
from nemesis.schedule import combined, final_ops, packages
from nemesis.targets import Metadata, PartitionInfo, TargetError, resolve

NODES = ["n1", "n2", "n3", "n4", "n5"]


def test_complete_grudge_is_symmetric():
    g = G.complete_grudge([["n1", "n2"], ["n3", "n4", "n5"]])
    pairs = G.blocked_pairs(g)
    assert pairs == {(a, b) for a in NODES for b in NODES if (a in "n1n2") != (b in "n1n2")}


def test_bridge_middle_sees_both_halves():
    g = G.bridge(NODES)
    assert g["n3"] == frozenset()
    assert g["n1"] == {"n4", "n5"} and g["n5"] == {"n1", "n2"}


def test_majorities_ring_every_node_sees_a_distinct_majority():
    for n in (5, 6, 7):
        nodes = [f"n{i}" for i in range(n)]
        g = G.majorities_ring(nodes, random.Random(n))
        views = [frozenset(nodes) - g[x] for x in nodes]
        assert all(len(v) > n // 2 for v in views)
        assert len(set(views)) == n
        assert G.blocked_pairs(g) == {(b, a) for a, b in G.blocked_pairs(g)}  # symmetric


def test_one_way_blocks_one_direction():
    assert G.blocked_pairs(G.one_way(["n1"], ["n2", "n3"])) == {("n1", "n2"), ("n1", "n3")}


def test_target_counts():
    rng = random.Random(1)
    assert len(resolve("one", NODES, rng)) == 1
    assert len(resolve("minority", NODES, rng)) == 2
    assert len(resolve("majority", NODES, rng)) == 3
    assert resolve("all", NODES, rng) == NODES
    assert resolve("n4", NODES, rng) == ["n4"]
    with pytest.raises(TargetError):
        resolve("most", NODES, rng)
    with pytest.raises(TargetError):
        resolve(["n9"], NODES, rng)


def test_roles_come_from_metadata():
    addrs = {f"n{i}": f"10.77.1.{10 + i}" for i in range(1, 6)}
    md = Metadata({i: f"10.77.1.{11 + i}" for i in range(5)}, controller_id=0,
                  partitions={("t", 0): PartitionInfo(leader=2, replicas=[2, 3, 4], isrs=[2, 4])})
    kw = {"addresses": addrs, "metadata": lambda: md}
    rng = random.Random(0)
    assert resolve({"role": "controller"}, NODES, rng, **kw) == ["n1"]
    assert resolve({"role": "leader", "topic": "t", "partition": 0}, NODES, rng, **kw) == ["n3"]
    assert resolve({"role": "isr-followers", "topic": "t", "partition": 0}, NODES, rng, **kw) == ["n5"]
    assert resolve({"role": "replicas", "topic": "t", "partition": 0}, NODES, rng, **kw) == ["n3", "n4", "n5"]
    with pytest.raises(TargetError, match="no partition"):
        resolve({"role": "leader", "topic": "u"}, NODES, rng, **kw)
    with pytest.raises(TargetError, match="needs the cluster's metadata"):
        resolve({"role": "controller"}, NODES, rng)


def test_lone_leader_is_a_leader_alone_in_its_isr_else_the_fallback():
    addrs = {f"n{i}": f"10.77.1.{10 + i}" for i in range(1, 6)}
    parts = {("t", 0): PartitionInfo(leader=2, replicas=[2, 3, 4], isrs=[2, 4]),
             ("t", 1): PartitionInfo(leader=3, replicas=[3, 4, 0], isrs=[3]),
             ("u", 0): PartitionInfo(leader=1, replicas=[1, 2, 3], isrs=[1])}
    md = Metadata({i: f"10.77.1.{11 + i}" for i in range(5)}, controller_id=0, partitions=parts)
    kw = {"addresses": addrs, "metadata": lambda: md}
    rng = random.Random(0)
    assert {resolve({"role": "lone-leader"}, NODES, rng, **kw)[0] for _ in range(50)} == {"n4", "n2"}
    spec = {"role": "lone-leader", "topics": ["t"], "else": "one"}
    assert {resolve(spec, NODES, rng, **kw)[0] for _ in range(20)} == {"n4"}
    parts[("t", 1)] = PartitionInfo(leader=3, replicas=[3, 4, 0], isrs=[3, 0])
    assert len({resolve(spec, NODES, rng, **kw)[0] for _ in range(50)}) > 1  # none alone: one at random
    with pytest.raises(TargetError, match="alone"):
        resolve({"role": "lone-leader", "topics": ["t"]}, NODES, rng, **kw)

    def down() -> Metadata:
        raise RuntimeError("no broker answers")

    assert len(resolve(spec, NODES, rng, addresses=addrs, metadata=down)) == 1


def test_kafka_metadata_is_quiet_and_keeps_one_client():
    # no broker listens on the port: every call fails, librdkafka prints nothing, the client stays
    code = textwrap.dedent("""
        import socket
        from confluent_kafka import KafkaException
        from nemesis.targets import KafkaMetadata
        s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]  # bound, never listening
        md = KafkaMetadata(f"127.0.0.1:{port}", timeout=1.0)
        clients = set()
        for _ in range(2):
            try:
                md()
            except KafkaException:
                clients.add(id(md._admin))
        print(len(clients))
    """)
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and p.stdout.strip() == "1", p.stderr
    assert p.stderr == "", p.stderr


def test_combined_flip_flops_each_package_on_its_own_clock():
    pkgs = packages(["partition", "kill", "restart"])
    ops = list(islice(combined(pkgs, 1.0, random.Random(5)), 300))
    assert all(0 <= d <= 1.5 for d, _ in ops)
    kinds = {"start-partition": "partition", "stop-partition": "partition", "kill": "kill", "start": "kill",
             "restart": "restart"}
    now, last = 0.0, {"partition": 0.0, "kill": 0.0, "restart": 0.0}
    open_ = {"partition": False, "kill": False}
    overlap = 0
    for d, op in ops:
        now += d
        k = kinds[op.f]
        assert 0.5 - 1e-9 <= now - last[k] <= 1.5 + 1e-9, (op.f, now - last[k])  # each package's own interval
        last[k] = now
        if k in open_:
            assert open_[k] == (op.f in ("stop-partition", "start")), op.f
            open_[k] = not open_[k]
        overlap += open_["partition"] and open_["kill"]
    assert overlap > 10  # faults of different packages are on at once
    # three packages, each every ~1 s: about three ops a second in all
    assert 2.5 < len(ops) / now < 3.5
    assert [op.f for op in final_ops(pkgs)] == ["stop-partition", "start"]
    with pytest.raises(ValueError):
        packages(["nope"])


@pytest.mark.parametrize("seed", range(8))
def test_power_loss_many_cuts_one_a_minority_a_majority_and_all_in_every_four(seed):
    # a seeded order per round, but each target once a round: the whole cluster's power cut
    # (the trigger of a flush that skips data) is in every run with four power losses
    pkg = packages(["power-loss-many"])[0]
    rng = random.Random(seed)
    drawn = [pkg.start(rng).value["nodes"] for _ in range(12)]
    for r in range(3):
        assert sorted(drawn[4 * r:4 * r + 4]) == ["all", "majority", "minority", "one"], drawn
