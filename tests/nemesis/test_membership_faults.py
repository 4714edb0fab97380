"""Membership on real nodes with a stand-in broker: remove-node stops a broker for good and
wipes it, add-node brings it back as a brand-new broker id, controllers are never removed,
the heal re-adds every removed node; the new packages run in a schedule and end healed."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest
from schedule_play import play_schedule

from contracts.history import HistoryWriter, read_events
from nemesis.core import FaultOp, Nemesis
from nemesis.membership import install_membership
from nemesis.schedule import packages, prepare
from nemesis.targets import TargetError
from suites.wrack.db import BrokerDB, BrokerOptions

pytestmark = pytest.mark.root

STANDIN = str(Path(__file__).resolve().parent.parent / "clusters" / "standin_broker.py")


def props(node, db):
    return dict(ln.split("=", 1) for ln in node.read_file(db.config_path(node)).decode().splitlines())


@pytest.fixture
def standin4(make_cluster, tmp_path):
    c = make_cluster(4)
    db = BrokerDB(c, BrokerOptions(command=[sys.executable, STANDIN], controllers=1))
    hist = HistoryWriter(tmp_path / "history.jsonl")
    nem = Nemesis(c, db, history=hist, rng=random.Random(8))
    try:
        yield c, db, nem, hist
    finally:
        for n in c.nodes:
            db.teardown(n)


def _up(c, db):
    for n in c.nodes:
        db.setup(n)
        db.start(n)
    for n in c.nodes:
        db.wait_ready(n, 20)


def test_membership_remove_wipes_and_add_gives_a_new_id(standin4):
    c, db, nem, hist = standin4
    install_membership(nem)
    _up(c, db)
    n3 = c.node("n3")
    ev = nem.invoke(FaultOp("remove-node", ["n3"]))
    assert ev["value"] == {"nodes": ["n3"], "node_ids": {"n3": 2}}
    assert not db.running(n3) and n3.exec(["ls", "-A", db.data_dir(n3)]).stdout == ""
    nem.invoke(FaultOp("start", "all"))  # a removed broker stays down
    assert not db.running(n3)
    with pytest.raises(TargetError, match="controllers or already removed"):
        nem.invoke(FaultOp("remove-node", ["n1"]))
    nem.invoke(FaultOp("remove-node", ["n2"]))
    with pytest.raises(TargetError, match="one must stay"):
        nem.invoke(FaultOp("remove-node", "one"))  # only n4 is left of the non-controllers
    ev = nem.invoke(FaultOp("add-node", None))
    assert ev["value"] == {"nodes": ["n2", "n3"], "node_ids": {"n2": 4, "n3": 5}}
    db.wait_ready(n3)
    assert props(n3, db)["node.id"] == "5" and db.running(n3)
    assert props(c.node("n1"), db)["controller.quorum.voters"] == f"0@{c.node('n1').address}:9093"
    nem.invoke(FaultOp("remove-node", "one"))
    assert nem.heal_all() == []
    assert all(db.running(n) for n in c.nodes)
    hist.close()
    evs = list(read_events(hist.path))
    assert [e["f"] for e in evs] == ["remove-node", "start", "remove-node", "add-node", "remove-node", "add-node"]
    assert evs[-1]["value"]["final"] is True and list(evs[-1]["value"]["node_ids"].values()) == [6]


def test_new_fault_packages_run_in_a_schedule_and_end_healed(standin4):
    c, db, nem, hist = standin4
    pkgs = packages(["power-loss", "clock", "corruption", "membership", "kill"])
    prepare(nem, pkgs)
    _up(c, db)
    errors = play_schedule(nem, pkgs, duration=8.0, interval=0.4, seed=2)
    assert errors == []
    assert all(db.running(n) for n in c.nodes)
    hist.close()
    evs = list(read_events(hist.path))
    fs = {e["f"] for e in evs}
    assert {"power-loss", "start-clock", "corrupt-file", "remove-node"} <= fs, fs
    assert "lazyfs-sync" in fs  # the final heal put every LazyFS into pass-through mode
    final = [e["f"] for e in evs].index("final-heal")  # after the heals: liveness counts from here
    assert evs[final]["value"]["healed"] is True and "lazyfs-sync" in [e["f"] for e in evs[:final]]
