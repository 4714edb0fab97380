"""Results store (run folders, latest links, discovery) and the expected-anomaly policy."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from contracts import store
from contracts.errors import InputError
from suites.wrack.rules import choose


def test_new_run_is_unique_and_latest_follows(tmp_path):
    t = dt.datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=dt.UTC)
    a = store.new_run(tmp_path, "queue test/1", t)
    b = store.new_run(tmp_path, "queue test/1", t)
    assert a.name == "20260102T030405.678" and b.name == "20260102T030405.679"
    assert a.parent.name == "queue_test_1"
    assert (a.parent / "latest").resolve() == b.resolve()
    assert store.run_id(a) == "queue_test_1/20260102T030405.678"


def test_find_runs_walks_skips_latest_and_resolves(tmp_path):
    runs = []
    for name in ("a", "b"):
        r = store.new_run(tmp_path / "results", name)
        (r / "history.jsonl").write_text("")
        runs.append(r)
    c = store.new_run(tmp_path / "campaign" / "runs", "c")
    store.write_json(c / "test.json", {"name": "c", "options": {"acks": "1"}})
    (tmp_path / "loop").symlink_to(tmp_path)  # a symlink loop must not hang the walk
    found = store.find_runs([tmp_path])
    assert sorted(p.resolve() for p in found) == sorted(p.resolve() for p in [*runs, c])
    assert store.resolve_run(runs[0].parent) == runs[0]
    assert store.resolve_run(runs[0].parent / "latest") == runs[0].resolve()
    assert store.resolve_run(runs[0]) == runs[0]
    with pytest.raises(InputError):
        store.resolve_run(tmp_path / "nope")
    with pytest.raises(InputError, match="runs below"):
        store.resolve_run(tmp_path / "results")


def test_summarize_reads_what_is_there(tmp_path):
    r = store.new_run(tmp_path, "x")
    store.write_json(r / "test.json", {"name": "x", "start": "2026-01-01T00:00:00", "seed": 5,
                                       "options": {"acks": "all"}})
    s = store.summarize(r)
    assert s.verdict() == "unchecked" and s.seed == 5
    store.write_json(r / "results.json", {"valid": False, "anomaly_types": ["lost-write"]})
    s = store.summarize(r)
    assert s.verdict() == "invalid" and s.anomaly_types == ["lost-write"]
    assert json.loads(json.dumps(s.to_dict()))["verdict"] == "invalid"


def test_versions_and_git():
    v = store.versions()
    assert v["python"] and "librdkafka" in v and "." in v["confluent_kafka"]
    g = store.git_info()
    assert set(g) == {"rev", "dirty"}


ACKS1 = ["inconsistent-offsets", "int-nonmonotonic-send", "lost-write", "nonmonotonic-send", "producer-gap",
         "producer-reorder", "unseen"]
COMMITTED = sorted([*ACKS1, "nonmonotonic-poll", "int-nonmonotonic-poll", "replica-divergence"])


@pytest.mark.parametrize("opts,allowed,name", [
    ({"workload": "queue", "acks": "all", "min_isr": 2, "rf": 3}, [], "strict"),
    ({"workload": "queue", "acks": "1", "min_isr": 2, "rf": 3}, ACKS1, "acks1"),
    ({"workload": "queue", "acks": "mixed", "min_isr": 2, "rf": 3}, ACKS1, "acks1"),
    ({"workload": "queue", "acks": "all", "min_isr": 1, "rf": 3}, COMMITTED, "min-isr1"),
    ({"workload": "queue", "acks": "all", "min_isr": 2, "rf": 1}, COMMITTED, "min-isr1"),
    # from the configuration alone (no fault events known) power loss allows nothing: what it
    # allows depends on how many replicas lost data at once (tests/harness/test_harness_lossy_policy.py)
    ({"workload": "queue", "acks": "all", "min_isr": 2, "rf": 3, "nemesis": ["power-loss"]}, [], "strict"),
    ({"workload": "queue", "acks": "1", "nemesis": ["power-loss", "kill"]}, ACKS1, "acks1"),
    ({"workload": "queue", "acks": "all", "min_isr": 2, "rf": 3, "nemesis": ["power-loss"],
      "flush_policy": "every"}, [], "strict"),
    ({"workload": "queue", "acks": "all", "nemesis": ["clock", "corruption", "membership"]}, [], "strict"),
    ({"workload": "log", "acks": "1"}, ["nonlinearizable"], "acks1"),
    ({"workload": "log", "acks": "all", "nemesis": ["power-loss"]}, [], "strict"),
    ({"workload": "log", "acks": "all"}, [], "strict"),
    ({"workload": "queue", "acks": "all", "safeguards_off": ["elr"]}, [], "strict"),
    ({"workload": "noop", "acks": "1"}, [], "strict"),
])
def test_policy(opts, allowed, name):
    p = choose(opts)
    assert p.name == name and p.reasons
    assert p.allowed == allowed


def test_policy_names_are_the_checkers_and_each_has_a_reason():
    from checkers.queue import POLICIES, resolve_allowed

    together = [{"index": 0, "time": 1, "process": "nemesis", "type": "info", "f": "power-loss",
                 "value": {"nodes": ["n1", "n2"], "lost": {}}}]  # two replicas of every partition
    p = choose({"workload": "queue", "acks": "1", "nemesis": ["power-loss"], "nodes": 3}, incomplete=True,
               events=together, keys=["queue0-0"])
    assert p.names == ["acks1", "power-loss-unflushed", "final-read-deadline"]
    assert set(p.allowed) == resolve_allowed(policies=p.names)
    d = p.to_dict()
    assert [x["name"] for x in d["policies"]] == p.names
    for x in d["policies"]:
        assert x["reason"] and x["allows"] == sorted(POLICIES[x["name"]])
    assert d["allowed"] == p.allowed and len(d["reasons"]) == 3 and d["notes"] == []
    assert choose({"workload": "log", "acks": "1"}, incomplete=True).names == ["acks1"]  # no final read to miss
