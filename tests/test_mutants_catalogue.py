"""The mutant catalogue (bench/mutants/, issue 25) measures the harness and never steers it:
no product package reads it; every patch names the bug it resembles and applies to the
broker as committed; bench/mutants.py refuses bad input with one line and exit 254."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import mutants  # noqa: E402

PRODUCT = ("contracts", "broker", "clusters", "nemesis", "workloads", "checkers", "suites", "pipeline", "harness")
AREAS = {"replica/HWM/ISR", "election/epochs", "storage/flush/recovery", "idempotent producers",
         "transactions/coordinator", "groups/offsets", "produce/fetch errors", "controller/Raft", "wire"}


def test_nothing_in_the_product_reads_the_catalogue():
    pattern = re.compile(r"bench[/.]mutants|mutants\.py|load_catalogue")
    hits = [f"{p}" for pkg in PRODUCT for p in (ROOT / pkg).rglob("*.py") if pattern.search(p.read_text())]
    assert hits == []


def test_the_catalogue_spans_the_broker_and_names_real_bugs():
    cat = mutants.load_catalogue()
    real = [m for m in cat.values() if m.equivalent is None]
    assert len(cat) >= 30 and len(real) >= 30
    assert {m.area for m in cat.values()} == AREAS
    for m in cat.values():
        assert re.search(r"KAFKA-\d+|KIP-\d+|Jepsen|Raft", m.resembles), m.name
        assert m.patch.count("\n+++ ") >= 1 and "\n-" in m.patch and "\n+" in m.patch, m.name


def test_every_patch_applies_to_the_committed_broker(capsys):
    assert mutants.check(mutants.load_catalogue(), "HEAD") == 0
    assert "patches apply to HEAD" in capsys.readouterr().out


def test_bad_input_is_one_line_and_254(tmp_path):
    for args in (["--mutants", "no-such-mutant", "--out", str(tmp_path)], ["--twins", "default,evil", "--out", str(tmp_path)],
                 ["--runs", "0", "--out", str(tmp_path)], [],
                 ["--workers", "2", "--master", "spark://127.0.0.1:7077", "--out", str(tmp_path)]):
        p = subprocess.run([sys.executable, str(ROOT / "bench" / "mutants.py"), *args], capture_output=True, text=True)
        assert p.returncode == 254, (args, p.stderr)
        assert p.stderr.startswith("mutants: error: ") and len(p.stderr.strip().splitlines()) == 1


def test_a_round_owes_a_twin_until_an_earlier_twin_caught_it(tmp_path):
    """The Spark path runs one campaign per twin over the rounds that still owe it (as the
    sequential path runs a round's twins in order and stops at the first invalid one)."""
    res = mutants.Results(tmp_path)
    m = mutants.Mutant("m", "wire", "KIP-1", None, "")
    for rnd, twin, verdict in ((1, "default", "invalid"), (2, "default", "valid"), (3, "default", "valid"),
                               (3, "txn", "invalid")):
        res.add({"kind": "run", "mutant": "m", "round": rnd, "twin": twin, "verdict": verdict})
    a = mutants.parse(["--out", str(tmp_path)])
    assert mutants._owed(m, res, a, "default") == []
    assert mutants._owed(m, res, a, "txn") == [2]
    assert mutants._owed(m, res, a, "idem") == [2]
    a.all_twins = True
    assert mutants._owed(m, res, a, "idem") == [1, 2, 3]
    assert mutants.Results(tmp_path).runs("m") == res.runs("m")  # resumed from results.jsonl


def test_a_round_counts_once_caught_or_every_twin_ran(tmp_path):
    """The table's rounds are the complete ones: a round whose default test was valid and whose
    twins have not run yet is pending, not missed."""
    res = mutants.Results(tmp_path)
    m = mutants.Mutant("m", "wire", "KIP-1", None, "")
    for rnd, twin, verdict, first in ((1, "default", "valid", None), (1, "txn", "invalid", 12.0),
                                      (2, "default", "valid", None), (2, "txn", "valid", None),
                                      (2, "idem", "valid", None), (2, "fsync", "valid", None),
                                      (3, "default", "valid", None)):
        res.add({"kind": "run", "mutant": "m", "round": rnd, "twin": twin, "verdict": verdict,
                 "first_anomaly_s": first, "anomaly_types": ["lost-write"] if first else [], "wall_s": 1.0})
    a = mutants.parse(["--out", str(tmp_path), "--no-sim"])
    row = mutants.summarize(m, res, a, None, list(mutants.DEFAULT_TWINS))
    assert (row["caught"], row["rounds"], row["pending"]) == (1, 2, 1)
    assert row["by_twin"] == ["txn"] and row["first_anomaly_s"] == 12.0
    assert mutants.totals([row], 3)["measured"] == 0  # not yet 3 complete rounds
    assert "1/2 (+1 begun)" in mutants.markdown([row], mutants.totals([row], 3))


def test_reanalyze_checks_a_kept_run_again_and_updates_its_row(tmp_path):
    """A kept run's row takes the current checkers' verdict and time to the first anomaly."""
    from contracts import store
    from contracts.history import clock_anchor, write_history
    run = store.new_run(tmp_path / "runs", "m-r1-default")
    store.write_json(run / "test.json", {
        "name": "m", "start": "2026-01-01T00:00:00+00:00", "end": "2026-01-01T00:01:00+00:00",
        "options": {"workload": "queue", "acks": "all", "nodes": 3, "rf": 3, "min_isr": 2, "topics": 1,
                    "partitions": 1, "nemesis": [], "safeguards_off": [], "flush_policy": "none"},
        "timings": {"final": 1.0}, "history_start": clock_anchor(5_000_000_000)})
    evs = [{"process": 1, "type": "invoke", "f": "send", "value": [["send", "k", 7]]},
           {"process": 1, "type": "ok", "f": "send", "value": [["send", "k", [0, 7]]]}]  # never read: unseen
    write_history(run / "history.jsonl", [{**e, "time": (i + 1) * 10**9} for i, e in enumerate(evs)])
    res = mutants.Results(tmp_path)
    res.add({"kind": "run", "mutant": "m", "round": 1, "twin": "default", "verdict": "valid", "anomaly_types": [],
             "first_anomaly_s": None, "run": str(run)})
    res.add({"kind": "run", "mutant": "m", "round": 2, "twin": "default", "verdict": "valid", "anomaly_types": [],
             "first_anomaly_s": None, "run": None})  # a valid run's folder is not kept
    assert mutants.reanalyze(res, {"m"}) == 1
    rows = mutants.Results(tmp_path).runs("m")
    assert rows[0]["verdict"] == "invalid" and rows[0]["anomaly_types"] == ["unseen"]
    assert rows[0]["first_anomaly_s"] == 2.0 and rows[1]["verdict"] == "valid"
