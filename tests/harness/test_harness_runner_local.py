"""The runner's lifecycle on real local clusters (root), with the no-op workload and the
stand-in broker (a real daemon per node, real partitions and kills), so the plumbing is
tested without depending on the broker: run folder layout, node logs, healed faults,
exit codes, a SIGKILLed harness whose run `wrack analyze` still checks, and campaigns
(matrix, JUnit XML, baseline regressions)."""

from __future__ import annotations

import json
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from harness_testlib import ROOT, STANDIN, force_down, sigkilled_run, wrack_bin

from clusters.testing import can_run_local
from contracts.history import fault_windows, read_events

pytestmark = pytest.mark.root
needs_local = pytest.mark.skipif(not can_run_local(), reason="needs root and network namespaces")


def wrack(*args, check=None, timeout=300, **kw):
    p = subprocess.run([wrack_bin(), *args], capture_output=True, text=True, timeout=timeout, **kw)
    if check is not None:
        assert p.returncode == check, f"rc {p.returncode}\n{p.stdout}\n{p.stderr}"
    return p


@needs_local
def test_noop_run_folder_layout(tmp_path):
    p = wrack("test", "--workload", "noop", "--nodes", "3", "--nemesis", "partition,kill", "--nemesis-interval", "0.7",
              "--time-limit", "4", "--rate", "300", "--broker-command", STANDIN, "--results", str(tmp_path),
              "--quiet", "--json", "--seed", "42", check=0)
    line = json.loads(p.stdout.strip().splitlines()[-1])
    run = Path(line["run"])
    try:
        assert line["verdict"] == "valid" and run.parent.name == "noop-acksall-partition+kill"
        assert (run.parent / "latest").resolve() == run.resolve()
        test = json.loads((run / "test.json").read_text())
        assert test["seed"] == 42 and test["end"] and test["options"]["nemesis"] == ["partition", "kill"]
        assert set(test["timings"]) >= {"setup", "workload", "teardown", "check", "report"}
        assert {"python", "librdkafka", "wrack"} <= set(test["versions"]) and "rev" in test["git"]
        res = json.loads((run / "results.json").read_text())
        assert res["valid"] is True and res["policy"]["name"] == "strict" and res["history"]["ok"] > 500
        for n in ("n1", "n2", "n3"):
            assert "standin broker" in (run / "nodes" / n / "broker.log").read_text()
            assert (run / "nodes" / n / "server.properties").is_file()
        nem = [e for e in read_events(run / "history.jsonl") if e["process"] == "nemesis"]
        wins = fault_windows(nem)
        assert wins and all(w.stop is not None for w in wins)  # every fault healed
        assert (run / "report.html").stat().st_size > 10_000 and list((run / "plots").glob("*.png"))
    finally:
        force_down(run)  # no-op when the runner removed it (it should have)
    from clusters import local

    assert test["cluster"]["name"] not in local.names()


def test_bad_options_exit_254(tmp_path):
    for args in (["--acks", "2"], ["--rf", "9"], ["--min-isr", "4"], ["--nemesis", "flood"], ["--concurrency", "x"],
                 ["--workload", "nope"], ["--safeguard-off", "no-such-safeguard"], ["--time-limit", "0"],
                 ["--idempotence", "--acks", "1"], ["--idempotence", "--acks", "mixed"],
                 ["--idempotence", "--client", "kafka-python"]):
        p = wrack("test", *args, "--results", str(tmp_path), "--quiet")
        assert p.returncode == 254, (args, p.stderr)
        assert "Traceback" not in p.stderr and p.stderr.strip().startswith("wrack: error:")
    assert not any(tmp_path.iterdir())  # nothing was created


