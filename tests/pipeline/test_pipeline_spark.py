"""The pipeline on a real local Spark session: ingest, distributed checks, analytics.

One synthetic campaign (queue runs with planted anomalies of random types, a clean run,
a torn and a damaged history, log-workload runs) is ingested and checked once per module;
the tests compare what Spark found with the single-process checkers on the same files.
"""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pyarrow.parquet as pq
import pytest
from queue_cases import MANY, canon, edge_history, judged, op, queue_cfg

import checkers.queue as cq
from checkers.linearizable import check_events
from contracts.history import loads, read_events, write_history
from pipeline import analytics, report, store, synth
from pipeline.check import check
from pipeline.ingest import ingest
from pipeline.schemas import ARROW, TABLES

pytestmark = [pytest.mark.spark, pytest.mark.filterwarnings("ignore::FutureWarning")]


@pytest.fixture(scope="module")
def campaign(spark, tmp_path_factory) -> SimpleNamespace:
    root = tmp_path_factory.mktemp("pipeline")
    results = root / "results"
    rng = random.Random(8)
    runs = {}
    for i in range(6):
        # the first two were checked by the harness: results.json from the real queue checker
        checked = (lambda d: judged(cq.check_file(d / "history.jsonl"), ["unseen"])) if i < 2 else None
        r = synth.write_run(results, queue_cfg(i, rng), name=f"q{i}", stamp=i, with_results=checked)
        runs[r.run_id] = r
    for r in (synth.write_run(results, synth.SynthConfig(ops=800, seed=5, nemesis_interval_s=0.1), name="clean"),
              synth.write_run(results, synth.SynthConfig(ops=600, seed=6, plant={"lost-write": 1}), name="torn",
                              torn_tail=True),
              synth.write_run(results, synth.SynthConfig(ops=600, seed=7), name="damaged", garbage_at=0.6),
              synth.write_run(results, synth.SynthConfig(ops=600, seed=9, options={"flush_policy": "<script>x</script>"}),
                              name="escape"),
              synth.write_run(results, synth.SynthConfig(ops=900, keys=3, seed=10, workload="log"), name="log-ok"),
              synth.write_run(results, synth.SynthConfig(ops=900, keys=3, seed=11, workload="log",
                                                         plant={"nonlinearizable": 1}), name="log-bad")):
        runs[r.run_id] = r
    edge = results / "edge" / "20260101T000000.000"
    edge.mkdir(parents=True)
    write_history(edge / "history.jsonl", edge_history())
    runs["edge/20260101T000000.000"] = synth.SynthRun(edge, "edge/20260101T000000.000", 0, 0, {})
    out = str(root / "pq")
    ing = ingest(spark, [str(results)], out)
    chk = check(spark, out, max_examples=MANY)
    yield SimpleNamespace(root=root, results=results, out=out, runs=runs, ingest=ing, check=chk)
    shutil.rmtree(root, ignore_errors=True)


def _good_prefix(path: Path) -> list[dict[str, Any]]:
    """The events before the first line that is not a JSON object (what ingest keeps)."""
    out = []
    for raw in path.read_bytes().splitlines():
        try:
            ev = loads(raw)
        except ValueError:
            break
        out.append(ev)
    return out


def test_every_run_is_ingested_once_with_damage_flagged(campaign):
    ing = campaign.ingest
    assert ing.found == ing.ingested == len(campaign.runs)
    damaged = {d["run_id"]: d for d in ing.damaged}
    assert set(damaged) == {campaign.runs[k].run_id for k in campaign.runs if k.split("/")[0] in ("torn", "damaged")}
    rows = {r["run_id"]: r for r in store.read_table(campaign.out, "runs").to_pylist()}
    torn = next(r for k, r in rows.items() if k.startswith("torn/"))
    assert torn["damaged"] and "torn last line" in torn["damage"] and torn["dropped_lines"] == 1
    bad = next(r for k, r in rows.items() if k.startswith("damaged/"))
    assert "damaged line" in bad["damage"] and bad["dropped_lines"] > 100
    # the damaged run's ops are exactly those of its good prefix
    prefix = _good_prefix(campaign.runs[bad["run_id"]].path / "history.jsonl")
    invokes = sum(e["type"] == "invoke" and e["process"] != "nemesis" for e in prefix)
    assert bad["ops"] == invokes and bad["events"] == len(prefix)


def test_results_json_is_ingested(campaign):
    rows = {r["run_id"]: r for r in store.read_table(campaign.out, "runs").to_pylist()}
    ingested = store.read_table(campaign.out, "anomalies").to_pylist()
    for name in ("q0", "q1"):
        rid = next(k for k in campaign.runs if k.startswith(name + "/"))
        res = json.loads((campaign.runs[rid].path / "results.json").read_text())
        row = rows[rid]
        assert row["has_results"] and row["valid"] == {True: "true", False: "false"}[res["valid"]]
        assert dict(row["anomaly_counts"]) == res["anomaly_counts"] and row["allowed"] == ["unseen"]
        mine = [a for a in ingested if a["run_id"] == rid and a["source"] == "results.json"]
        assert len(mine) == sum(len(v) for v in res["anomalies"].values())
        assert all(a["op_index"] is not None and a["time"] is not None for a in mine)
        # the harness's policy is the one the pipeline's check applies too
        assert campaign.check.results[rid]["allowed"] == ["unseen"]
    assert not rows[next(k for k in campaign.runs if k.startswith("q2/"))]["has_results"]


