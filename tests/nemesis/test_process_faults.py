"""Process faults on real nodes (namespaces and containers) with a stand-in broker: kill/pause change the process state,
restart/rolling restart bring it back, heal_all resumes and starts everything, history ops pair up."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest
from schedule_play import play_schedule

from contracts.history import HistoryWriter, fault_windows, read_events
from nemesis.core import FaultOp, Nemesis
from nemesis.schedule import packages
from suites.wrack.db import BrokerDB, BrokerOptions

pytestmark = pytest.mark.root

STANDIN = str(Path(__file__).resolve().parent.parent / "clusters" / "standin_broker.py")


def standin_command(cluster) -> list[str]:
    """The stand-in's command: the host's file on local nodes, a copy on every container."""
    if cluster.backend == "local":
        return [sys.executable, STANDIN]
    for n in cluster.nodes:
        n.upload(STANDIN, n.path("standin_broker.py"))
    return ["python3", cluster.nodes[0].path("standin_broker.py")]


@pytest.fixture
def standin(make_backend_cluster, tmp_path):
    c = make_backend_cluster(3)
    db = BrokerDB(c, BrokerOptions(command=standin_command(c)))
    for n in c.nodes:
        db.setup(n)
        db.start(n)
    for n in c.nodes:
        db.wait_ready(n, timeout=20)
    hist = HistoryWriter(tmp_path / "history.jsonl")
    return c, db, Nemesis(c, db, history=hist, rng=random.Random(3)), hist


def state(db, node):
    return node.daemon_state(db.pidfile(node))


def nemesis_windows(hist):
    hist.close()
    return fault_windows(e for e in read_events(hist.path) if e["process"] == "nemesis")


def test_kill_pause_resume_start(standin):
    c, db, nem, hist = standin
    n2 = c.node("n2")
    pid = state(db, n2).pid
    nem.invoke(FaultOp("pause", ["n2"]))
    assert state(db, n2).stopped
    assert not state(db, c.node("n1")).stopped
    nem.invoke(FaultOp("resume", "all"))
    assert not state(db, n2).stopped and state(db, n2).pid == pid
    nem.invoke(FaultOp("kill", ["n2"]))
    assert state(db, n2) is None and not db.running(n2)
    assert db.running(c.node("n1")) and db.running(c.node("n3"))
    nem.invoke(FaultOp("start", "all"))
    assert db.running(n2) and state(db, n2).pid != pid
    db.wait_ready(n2)
    assert [(w.kind, w.stop is not None) for w in nemesis_windows(hist)] == [("pause", True), ("kill", True)]


def test_restart_and_rolling_restart_change_pids(standin):
    c, db, nem, _ = standin
    before = {n.name: state(db, n).pid for n in c.nodes}
    nem.invoke(FaultOp("restart", ["n1"]))
    assert state(db, c.node("n1")).pid != before["n1"]
    assert state(db, c.node("n3")).pid == before["n3"]
    nem.invoke(FaultOp("rolling-restart", "all"))
    after = {n.name: state(db, n).pid for n in c.nodes}
    assert all(after[k] != before[k] for k in before)
    assert all(db.running(n) for n in c.nodes)


def test_heal_all_resumes_paused_and_starts_killed(standin):
    c, db, nem, hist = standin
    nem.invoke(FaultOp("pause", ["n1"]))
    nem.invoke(FaultOp("kill", ["n3"]))
    nem.invoke(FaultOp("start-partition", "one"))
    called = []
    nem.register_heal("clock", lambda: called.append(True))
    assert nem.heal_all() == []
    assert called == [True]
    assert not state(db, c.node("n1")).stopped
    assert db.running(c.node("n3"))
    assert all(nem.net.rules(n.name) == [] for n in c.nodes)
    assert all(w.stop is not None for w in nemesis_windows(hist))


def test_schedule_runs_and_ends_healed(standin):
    c, db, nem, hist = standin
    errors = play_schedule(nem, packages(["partition", "kill", "pause"]), duration=2.0, interval=0.2, seed=11)
    assert errors == []
    assert all(db.running(n) and not state(db, n).stopped for n in c.nodes)
    assert all(nem.net.rules(n.name) == [] for n in c.nodes)
    windows = nemesis_windows(hist)
    assert windows and all(w.stop is not None for w in windows)


def test_db_config_hooks_collect_wipe(standin, tmp_path):
    c, db, _, _ = standin
    n1, n2 = c.node("n1"), c.node("n2")
    props = dict(line.split("=", 1) for line in n1.read_file(db.config_path(n1)).decode().splitlines())
    assert props["node.id"] == "0"
    assert props["listeners"] == f"PLAINTEXT://{n1.address}:9092,CONTROLLER://{n1.address}:9093"
    # three nodes: three voters of the controller quorum (clusters.db.default_controllers)
    assert props["controller.quorum.voters"] == ",".join(f"{i}@{n.address}:9093" for i, n in enumerate(c.nodes))
    assert props["log.dirs"] == db.data_dir(n1)
    p2 = dict(line.split("=", 1) for line in n2.read_file(db.config_path(n2)).decode().splitlines())
    assert p2["node.id"] == "1" and p2["process.roles"] == "broker,controller"
    assert p2["listeners"] == f"PLAINTEXT://{n2.address}:9092,CONTROLLER://{n2.address}:9093"

    class EnvHook:
        def start_env(self, _db, _node):
            return {"WRACK_TEST_ENV": "from-hook"}

    db.hooks.append(EnvHook())
    db.stop(n1)
    assert not db.running(n1)
    db.start(n1)
    db.wait_ready(n1)
    out = db.collect(n1, tmp_path / "run")
    assert (out / "server.properties").exists() and (out / "broker.log").exists()
    assert "from-hook" in (out / "data" / "started").read_text()
    db.stop(n1)
    db.wipe(n1)
    assert n1.exec(["ls", "-A", db.data_dir(n1)]).stdout == ""
