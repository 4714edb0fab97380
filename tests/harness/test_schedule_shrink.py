"""The fault schedule as a file, the anomaly fingerprint, and delta debugging over a schedule
(harness/schedule_file.py, harness/fingerprint.py, harness/shrink.py) with a deterministic
stand-in for the runs."""

from __future__ import annotations

import json
import random
from dataclasses import replace

import pytest

import suites
from contracts import generator as g
from contracts.errors import InputError
from harness import fingerprint as fpr
from harness import schedule_file as sf
from harness.cmd_rerun import majority
from harness.faults import ScheduleGenerator, fault_packages
from harness.shrink import Shrinker

WRACK = suites.get("wrack")


def _ops(gen, until_s=60):
    """The ops a nemesis-only generator gives on a clock where each op takes no time."""
    gen = g.time_limit(until_s, g.nemesis(gen))
    out, t = [], 0
    while (o := gen.op(g.Context(t, random.Random(0), {"nemesis": "nemesis"}, frozenset({"nemesis"})))) is not None:
        out.append(o)
        t = o["time"]
    return out


def _schedule(n=12):
    pkgs = ["partition", "kill-leader", "kill", "last-replica-standing"]
    acts = []
    for i in range(n):
        p = pkgs[i % len(pkgs)]
        f, v = {"partition": ("start-partition", "majority"), "last-replica-standing": ("last-replica-standing", None),
                "kill-leader": ("kill", {"role": "leader", "topic": "t", "partition": 0}),
                "kill": ("kill", "one")}[p]
        acts.append(sf.Action(3.0 + 4 * i, p, f, v, [f"n{1 + i % 5}"]))
    return sf.Schedule(acts, pkgs, "wrack", 7, {"time_limit": 60.0, "nodes": 5, "topics": 2, "partitions": 2,
                                                  "concurrency": "1n"})


def test_generated_ops_name_their_package_and_the_recorder_keeps_roles_and_nodes():
    pkgs = fault_packages(["kill-leader", "partition"], WRACK, {"t": 2})
    ops = _ops(ScheduleGenerator(pkgs, 5.0, random.Random(3)))
    assert {o["package"] for o in ops} == {"kill-leader", "partition"}
    rec = sf.Recorder(["n1", "n2", "n3"])
    for o in ops:
        rec.played(o, {"value": {"nodes": ["n2"]} if o["f"] == "kill" else {"grudge": {"n1": ["n3"]}}})
    kill = next(a for a in rec.actions if a.f == "kill")
    assert kill.value["role"] == "leader" and kill.nodes == ["n2"] and kill.package == "kill-leader"
    assert [a.at_s for a in rec.actions] == [o["time"] / 1e9 for o in ops]


def test_schedule_file_round_trip_and_replay_at_its_times(tmp_path):
    sched = _schedule()
    path = sched.write(tmp_path / "schedule.json")
    back = sf.load(path, WRACK)
    assert back.to_dict() == sched.to_dict()
    assert back.options["time_limit"] == 60.0 and back.seed == 7
    ops = _ops(ScheduleGenerator.played(back.actions))
    assert [(o["f"], o["value"], o["package"]) for o in ops] == [(a.f, a.value, a.package) for a in sched.actions]
    assert [o["time"] for o in ops] == [int(a.at_s * 1e9) for a in sched.actions]
    # an action never starts before the previous one ended: a late clock plays it at once
    late = ScheduleGenerator.played(back.actions)
    first = late.op(g.Context(int(10e9), random.Random(0), {"nemesis": "nemesis"}, frozenset({"nemesis"})))
    assert first["time"] == int(10e9)


@pytest.mark.parametrize("text, says", [
    ("{not json", "not a schedule file (JSON)"),
    ('{"packages": []}', 'no "actions" list'),
    ('{"packages": ["flood"], "actions": []}', "unknown fault package 'flood'"),
    ('{"actions": [{"at_s": 1, "package": "kill", "f": "explode"}]}', "unknown fault 'explode'"),
    ('{"actions": [{"at_s": 1, "package": "kill-leader", "f": "kill", "value": {"role": "janitor"}}]}',
     "unknown role 'janitor'"),
    ('{"actions": [{"at_s": "soon", "package": "kill", "f": "kill"}]}', "at_s 'soon' is not a number"),
])
def test_a_bad_schedule_file_is_one_line_naming_the_file(tmp_path, text, says):
    p = tmp_path / "bad.json"
    p.write_text(text)
    with pytest.raises(InputError) as e:
        sf.load(p, WRACK)
    assert says in str(e.value) and str(p) in str(e.value) and "\n" not in str(e.value)