def test_tables_are_parquet_with_the_explicit_schemas(campaign):
    for t in TABLES:
        files = store.parquet_files(campaign.out, t)
        assert files, t
        for f in files:
            schema = pq.read_schema(f)
            want = ARROW[t]
            assert schema.names == want.names, (t, f)
            assert [schema.field(n).type for n in want.names] == [want.field(n).type for n in want.names], (t, f)


def test_spark_and_the_queue_checker_agree(campaign):
    compared = 0
    for rid, run in campaign.runs.items():
        res = campaign.check.results[rid]
        if res["checker"] != "queue":
            continue
        hist = run.path / "history.jsonl"
        if rid.startswith("damaged/"):
            ref = judged(cq.check(_good_prefix(hist), max_examples=MANY), res["allowed"])
        else:
            ref = judged(cq.check_file(hist, max_examples=MANY), res["allowed"])
        assert res["anomaly_counts"] == ref["anomaly_counts"], rid
        assert res["valid"] == ref["valid"], rid
        assert res["anomaly_types"] == ref["anomaly_types"], rid
        for t in ref["anomaly_types"]:
            assert canon(res["anomalies"][t]) == canon(ref["anomalies"][t]), (rid, t)
            assert all(e["explanation"] for e in res["anomalies"][t])
        for k in ("by_f", "availability", "outside_faults"):
            assert res["stats"][k] == ref["stats"][k], (rid, k)
        compared += 1
        for kind in run.planted:
            assert kind in res["anomaly_types"], (rid, kind)
    assert compared == 11
    edge = campaign.check.results["edge/20260101T000000.000"]
    assert set(edge["anomaly_types"]) >= {"int-send-skip", "int-nonmonotonic-send", "nonmonotonic-send",
                                          "garbage-read", "precommitted-read", "int-poll-skip", "nonmonotonic-poll"}
    assert {"key": "g", "value": "y", "ops": [23]}.items() <= edge["anomalies"]["garbage-read"][1].items()


def test_spark_and_the_linearizability_checker_agree(campaign):
    for name, valid in (("log-ok", True), ("log-bad", False)):
        run = next(r for k, r in campaign.runs.items() if k.startswith(name + "/"))
        res = campaign.check.results[run.run_id]
        ref = check_events(read_events(run.path / "history.jsonl"), "log")
        assert res["checker"] == "linearizable" and res["valid"] is valid is ref["valid"]
        assert res["ops"] == ref["ops"]
        if not valid:
            assert res["anomaly_types"] == ["nonlinearizable"]
            keys = {ex["key"] for ex in res["anomalies"]["nonlinearizable"]}
            assert {ex["key"] for ex in ref["anomalies"]["nonlinearizable"]} <= keys
            assert campaign.runs[run.run_id].planted["nonlinearizable"][0]["key"] in keys


def test_verdicts_and_anomalies_are_stored(spark, campaign):
    verdicts = store.read_table(campaign.out, "verdicts").to_pylist()
    assert {v["run_id"] for v in verdicts} == set(campaign.runs)
    for v in verdicts:
        assert json.loads(v["result"])["valid"] == {"true": True, "false": False}.get(v["valid"], "unknown")
    a = store.spark_read(spark, campaign.out, "anomalies")
    mine = a.where(a.source == "pipeline").groupBy("run_id", "type").count().collect()
    for r in mine:
        assert campaign.check.results[r["run_id"]]["anomaly_counts"][r["type"]] == r["count"]


def test_ingest_and_check_are_incremental(spark, tmp_path):
    results = tmp_path / "results"
    a = synth.write_run(results, synth.SynthConfig(ops=300, seed=1), name="a")
    out = str(tmp_path / "pq")
    assert ingest(spark, [str(results)], out).ingested == 1
    assert check(spark, out).checked == [a.run_id]
    b = synth.write_run(results, synth.SynthConfig(ops=300, seed=2, plant={"duplicate": 1}), name="b")
    assert b.planted
    again = ingest(spark, [str(results)], out)
    assert (again.found, again.skipped, again.ingested) == (2, 1, 1)
    c = check(spark, out)
    assert c.checked == [b.run_id] and set(c.results) == {a.run_id, b.run_id}
    assert c.results[b.run_id]["valid"] is False and c.results[a.run_id]["valid"] is True
    assert check(spark, out).checked == []
    assert len(store.read_table(out, "runs")) == 2  # nothing ingested twice


