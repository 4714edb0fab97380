"""A campaign's runs in the pipeline's tables, and `wrack serve`'s campaign page over them: each
cell's detection rate per execution of the campaign and per git revision (harness/campaign_tables.py,
harness/serve_campaigns.py). Run folders are written by hand (test.json, results.json, a
history), as the runner writes them; no cluster, no Spark."""

from __future__ import annotations

import json
import threading
import urllib.request
from pathlib import Path

import pytest

from contracts.errors import InputError
from harness.campaign_tables import RunTables
from harness.serve import make_server
from harness.serve_campaigns import campaign_rates, campaigns_html, find_tables
from pipeline import store

HISTORY = [
    {"index": 0, "time": 1, "process": 0, "type": "invoke", "f": "send", "value": [["send", "k1", 1]]},
    {"index": 1, "time": 2, "process": 0, "type": "ok", "f": "send", "value": [["send", "k1", [0, 1]]]},
]


def write_run(root: Path, name: str, stamp: str, *, cell: dict, expect: str, execution: str, rev: str,
              valid: object, types: list[str] = (), attempt: int = 0) -> Path:
    d = root / name / stamp
    d.mkdir(parents=True)
    camp = {"name": "zoo", "cell": cell, "key": json.dumps(cell, sort_keys=True), "repeat": 0, "expect": expect,
            "run": execution, "attempt": attempt}
    (d / "test.json").write_text(json.dumps({
        "name": name, "run_id": f"{name}/{stamp}", "start": f"2026-11-{execution[6:8]}T{stamp[9:15]}", "end": None,
        "seed": 1, "options": {"workload": "queue", "nodes": 3}, "git": {"rev": rev, "dirty": False},
        "campaign": camp}))
    (d / "history.jsonl").write_text("".join(json.dumps(e) + "\n" for e in HISTORY))
    if valid != "crashed":
        (d / "results.json").write_text(json.dumps({"valid": valid, "anomaly_types": list(types)}))
    return d


def campaign_runs(root: Path) -> list[Path]:
    """Two executions (at two revisions) of two cells: a bug cell (invalid) and the safe one."""
    bug, safe = {"safeguards_off": ["elr"]}, {}
    runs = []
    for i, (execution, rev, bug_verdicts) in enumerate([("20261101T000000", "a" * 40, [False, True]),
                                                         ("20261102T000000", "b" * 40, [False, False])]):
        for j, v in enumerate(bug_verdicts):
            runs.append(write_run(root, "bug", f"2026110{i + 1}T00000{j}.000", cell=bug, expect="invalid",
                                  execution=execution, rev=rev, valid=v, types=["lost-write"] if v is False else []))
        runs.append(write_run(root, "safe", f"2026110{i + 1}T000009.000", cell=safe, expect="valid",
                              execution=execution, rev=rev, valid=True if i == 0 else "crashed", attempt=i))
    return runs


def test_runs_ingested_one_by_one_and_rates_per_execution_and_revision(tmp_path):
    runs = campaign_runs(tmp_path / "runs")
    tables = RunTables(tmp_path / "pq")
    tables.check()
    ids = [tables.add(r) for r in runs]
    assert all(ids) and tables.errors == []
    assert tables.add(runs[0]) is None  # already in the tables: skipped
    rows = store.read_table(str(tmp_path / "pq"), "runs").to_pylist()
    assert len(rows) == len(runs) and {r["campaign_expect"] for r in rows} == {"invalid", "valid"}
    assert sum(bool(r["campaign_retried"]) for r in rows) == 1
    assert len(store.parquet_files(str(tmp_path / "pq"), "ops")) == len(runs)  # each run's ops file

    dirs = find_tables([], [tmp_path / "pq"])
    [zoo] = campaign_rates(dirs)
    assert zoo["executions"] == ["20261101T000000", "20261102T000000"]
    assert zoo["revisions"] == ["a" * 10, "b" * 10]
    bug = next(c for c in zoo["cells"] if c["expect"] == "invalid")
    safe = next(c for c in zoo["cells"] if c["expect"] == "valid")
    assert [(p["met"], p["runs"]) for p in bug["executions"]] == [(1, 2), (2, 2)]
    assert [(p["met"], p["runs"]) for p in bug["revisions"]] == [(1, 2), (2, 2)]
    assert (bug["met"], bug["runs"]) == (3, 4) and bug["cell"] == "safeguards_off=elr"
    # the crashed run (no results.json) missed its expectation; it was a retry
    assert [(p["met"], p["runs"], p["retried"]) for p in safe["executions"]] == [(1, 1, 0), (0, 1, 1)]
    page = campaigns_html([zoo], dirs)
    assert "safeguards_off=elr" in page and "1/2" in page and "<svg" in page and "aaaaaaaaaa" in page


def test_serve_campaign_page_and_api(tmp_path):
    root = tmp_path / "campaign-results"
    runs = campaign_runs(root / "zoo")
    tables = RunTables(root / "_pipeline")  # where `wrack campaign` puts them by default
    for r in runs:
        tables.add(r)
    srv = make_server([root], port=0)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        base = f"http://127.0.0.1:{srv.server_address[1]}"
        data = json.loads(urllib.request.urlopen(base + "/api/campaigns", timeout=10).read())
        assert [c["campaign"] for c in data] == ["zoo"] and len(data[0]["cells"]) == 2
        page = urllib.request.urlopen(base + "/campaigns", timeout=10).read().decode()
        assert "Across git revisions" in page and "safeguards_off=elr" in page
        assert 'href="/campaigns"' in urllib.request.urlopen(base + "/", timeout=10).read().decode()
    finally:
        srv.shutdown()
        srv.server_close()


def test_tables_refuse_a_folder_that_is_not_a_pipeline_directory(tmp_path):
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "file").write_text("")
    with pytest.raises(InputError, match="not a pipeline directory"):
        RunTables(tmp_path / "x").check()
    RunTables(tmp_path / "new").check()  # absent: made at the first run
    assert not (tmp_path / "new").exists()