def test_fingerprint_is_types_and_shape_not_offsets():
    a = {"valid": False, "anomaly_types": ["lost-write", "unseen"], "allowed": ["unseen"],
         "anomaly_keys": {"lost-write": {"t-0": 3}, "unseen": {"t-0": 1, "t-1": 2}},
         "anomalies": {"lost-write": [{"offset": 17}]}}
    b = {**a, "anomaly_keys": {"lost-write": {"t-1": 40}}, "anomalies": {"lost-write": [{"offset": 99}]}}
    fa, fb = fpr.fingerprint(a), fpr.fingerprint(b)
    assert fa == {"verdict": "invalid", "anomalies": [{"type": "lost-write", "keys": "one"}]}
    assert fpr.same(fa, fb)  # other offsets, other key: the same bug
    c = {**a, "anomaly_keys": {"lost-write": {"t-0": 1, "t-1": 1}}}
    assert not fpr.same(fa, fpr.fingerprint(c)) and fpr.shows_bug(fpr.fingerprint(c), fa)
    assert not fpr.shows_bug(fpr.fingerprint({"valid": True, "anomaly_types": []}), fa)
    assert fpr.fingerprint(None)["verdict"] == "crashed"
    assert fpr.describe(fa) == "invalid: lost-write (one key)"
    assert majority([1, 0, 1]) == 1 and majority([0, 1]) == 1 and majority([0, 0, 2]) == 0


class FakeRuns:
    """A deterministic stand-in for real runs: the bug shows when the kill-leader action at
    `trigger_s` (moved by the same shift as the rest) is played with a partition after it,
    on at least 3 nodes; a candidate's run shows it on every `miss`-th try only... never: the
    first `misses` runs of each kept shape miss, to exercise the K tries."""

    def __init__(self, misses=0):
        self.calls, self.misses, self.seen = 0, misses, {}

    def __call__(self, s):
        self.calls += 1
        if s.options.get("nodes", 5) < 3:
            raise InputError("--rf: 3 must be between 1 and the number of nodes")
        kills = [a for a in s.actions if a.package == "kill-leader"]
        parts = [a for a in s.actions if a.package == "partition"]
        shown = any(k.value["partition"] == 0 and any(p.at_s > k.at_s for p in parts) for k in kills)
        key = json.dumps(s.to_dict(), sort_keys=True)
        self.seen[key] = self.seen.get(key, 0) + 1
        return shown and self.seen[key] > self.misses


def test_delta_debugging_finds_the_two_actions_and_the_smaller_options():
    sched = _schedule(12)
    runs = FakeRuns()
    out = Shrinker(sched, runs, times=2, budget_s=1e9).run()
    acts = out.schedule.actions
    assert [a.package for a in acts] == ["kill-leader", "partition"]
    assert acts[0].at_s == pytest.approx(5.0)  # moved to the front
    assert out.schedule.options["time_limit"] < 60 and out.schedule.options["nodes"] == 3
    assert out.schedule.options["topics"] == 1 and out.schedule.options["concurrency"] == "1"
    assert out.schedule.packages == ["partition", "kill-leader"] and out.tries == runs.calls
    assert runs(out.schedule)  # the result still shows the bug


def test_each_candidate_gets_k_runs_and_the_budget_stops_runs():
    sched = _schedule(8)
    flaky = FakeRuns(misses=1)  # every candidate misses once, then shows
    assert len(Shrinker(sched, flaky, times=1, budget_s=1e9).run().schedule.actions) == 8  # K=1: nothing kept
    out = Shrinker(sched, FakeRuns(misses=1), times=2, budget_s=1e9).run()
    assert len(out.schedule.actions) == 2
    t = [0.0]

    def slow(s):
        t[0] += 100.0
        return True

    out = Shrinker(sched, slow, times=2, budget_s=250.0, clock=lambda: t[0]).run()
    assert out.out_of_budget and out.tries == 2  # the third run would overrun 250 s
    assert replace(sched, actions=[]).used_packages() == []