def test_report_by_configuration_and_fault_windows(spark, campaign, tmp_path):
    rep = analytics.analyse(spark, campaign.out)
    assert rep["runs"] == len(campaign.runs) and rep["checked"] == len(campaign.runs)
    assert sum(c["runs"] for c in rep["by_config"]) == rep["runs"]
    invalid = [c for c in rep["by_config"] if c["invalid"]]
    assert invalid and all(c["anomaly_rate"] > 0 for c in invalid)
    timed = [c for c in rep["by_config"] if c["time_to_first_anomaly_s"]["runs"]]
    assert timed and all(c["time_to_first_anomaly_s"]["min"] >= 0 for c in timed)
    overall = {r["inside"]: r for r in rep["faults"]["overall"]}
    # faults make the simulated broker slower and less available
    assert overall[True]["availability"] < overall[False]["availability"]
    assert overall[True]["latency_ms"]["p50"] > overall[False]["latency_ms"]["p50"]
    assert {r["f"] for r in rep["faults"]["by_f"]} >= {"send", "poll"}
    assert set(rep["by_dimension"]) == set(analytics.DIMENSIONS)
    files = report.write_report(rep, str(tmp_path / "report"))
    pngs = [f for f in files if f.endswith(".png")]
    assert {Path(f).stem for f in pngs} >= {"anomaly-rate", "availability", "latency", "time-to-first-anomaly"}
    assert all(Path(f).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for f in pngs)
    frag = report.html_fragment(str(tmp_path / "report"))
    assert frag.startswith('<section class="wrack-pipeline">') and frag.count("data:image/png;base64,") == len(pngs)
    assert "<script>" not in frag and "&lt;script&gt;x&lt;/script&gt;" in frag
    assert "http://" not in frag and "https://" not in frag and "src=\"/" not in frag


def test_regressions_against_a_baseline():
    def run(rid: str, cfg: str, valid: str, types: list[str]) -> dict[str, Any]:
        return {"run_id": rid, "config": cfg, "valid": valid, "anomaly_types": types}

    base = [run("b1", "A", "true", []), run("b2", "A", "true", []), run("b3", "B", "false", ["lost-write"])]
    now = [run("n1", "A", "false", ["lost-write"]), run("n2", "A", "true", []), run("n3", "B", "false", ["x"]),
           run("n4", "C", "false", ["x"])]
    reg = analytics.regressions(now, base)
    assert [r["run_id"] for r in reg["runs"]] == ["n1"]
    assert reg["cells"] == [{"config": "A", "baseline_runs": 2, "runs": 2, "regressed_runs": 1}]
    assert reg["anomaly_rate_up"] == [{"config": "A", "baseline_anomaly_rate": 0.0, "anomaly_rate": 0.5}]
    assert reg["compared_cells"] == 2


def _register_run(root: Path, name: str, stale: bool) -> Path:
    """A run folder of etcd's register workload: two keys, concurrent writes, compare-and-sets
    (one failing its compare) and reads; with `stale`, a read of key 1 returns the value a
    completed write had already replaced."""
    ev: list[dict[str, Any]] = []
    ev += op(0, "write", [0, 1], "ok", [0, 1])
    ev += op(1, "cas", [0, [1, 2]], "ok", [0, [1, 2]])
    ev += op(2, "cas", [0, [1, 3]], "fail", [0, [1, 3]])
    ev += op(3, "read", [0, None], "ok", [0, 2])
    ev += op(0, "write", [1, 4], "ok", [1, 4])
    ev += op(1, "write", [1, 0], "ok", [1, 0])
    ev += op(2, "read", [1, None], "ok", [1, 4 if stale else 0])
    ev += op(3, "write", [1, 2], "info", [1, 2], error="timeout")
    for i, e in enumerate(ev):
        e["index"], e["time"] = i, i * 1000
    run = root / name / "20260101T000000.000"
    run.mkdir(parents=True)
    write_history(run / "history.jsonl", ev)
    (run / "test.json").write_text(json.dumps({
        "name": name, "run_id": f"{name}/20260101T000000.000", "start": "2026-01-01T00:00:00+00:00",
        "end": "2026-01-01T00:00:01+00:00", "seed": 1,
        "options": {"db": "etcd", "workload": "register", "nemesis": ["partition"], "nodes": 3}}))
    return run


def test_etcd_register_runs_are_checked_with_the_cas_register_model(spark, tmp_path):
    results = tmp_path / "results"
    runs = {name: _register_run(results, name, stale) for name, stale in (("reg-ok", False), ("reg-stale", True))}
    out = str(tmp_path / "pq")
    assert ingest(spark, [str(results)], out).ingested == 2
    got = check(spark, out).results
    for name, run in runs.items():
        res = got[f"{name}/20260101T000000.000"]
        ref = check_events(read_events(run / "history.jsonl"), "cas-register")
        assert res["checker"] == "linearizable" and res["model"] == "cas-register"
        assert res["valid"] is ref["valid"] is (name == "reg-ok") and res["ops"] == ref["ops"]
    bad = got["reg-stale/20260101T000000.000"]
    assert bad["anomaly_types"] == ["nonlinearizable"]
    assert {str(ex["key"]) for ex in bad["anomalies"]["nonlinearizable"]} == {"1"}
