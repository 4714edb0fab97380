"""A new system under test is its own folder and one registry line (docs/ARCHITECTURE.md
"Protocols"): the stand-in system of tests/suites/standin_kv runs through the real harness
(runner, analysis, the one verdict, report) on a local cluster, with nothing else changed.

On one node the store is linearizable (valid); on three, with no replication, a client of one
node never sees another node's writes, and the run must be invalid."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

import suites
from clusters import local
from clusters.testing import can_run_local
from harness import runner
from harness.options import TestOptions

FOLDER = Path(__file__).with_name("standin_kv")
ALLOWED_FLOORS = {"contracts", "broker", "clusters", "nemesis", "workloads", "checkers", "suites"}


@pytest.fixture
def standin(monkeypatch):
    monkeypatch.setitem(suites.SYSTEMS, "standin", "tests.suites.standin_kv")  # the one registry line
    return suites.get("standin")


def test_the_folder_uses_only_the_floors_below_and_no_other_system():
    for f in FOLDER.glob("*.py"):
        for node in ast.walk(ast.parse(f.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            for n in names:
                top = n.split(".")[0]
                assert top not in {"harness", "pipeline"}, f"{f.name} imports {n}"
                if top == "suites":
                    assert n in ("suites", "suites.base"), f"{f.name} imports another system: {n}"


def test_it_is_listed_and_refuses_what_it_does_not_take(standin, tmp_path):
    assert standin.name == "standin" and list(standin.workloads) == ["register"]
    with pytest.raises(Exception, match="--min-isr: not an option of --db standin"):
        runner.validate(TestOptions(db="standin", min_isr=1, results=str(tmp_path)))
    with pytest.raises(Exception, match="unknown nemesis lrs for --db standin"):
        runner.validate(TestOptions(db="standin", nemesis=["lrs"], results=str(tmp_path)))


needs_local = pytest.mark.skipif(not can_run_local(), reason="needs root and network namespaces")


def run(tmp_path: Path, nodes: int, nemesis: list[str]) -> runner.RunOutcome:
    """One run on a local cluster, taken down afterwards whatever happened (the runner should have)."""
    o = TestOptions(db="standin", nodes=nodes, nemesis=nemesis, time_limit=6, nemesis_interval=2, rate=300,
                    concurrency="4", recovery_time_limit=10, final_time_limit=2, results=str(tmp_path), seed=7)
    out = runner.run_test(o)
    name = json.loads((out.run_dir / "test.json").read_text())["cluster"]["name"]
    local.force_down(name)
    return out


@pytest.mark.root
@needs_local
def test_one_node_is_linearizable_under_pauses(standin, tmp_path):
    out = run(tmp_path, 1, ["pause"])
    res = json.loads((out.run_dir / "results.json").read_text())
    assert out.exit_code == 0 and res["valid"] is True, res
    assert res["checker"] == "linearizable" and res["policy"]["name"] == "strict"
    test = json.loads((out.run_dir / "test.json").read_text())
    assert test["options"]["db"] == "standin" and sum(n for k, n in test["ops"].items() if k.endswith(":ok")) > 300
    assert (out.run_dir / "report.html").is_file() and (out.run_dir / "nodes" / "n1").is_dir()


@pytest.mark.root
@needs_local
def test_three_unreplicated_nodes_are_caught(standin, tmp_path):
    out = run(tmp_path, 3, [])
    res = json.loads((out.run_dir / "results.json").read_text())
    assert out.exit_code == 1 and res["valid"] is False and res["anomaly_types"] == ["nonlinearizable"], res
    assert res["bad_anomaly_types"] == ["nonlinearizable"]
