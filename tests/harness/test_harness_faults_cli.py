"""Fault packages and their schedule on the generator clock; CLI plumbing of analyze/report/demo."""

from __future__ import annotations

import json
import random
import subprocess

import pytest
from harness_testlib import wrack_bin

import suites
from contracts import generator as g
from contracts.history import write_history
from harness.faults import ScheduleGenerator, fault_packages, heal_op, known_packages

WRACK = suites.get("wrack")


def test_fault_packages_by_name_and_leader_targets():
    pkgs = fault_packages(["partition", "kill-leader", "partition-leader"], WRACK, {"queue0": 3})
    assert [p.name for p in pkgs] == ["partition", "kill-leader", "partition-leader"]
    rng = random.Random(1)
    op = pkgs[1].start(rng)
    assert op.f == "kill" and op.value["role"] == "leader" and op.value["topic"] == "queue0"
    assert 0 <= op.value["partition"] < 3
    shapes = [pkgs[2].start(rng) for _ in range(40)]  # the leader isolated, or cut off from its followers
    fs = [op.f for op in shapes]
    assert all(a != b for a, b in zip(fs, fs[1:], strict=False))  # the shapes alternate
    assert {op.f for op in shapes} == {"start-partition", "cut-leader"}
    assert all(op.value["isolate"]["role"] == "leader" for op in shapes if op.f == "start-partition")
    assert all(sorted(op.value["candidates"]) == [["queue0", p] for p in range(3)] for op in shapes
               if op.f == "cut-leader")
    power = fault_packages(["power-loss"], WRACK, {"queue0": 3})[0].start(rng)
    assert power.value["nodes"] == {"role": "lone-leader", "topics": ["queue0"], "else": "one"}
    with pytest.raises(ValueError, match="unknown nemesis flood"):
        fault_packages(["flood"], WRACK, {"t": 1})
    assert {"kill-leader", "partition", "kill"} <= set(known_packages(WRACK))


def test_controller_packages_target_the_active_controller():
    kill, part = fault_packages(["kill-controller", "partition-controller"], WRACK, {})  # no topics needed
    rng = random.Random(1)
    assert kill.start(rng).f == "kill" and kill.start(rng).value == {"role": "controller"}
    assert kill.stop.f == "start" and kill.final[0].f == "start"
    assert part.start(rng).value == {"isolate": {"role": "controller"}} and part.stop.f == "stop-partition"
    assert {"kill-controller", "partition-controller"} <= set(known_packages(WRACK))


def test_schedule_replays_for_a_seed_and_flip_flops():
    def ops(seed):
        pkgs = fault_packages(["partition", "kill"], WRACK, {"t": 1})
        gen = g.time_limit(60, g.nemesis(ScheduleGenerator(pkgs, 5.0, random.Random(seed))))
        out = []
        ctx_workers = {"nemesis": "nemesis"}
        t = 0
        while True:
            o = gen.op(g.Context(t, random.Random(0), ctx_workers, frozenset({"nemesis"})))
            if o is None:
                return out
            out.append((o["f"], o["time"]))
            t = o["time"]

    a, b, c = ops(3), ops(3), ops(4)
    assert a == b and a != c
    assert 6 <= len(a) <= 24  # one action every 2.5-7.5 s for 60 s
    on = {"partition": False, "kill": False}
    for f, _ in a:  # every stop follows its start
        kind = "partition" if "partition" in f else "kill"
        starting = f in ("start-partition", "kill")
        assert on[kind] != starting
        on[kind] = starting
    assert heal_op()["process"] == "nemesis"


def test_analyze_a_bare_history_with_workload_option(tmp_path):
    run = tmp_path / "bare"
    run.mkdir()
    write_history(run / "history.jsonl", [
        {"process": 0, "type": "invoke", "f": "noop", "value": 1},
        {"process": 0, "type": "ok", "f": "noop", "value": 1},
        {"process": 1, "type": "invoke", "f": "noop", "value": 2},
    ])
    p = subprocess.run([wrack_bin(), "analyze", str(run), "--workload", "noop", "--json"], capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    line = json.loads(p.stdout)
    assert line["verdict"] == "valid" and line["history"]["never_completed"] == 1
    assert (run / "report.html").is_file()
    p = subprocess.run([wrack_bin(), "report", str(run)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and p.stdout.strip().endswith("report.html")
    (run / "history.jsonl").write_text('{"process": 0, "type": "invoke"}\nnot json\n{"process": 0}\n')
    p = subprocess.run([wrack_bin(), "analyze", str(run), "--workload", "noop"], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 254 and "history.jsonl:1:" in p.stderr and "Traceback" not in p.stderr
    p = subprocess.run([wrack_bin(), "analyze", str(tmp_path / "nothing")], capture_output=True, text=True)
    assert p.returncode == 254 and "no such run folder" in p.stderr


def test_help_of_every_harness_command():
    for cmd in ("test", "analyze", "report", "campaign", "serve", "demo"):
        p = subprocess.run([wrack_bin(), cmd, "--help"], capture_output=True, text=True, timeout=60)
        assert p.returncode == 0 and "usage: wrack " + cmd in p.stdout


def test_the_demo_tells_what_the_run_did():
    """`wrack demo` prints a few lines before the verdict: operations, faults with availability
    under them, recovery after the heals, the replicas' agreement, the checker's finding (from
    results.json)."""
    from harness.cmd_demo import story

    res = {"checker": "queue", "anomaly_types": [],
           "history": {"ok": 900, "fail": 3, "info": 97}, "checked": {"sends_acked": 480, "values_read": 470},
           "liveness": {"bound_s": 30.0, "recovered_keys": ["a", "b"],
                        "availability": {"in_faults": {"ops": {"share": 0.25}}, "outside_faults": {"ops": {"share": 0.995}},
                                         "windows": [{"kind": "kill"}, {"kind": "partition"}, {"kind": "kill"}]},
                        "first_ok_send_after_heal": [{"seconds": 0.5}, {"seconds": 4.25}, {"seconds": None}]}}
    assert story(res) == [
        "workload: 1,000 operations: 900 ok, 97 indeterminate, 3 failed; 480 acknowledged sends, 470 values read",
        "faults: kill 2 time(s), partition 1 time(s); 25.0% of operations succeeded while they held, 99.5% outside them",
        "recovery: the first acknowledged send came 0.5-4.2 s after each of 2 heals; 2 key(s) took writes and reads "
        "within 30 s of the final heal",
        "checked (queue): no acknowledged write lost, duplicated or reordered"]
    found = story({**res, "anomaly_types": ["lost-write"], "liveness": {}})
    assert found[1:] == ["checked (queue): lost-write"]
    reps = {"valid": True, "checked": True, "partitions": 4, "replicas_read": 12}
    assert story({**res, "replicas": reps})[-2] == ("replicas: 12 replica logs of 4 partitions read after the final "
                                                   "phase: they agree below their high watermarks")
    assert "do not all agree" in story({**res, "replicas": {**reps, "valid": False}})[-2]
