"""Campaign expectations (`expect: found` among them), the shipped bug zoo and regression
campaigns against the safeguard registry, `--unclean-election`, and bad input on the CLI
(unknown safeguard, nemesis, campaign expectation: one line on stderr, exit 254)."""

from __future__ import annotations

import json
import subprocess
import xml.etree.ElementTree as ET

import pytest
from harness_testlib import ROOT, STANDIN, wrack_bin

from broker.core.safeguards import REGISTRY
from clusters.testing import can_run_local
from contracts.errors import InputError
from harness import campaign as C
from harness import runner


def run(verdict: str, types: list[str] = ()) -> dict:
    return {"repeat": 0, "run_id": "r", "path": "runs/r", "verdict": verdict, "anomaly_types": list(types),
            "allowed": [], "error": None}


LOSS = ["lost-write"]


@pytest.mark.parametrize("expect,r,meets", [
    ("valid", run("valid"), True), ("valid", run("valid", LOSS), True), ("valid", run("invalid", LOSS), False),
    ("valid", run("unknown"), False), ("invalid", run("invalid", LOSS), True), ("invalid", run("valid"), False),
    ("invalid", run("valid", LOSS), False), ("invalid", run("crashed"), False),
    ("found", run("valid", LOSS), True),  # allowed by the policy, but found
    ("found", run("invalid", LOSS), True), ("found", run("unknown", LOSS), True),
    ("found", run("valid"), False), ("found", run("invalid"), False), ("found", run("crashed"), False),
    ("any", run("valid"), True), ("any", run("invalid", LOSS), True), ("any", run("unknown"), False),
    ("any", run("crashed"), False),
])
def test_run_meets(expect, r, meets):
    assert C.run_meets(expect, r) is meets
    assert C.cell_passes(expect, [r]) is meets
    assert C.cell_passes(expect, [r, run("valid", LOSS)]) is (meets and C.run_meets(expect, run("valid", LOSS)))


def results_of(*cells: tuple[str, list[dict]]) -> dict:
    out = [{"key": str(i), "label": f"cell{i}", "expect": e, "runs": rs, "passed": C.cell_passes(e, rs),
            "verdict": "valid"} for i, (e, rs) in enumerate(cells)]
    return {"name": "t", "start": "", "cells": out}


def test_exit_code_and_junit_for_found_cells():
    ok = results_of(("found", [run("valid", LOSS)]), ("invalid", [run("invalid", LOSS)]), ("valid", [run("valid")]))
    assert C.exit_code(ok) == 0
    suite = ET.fromstring(C.junit_xml(ok))
    assert suite.get("tests") == "3" and suite.get("failures") == "0" and suite.get("errors") == "0"
    missed = results_of(("found", [run("valid")]), ("valid", [run("valid")]))
    assert C.exit_code(missed) == 1  # a checked run that missed its expectation
    case = ET.fromstring(C.junit_xml(missed)).find("testcase/failure")
    assert case is not None and case.get("message") == "valid (expected found)"
    bug_missed = results_of(("invalid", [run("valid")]))
    assert C.exit_code(bug_missed) == 1
    assert ET.fromstring(C.junit_xml(bug_missed)).get("failures") == "1"
    crashed = results_of(("found", [run("crashed")]), ("valid", [run("valid")]))
    assert C.exit_code(crashed) == 2
    assert ET.fromstring(C.junit_xml(crashed)).get("errors") == "1"
    assert C.summary_html(ok).count("passed") >= 3


