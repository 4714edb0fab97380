"""Clock skew on real nodes: a process started through the ClockHook (LD_PRELOAD of the
PyPI libfaketime build) sees its node's offset - bumps of milliseconds to minutes, negative
ones, a strobe, a reset - while sleeps keep real durations; other nodes are untouched; every
clock event records the offsets the probe measured."""

from __future__ import annotations

import json
import random
import socket
import sys
import time
from pathlib import Path

import pytest

from contracts.history import HistoryWriter, fault_windows, read_events
from nemesis.clock import install_clock
from nemesis.core import FaultOp, Nemesis
from suites.wrack.db import BrokerDB, BrokerOptions

pytestmark = pytest.mark.root

PROBE = str(Path(__file__).resolve().parent / "clock_probe_broker.py")


def broker_offset(node) -> tuple[float, dict]:
    """The broker's wall clock minus ours (same kernel clock), in seconds."""
    t1 = time.time_ns()
    with socket.create_connection((node.address, 9092), timeout=5) as s:
        ans = json.loads(s.makefile().readline())
    t2 = time.time_ns()
    return (ans["time_ns"] - (t1 + t2) / 2) / 1e9, ans


@pytest.fixture
def clocked(make_cluster, tmp_path):
    c = make_cluster(2)
    db = BrokerDB(c, BrokerOptions(command=[sys.executable, PROBE]))
    hist = HistoryWriter(tmp_path / "history.jsonl")
    nem = Nemesis(c, db, history=hist, rng=random.Random(2))
    hook = install_clock(nem)
    for n in c.nodes:
        db.setup(n)
        db.start(n)
    for n in c.nodes:
        db.wait_ready(n, 20)
    try:
        yield c, db, nem, hist, hook
    finally:
        for n in c.nodes:
            db.teardown(n)


def test_clock_bump_strobe_reset_seen_by_the_broker(clocked):
    c, db, nem, hist, hook = clocked
    n1, n2 = c.node("n1"), c.node("n2")
    off, ans = broker_offset(n1)
    assert abs(off) < 0.05 and "libfaketime" in ans["preload"]
    assert 0.045 < ans["sleep_s"] < 0.5 and 0.045 < ans["asyncio_sleep_s"] < 0.5  # real durations

    ev = nem.invoke(FaultOp("start-clock", {"bump": ["n1"], "delta_ms": 90_000}))
    assert abs(broker_offset(n1)[0] - 90) < 0.1 and abs(broker_offset(n2)[0]) < 0.05
    v = ev["value"]
    assert v["action"] == "bump" and v["offsets_set"] == {"n1": 90.0}
    assert abs(v["clock-offsets"]["n1"] - 90) < 0.01 and abs(v["clock-offsets"]["n2"]) < 0.01
    assert v["preloaded"] == {"n1": True, "n2": True}

    nem.invoke(FaultOp("start-clock", {"bump": {"n1": -120_000, "n2": -250}}))
    assert abs(broker_offset(n1)[0] + 30) < 0.1
    assert abs(broker_offset(n2)[0] + 0.25) < 0.03
    ev = nem.invoke(FaultOp("check-clock"))
    assert abs(ev["value"]["clock-offsets"]["n2"] + 0.25) < 0.005  # the probe is precise to about 0.1 ms

    nem.invoke(FaultOp("start-clock", {"strobe": ["n2"], "delta_ms": 5000, "period_ms": 40, "duration_s": 1.5}))
    seen = set()
    end = time.monotonic() + 1.0
    while time.monotonic() < end:
        seen.add(round(broker_offset(n2)[0]))
        time.sleep(0.013)
    assert seen == {0, 5}, seen  # -0.25 s rounds to 0; -0.25 + 5 to 5
    deadline = time.monotonic() + 5
    while node_strobing(n2, hook) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert abs(broker_offset(n2)[0] + 0.25) < 0.03  # restored when the strobe ends

    ev = nem.invoke(FaultOp("stop-clock"))
    assert all(abs(o) < 0.01 for o in ev["value"]["clock-offsets"].values())
    assert abs(broker_offset(n1)[0]) < 0.05 and abs(broker_offset(n2)[0]) < 0.05
    assert nem.heal_all() == []  # nothing skewed: no extra event
    hist.close()
    events = [e for e in read_events(hist.path)]
    assert [e["f"] for e in events] == ["start-clock", "start-clock", "check-clock", "start-clock", "stop-clock"]
    assert all("clock-offsets" in e["value"] for e in events)
    assert [w.kind for w in fault_windows(events)] == ["clock"] * 3


def node_strobing(node, hook) -> bool:
    return node.daemon_running(hook.strobe_pidfile(node))


def test_clock_heal_resets_and_a_restart_keeps_the_preload(clocked):
    c, db, nem, hist, hook = clocked
    n1 = c.node("n1")
    nem.invoke(FaultOp("start-clock", {"bump": ["n1"], "delta_ms": 3_600_000}))
    nem.invoke(FaultOp("restart", ["n1"]))
    db.wait_ready(n1)
    assert abs(broker_offset(n1)[0] - 3600) < 0.1  # the offset file outlives the process
    nem.invoke(FaultOp("start-clock", {"strobe": ["n1"], "delta_ms": 100, "period_ms": 10, "duration_s": 30}))
    assert nem.heal_all() == []
    assert not node_strobing(n1, hook)
    assert abs(broker_offset(n1)[0]) < 0.05
    hist.close()
    last = list(read_events(hist.path))[-1]
    assert last["f"] == "stop-clock" and last["value"]["final"] is True