@needs_local
def test_sigkilled_harness_leaves_a_checkable_history(tmp_path):
    with sigkilled_run(tmp_path, "--workload", "noop", "--nodes", "3", "--nemesis", "partition",
                       "--nemesis-interval", "0.5", "--time-limit", "60", "--rate", "500", "--broker-command", STANDIN,
                       min_history=50_000, timeout=60) as run:
        # make the tail torn, as a kill in the middle of a write would
        with open(run / "history.jsonl", "ab") as f:
            f.write(b'{"index": 99999999, "time": 1, "process": 0, "ty')
        assert json.loads((run / "test.json").read_text())["end"] is None
        assert not (run / "results.json").exists()
        p = wrack("analyze", str(run), "--json", check=0)
        line = json.loads(p.stdout)
        assert line["verdict"] == "valid" and line["history"]["dropped_lines"] == 1
        res = json.loads((run / "results.json").read_text())
        assert res["incomplete_run"] is True and (run / "report.html").is_file()


CAMPAIGN = """
name: tiny
repeats: 1
defaults:
  workload: noop
  nodes: 2
  rf: 2
  min_isr: 1
  time_limit: 1.5
  rate: 200
  nemesis_interval: 0.5
  broker_command: {broker}
matrix:
  nemesis: [[partition], [kill]]
cells:
  - {{nemesis: [], expect: any}}
"""


@needs_local
def test_campaign_matrix_junit_and_baseline(tmp_path):
    f = tmp_path / "tiny.yaml"
    f.write_text(CAMPAIGN.format(broker=json.dumps(STANDIN.split())))
    out = tmp_path / "out"
    p = wrack("campaign", str(f), "--out", str(out), "--quiet", check=0)
    assert "3/3 cells passed" in p.stdout
    first = sorted(out.glob("tiny/2*"))[0]
    res = json.loads((first / "results.json").read_text())
    assert [c["verdict"] for c in res["cells"]] == ["valid", "valid", "valid"]
    runs = [first / r["path"] for c in res["cells"] for r in c["runs"]]
    assert all((r / "report.html").is_file() and str(r).startswith(str(first / "runs")) for r in runs)
    camp = json.loads((runs[0] / "test.json").read_text())["campaign"]
    assert camp["name"] == "tiny" and camp["repeat"] == 0
    suite = ET.parse(first / "junit.xml").getroot()
    assert suite.get("tests") == "3" and suite.get("failures") == "0" and suite.get("errors") == "0"
    assert "summary.html" in p.stdout and "valid" in (first / "summary.html").read_text()
    # the same campaign with a broker that does not start: every cell regresses
    f.write_text(CAMPAIGN.format(broker=json.dumps(["/bin/false"])))
    p = wrack("campaign", str(f), "--out", str(out), "--quiet", "--baseline", str(first), check=1)
    assert "REGRESSION" in p.stdout
    second = sorted(out.glob("tiny/2*"))[-1]
    res2 = json.loads((second / "results.json").read_text())
    assert len(res2["regressions"]) == 3 and all(c["regression"] for c in res2["cells"])
    suite = ET.parse(second / "junit.xml").getroot()
    assert int(suite.get("failures")) + int(suite.get("errors")) == 3
    assert "regression" in suite.find("testcase/*").get("message")


def test_campaign_file_errors(tmp_path):
    from contracts.errors import InputError
    from harness.campaign import load_spec

    cases = {"a: [": "bad YAML", "- 1": "mapping", "matrix: {acks: all}": "non-empty list",
             "defaults: {bogus: 1}": "unknown option", "cells: [{acks: all, expect: maybe}]": "expect",
             "repeats: 0": "repeats", "matrix: {acks: [all]}\ncells: [{acks: all}]": "twice"}
    for text, msg in cases.items():
        f = tmp_path / "c.yaml"
        f.write_text(text)
        with pytest.raises(InputError, match=msg):
            load_spec(f)
    p = wrack("campaign", str(tmp_path / "missing.yaml"))
    assert p.returncode == 254 and "cannot read" in p.stderr


def test_shipped_campaigns_load():
    from harness.campaign import cell_test_options, load_spec
    from harness.runner import validate

    for name in ("smoke", "regression"):
        spec = load_spec(ROOT / "campaigns" / f"{name}.yaml")
        assert spec.cells and spec.name == name
        for cell in spec.cells:  # every cell's options are valid test options
            validate(cell_test_options(spec, cell, ROOT / "results", {}))