def test_unknown_expectation_names_file_line_and_cell(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("name: c\ncells:\n  - {acks: all}\n  - {acks: \"1\", expect: lost}\n")
    with pytest.raises(InputError) as e:
        C.load_spec(f)
    assert e.value.path == str(f) and e.value.line == 4
    assert "cells[1]" in e.value.message and "'lost'" in e.value.message and "found" in e.value.message


def spec_cells(name: str) -> tuple[C.CampaignSpec, list[C.Cell]]:
    spec = C.load_spec(ROOT / "campaigns" / f"{name}.yaml")
    for cell in spec.cells:  # every cell's options are valid test options
        runner.validate(C.cell_test_options(spec, cell, ROOT / "results", {}))
    return spec, spec.cells


def options(spec: C.CampaignSpec, cell: C.Cell) -> runner.TestOptions:
    return C.cell_test_options(spec, cell, ROOT / "results", {})


def lossy(o: runner.TestOptions) -> bool:
    """A configuration whose loss the policy allows."""
    return o.acks != "all" or o.min_isr < 2 or o.unclean_election


@pytest.mark.parametrize("name", ["bugzoo", "regression"])
def test_every_safeguard_has_an_invalid_cell_and_lossy_cells_expect_found(name):
    spec, cells = spec_cells(name)
    off = {}
    for cell in cells:
        o = options(spec, cell)
        if o.safeguards_off:
            assert cell.expect == "invalid", cell.label()
            if len(o.safeguards_off) == 1:
                off.setdefault(o.safeguards_off[0], cell)  # the safeguard's first cell
        elif lossy(o):
            assert cell.expect == "found", cell.label()
        else:
            assert cell.expect == "valid", cell.label()
    assert sorted(off) == sorted(REGISTRY)  # a cell per safeguard, alone
    for n, cell in off.items():  # the replication safeguards' under the default faults and
        pinned = set(cell.options) - {"safeguards_off"}  # workload, transactions' with txn ops
        assert not pinned if REGISTRY[n].simulated else options(spec, cell).txn_p > 0, cell.label()
    assert all(c.expect != "any" for c in cells)


def test_bugzoo_uses_default_options():
    spec, cells = spec_cells("bugzoo")
    d = runner.TestOptions()
    assert set(spec.defaults) <= {"backend", "workload"}
    assert options(spec, C.Cell({})).nemesis == d.nemesis and options(spec, C.Cell({})).time_limit == d.time_limit
    safe = [c for c in cells if not c.options]
    assert [c.expect for c in safe] == ["valid"]
    lossy_cells = [options(spec, c) for c in cells if c.expect == "found"]
    assert any(o.acks == "1" for o in lossy_cells) and any(o.min_isr == 1 for o in lossy_cells)
    assert any(o.unclean_election for o in lossy_cells)

    def pins(c: C.Cell) -> tuple:
        return tuple(sorted((k, str(v)) for k, v in c.options.items() if k != "safeguards_off"))

    pinned = {pins(c) for c in cells if c.options.get("safeguards_off") and pins(c)}
    safe_pinned = {pins(c) for c in cells if c.expect == "valid"}
    assert pinned <= safe_pinned  # every fault mix (or workload option) a bug cell pins has a safe twin


def test_unclean_election_option():
    from suites.wrack.rules import choose
    from suites.wrack.suite import broker_options

    o = runner.TestOptions(unclean_election=True)
    assert broker_options(o).extra["unclean.leader.election.enable"] == "true"
    assert broker_options(runner.TestOptions()).extra["unclean.leader.election.enable"] == "false"
    assert runner.test_name(o).endswith("-unclean")
    p = choose({"workload": "queue", "unclean_election": True})
    assert p.names == ["unclean-election"] and "nonmonotonic-poll" in p.allowed and p.reasons
    assert choose({"workload": "log", "unclean_election": True}).allowed == ["nonlinearizable", "replica-divergence"]
    assert choose({"workload": "queue", "safeguards_off": ["clean-election-only"]}).allowed == []


def wrack(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([wrack_bin(), *args], capture_output=True, text=True, timeout=timeout)


def assert_one_line_254(p: subprocess.CompletedProcess, *words: str) -> str:
    lines = p.stderr.splitlines()
    assert p.returncode == 254, (p.returncode, p.stderr)
    assert len(lines) == 1 and lines[0].startswith("wrack: error:"), p.stderr
    for w in words:
        assert w in lines[0], (w, lines[0])
    return lines[0]


def test_bad_input_one_line_254(tmp_path):
    res = tmp_path / "runs"
    assert_one_line_254(wrack("test", "--safeguard-off", "nope", "--results", str(res), "--quiet"),
                        "--safeguard-off", "nope", "epoch-truncation")
    assert_one_line_254(wrack("test", "--nemesis", "nope", "--results", str(res), "--quiet"), "--nemesis", "nope")
    assert_one_line_254(wrack("test", "--unclean-election", "--nemesis", "kill,nope", "--results", str(res)),
                        "nope")
    f = tmp_path / "c.yaml"
    f.write_text("name: c\ncells:\n  - {acks: all, expect: sometimes}\n")
    assert_one_line_254(wrack("campaign", str(f), "--out", str(tmp_path / "out")), f"{f}:3:", "cells[0]", "sometimes")
    f.write_text("name: c\ncells:\n  - {safeguards_off: [nope], expect: invalid}\n")
    assert_one_line_254(wrack("campaign", str(f), "--out", str(tmp_path / "out")), str(f), "nope")
    f.write_text("name: c\ncells:\n  - {nemesis: [kill, nope], expect: valid}\n")
    assert_one_line_254(wrack("campaign", str(f), "--out", str(tmp_path / "out")), str(f), "nope")
    assert not res.exists() and not (tmp_path / "out").exists()  # nothing was created


FOUND_CAMPAIGN = """
name: found
defaults: {{workload: noop, nodes: 2, rf: 2, min_isr: 1, time_limit: 1.5, rate: 200, nemesis: [],
            broker_command: {broker}}}
cells:
  - {{expect: found}}
  - {{acks: "1", expect: valid}}
"""


@pytest.mark.root
@pytest.mark.skipif(not can_run_local(), reason="needs root and network namespaces")
def test_found_cell_that_finds_nothing_fails_the_campaign(tmp_path):
    """A real campaign (local cluster, stand-in broker): the no-op workload finds nothing, so
    its `expect: found` cell fails and the campaign exits 1; results.json carries the runs'
    first_anomaly_time (none) and wall time."""
    f = tmp_path / "found.yaml"
    f.write_text(FOUND_CAMPAIGN.format(broker=json.dumps(STANDIN.split())))
    p = wrack("campaign", str(f), "--out", str(tmp_path / "out"), "--quiet", timeout=300)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "1/2 cells passed" in p.stdout
    res = json.loads(next((tmp_path / "out").glob("found/2*/results.json")).read_text())
    found, safe = res["cells"]
    assert found["expect"] == "found" and not found["passed"] and safe["passed"]
    r = found["runs"][0]
    assert r["verdict"] == "valid" and r["anomaly_types"] == [] and r["first_anomaly_time"] is None
    assert r["wall_s"] > 1.5


def test_an_interrupted_run_ends_the_campaign(tmp_path):
    """Ctrl-C or SIGTERM during a run (the runner tears its cluster down and returns the run
    with error `interrupted`) ends a sequential campaign: no further run starts, the folder
    has the runs done, and KeyboardInterrupt reaches the caller (the CLI exits 130)."""
    from contracts import store

    f = tmp_path / "c.yaml"
    f.write_text("name: c\nrepeats: 3\ndefaults: {workload: noop, nemesis: []}\n"
                 "cells:\n  - {expect: valid}\n  - {acks: '1', expect: valid}\n")
    started = []

    def runner(o, campaign=None):
        started.append(campaign)
        run_dir = store.new_run(o.results, "noop")
        error = "interrupted" if len(started) == 2 else None
        return runner_outcome(run_dir, error)

    with pytest.raises(KeyboardInterrupt, match="campaign interrupted"):
        C.run_campaign(C.load_spec(f), root=tmp_path / "out", runner=runner)
    assert len(started) == 2
    res = json.loads(next((tmp_path / "out").glob("c/2*/results.json")).read_text())
    assert [len(c["runs"]) for c in res["cells"]] == [2]
    assert [r["error"] for r in res["cells"][0]["runs"]] == [None, "interrupted"]


def runner_outcome(run_dir, error):
    return runner.RunOutcome(run_dir, None if error else {"valid": True, "anomaly_types": []}, 2 if error else 0,
                             error)
