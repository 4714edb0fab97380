"""`wrack pipeline` through its console script: exit codes, bad input, the default local run.

The end-to-end test does what the acceptance check does (`ingest results --out DIR`,
`check DIR`, `report DIR`) on synthetic run folders laid out as the harness writes them.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from tests_pipeline_util import run_wrack

from pipeline import synth


def _fast(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return run_wrack(args, cwd=tmp_path, timeout=60)


@pytest.mark.parametrize("sub", [[], ["ingest"], ["check"], ["report"]])
def test_help(tmp_path, sub):
    p = _fast(["pipeline", *sub, "--help"], tmp_path)
    assert p.returncode == 0 and "usage:" in p.stdout


def test_bad_input_is_one_line_and_254(tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "file").write_text("x")
    (tmp_path / "pq" / "runs").mkdir(parents=True)
    synth.write_run(tmp_path / "results", synth.SynthConfig(ops=50), name="t")
    cases = [
        (["pipeline", "ingest", str(tmp_path / "nope"), "--out", "o"], "nope: no such file or directory"),
        (["pipeline", "ingest", str(tmp_path / "empty"), "--out", "o"], "no run folders found"),
        (["pipeline", "ingest", str(tmp_path / "results"), "--out", str(tmp_path / "file")], "not a directory"),
        (["pipeline", "ingest", str(tmp_path / "results"), "--out", str(tmp_path / "empty" / ".."),
          ], "is not a pipeline directory"),
        (["pipeline", "check", str(tmp_path / "empty")], "not a pipeline directory"),
        (["pipeline", "check", str(tmp_path / "pq"), "--master", "bogus://x"], "bad --master"),
        (["pipeline", "check", str(tmp_path / "pq"), "--remote", "http://x"], "bad --remote"),
        (["pipeline", "check", str(tmp_path / "pq"), "--max-examples", "0"], "--max-examples"),
        (["pipeline", "report", str(tmp_path / "pq"), "--baseline", str(tmp_path / "nope")], "not a pipeline"),
        (["pipeline", "ingest", str(tmp_path / "results")], "required: --out"),
        (["pipeline", "frobnicate"], "invalid choice"),
    ]
    for args, msg in cases:
        p = _fast(args, tmp_path)
        assert p.returncode == 254, (args, p.returncode, p.stderr)
        assert msg in p.stderr, (args, p.stderr)
        assert "Traceback" not in p.stderr
        assert len([ln for ln in p.stderr.splitlines() if ln.startswith("wrack")]) == 1, p.stderr


@pytest.mark.spark
def test_ingest_check_report_on_a_results_folder(tmp_path):
    results = tmp_path / "results"
    ok = synth.write_run(results, synth.SynthConfig(ops=600, seed=1), name="safe", stamp=1)
    synth.write_run(results, synth.SynthConfig(ops=600, seed=2), name="safe", stamp=2)
    bad = synth.write_run(results, synth.SynthConfig(ops=600, seed=3, plant={"duplicate": 1}), name="unsafe")
    os.symlink(ok.path.name, results / "safe" / "latest")
    pq = tmp_path / "pq"
    p = run_wrack(["pipeline", "ingest", str(results), "--out", str(pq), "--json"], cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["ingested"] == 3
    assert "Traceback" not in p.stderr and " INFO " not in p.stderr  # quiet: warnings and errors only
    p = run_wrack(["pipeline", "check", str(pq), "--json"], cwd=tmp_path)
    assert p.returncode == 1, p.stderr  # the run with a planted duplicate is invalid
    lines = [json.loads(ln) for ln in p.stdout.splitlines()]
    verdicts = {r["run"]: r["valid"] for r in lines}
    assert verdicts[bad.run_id] is False and sum(v is True for v in verdicts.values()) == 2
    assert "duplicate" in next(r for r in lines if r["run"] == bad.run_id)["anomaly_types"]
    p = run_wrack(["pipeline", "report", str(pq)], cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert (pq / "report" / "report.json").is_file() and (pq / "report" / "report.html").is_file()
    assert len(list((pq / "report").glob("*.png"))) >= 2
    assert len(list((pq / "ops").glob("*.parquet"))) == 3