def test_the_focus_guess_around_the_first_anomaly_costs_one_candidate():
    sched = _schedule(12)  # kill-leader at 7, 23, 39 s; partitions at 3, 19, 35 s
    runs = FakeRuns()
    out = Shrinker(sched, runs, times=2, budget_s=1e9, hint_s=25.0).run()
    assert "focus" in out.steps[0] and "kept" in out.steps[0]
    assert [a.package for a in out.schedule.actions] == ["kill-leader", "partition"]


def test_a_campaign_page_shows_each_cells_detection_rate_and_the_baselines():
    from harness.campaign import compare, detection, summary_counts, summary_html

    def run(v, kinds=()):
        return {"verdict": v, "anomaly_types": list(kinds), "run_id": "r", "path": "p"}

    cells = [{"key": "k1", "label": "off elr", "expect": "invalid", "verdict": "invalid", "passed": False,
              "runs": [run("invalid", ["lost-write"]), run("valid"), run("invalid", ["lost-write"])]},
             {"key": "k2", "label": "safe", "expect": "valid", "verdict": "valid", "passed": True,
              "runs": [run("valid"), run("valid")]}]
    for c in cells:
        c["detection"] = detection(c["expect"], c["runs"])
    assert cells[0]["detection"] == {"met": 2, "runs": 3}
    base = {"name": "before", "cells": [{**cells[0], "runs": [run("valid"), run("invalid", ["lost-write"])]}]}
    results = {"name": "c", "start": "s", "end": "e", "cells": cells}
    compare(results, base)
    results["summary"] = summary_counts(results)
    page = summary_html(results)
    assert "2/3 (67 %) found" in page and "2/2 (100 %) stayed valid" in page and "1/2 (50 %)" in page


def test_the_report_leads_with_the_bug_and_folds_the_configuration(tmp_path):
    from test_harness_report_explain import analyze_run, make_queue_run

    run = make_queue_run(tmp_path)
    test = json.loads((run / "test.json").read_text())
    test["options"].update(acks="all", safeguards_off=["clean-election-only"])  # nothing allows the loss now
    (run / "test.json").write_text(json.dumps(test))
    sf.Schedule([sf.Action(0.5, "kill-leader", "kill", {"role": "leader", "topic": "queue0", "partition": 0},
                           ["n1"]),
                 sf.Action(0.9, "kill-leader", "start", "all", ["n1"], ok=False)],
                ["kill-leader", "partition"], "wrack", 3, {"time_limit": 60.0}).write(run / "schedule.json")
    res = analyze_run(run)
    assert res["valid"] is False
    html = (run / "report.html").read_text()
    order = [html.index(f'id="{s}"') for s in ("verdict", "cause", "anomalies", "explanations", "reproduce",
                                               "coverage", "configuration", "policy")]
    assert order == sorted(order)
    cause = html[html.index('id="cause"'):html.index("</p>", html.index('id="cause"'))]
    assert "inconsistent-offsets" in cause or "lost-write" in cause
    cov = html[html.index('id="coverage"'):html.index('id="configuration"')]
    assert "<code>kill-leader</code></td><td>2</td><td>1</td>" in cov and "never played" in cov  # partition
    conf = html[html.index('id="configuration"'):html.index('id="policy"')]
    assert "<details>" in conf and "--schedule" not in conf
    assert "wrack rerun" in html and "wrack shrink" in html and "--schedule" in html


def test_a_rerun_of_a_run_older_than_an_option_runs_as_it_did(tmp_path):
    """`wrack rerun` reads a run's options from its test.json; an option added since (lulls)
    takes the behaviour the run had (none), not today's default; one recorded is kept."""
    from harness import reproduce

    old = reproduce.StoredRun(tmp_path, {"options": {"nodes": 3, "seed": 7, "no_such_option": 1}}, None)
    o = reproduce.options(old)
    assert (o.nodes, o.seed, o.lulls, o.test_count) == (3, 7, "none", 1)
    new = reproduce.StoredRun(tmp_path, {"options": {"lulls": "20:5:4"}}, None)
    assert reproduce.options(new).lulls == "20:5:4"
