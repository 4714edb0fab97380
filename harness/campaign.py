"""Campaigns: a matrix of test options x repeats, one folder with every run and a summary.

Campaign file (YAML)::

    name: smoke
    description: what it is for
    repeats: 2                       # runs per cell (default 1)
    defaults: {nodes: 3, time_limit: 20}       # options of every cell (harness/options.py:
                                               # field or flag names, `-` or `_`)
    matrix:                          # the cross product of these lists
      acks: [all, "1"]
      nemesis: [[partition], [kill, partition]]
    cells:                           # extra cells, each a dict of options
      - {acks: "1", nemesis: [kill-leader], expect: any}

A cell's `expect` says what each of its runs must show (`run_meets`); the cell passes when
every run does:

- `valid` (default) / `invalid`: the run's verdict is exactly that;
- `found`: the run's checker found at least one anomaly (`anomaly_types` non-empty),
  whether or not the expected-anomaly policy allowed it, so the verdict may be valid,
  invalid or unknown; a crashed run has found nothing. This is for configurations whose
  loss the policy allows (acks=1, min ISR 1, unclean election on): the test must still
  see the loss;
- `any`: the run completed and was checked (verdict valid or invalid).

A cell's key is its options beyond the defaults, canonical JSON: the same cell in two
campaigns has the same key even when the defaults changed, which is what `--baseline`
compares.

Output: `campaign-results/<name>/<timestamp>/` with campaign.json (the file as run and its
cells), runs/<test-name>/<timestamp>/ (run folders), results.json, summary.html and
junit.xml. `compare(results, baseline)` marks a regression for every cell that was valid
in the baseline (every run valid) and has a run that is now invalid or unknown.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape as xml_escape
from xml.sax.saxutils import quoteattr

import yaml

from contracts import store
from contracts.errors import InputError
from harness.options import SPEC
from harness.runner import TestOptions, run_test, validate

DEFAULT_ROOT = "campaign-results"
EXPECT = ("valid", "invalid", "found", "any")


@dataclass
class Cell:
    options: dict[str, Any]  # the cell's own options (beyond the defaults)
    expect: str = "valid"

    @property
    def key(self) -> str:
        return json.dumps(self.options, sort_keys=True, separators=(",", ":"), default=str)

    def label(self) -> str:
        return " ".join(f"{k}={_show(v)}" for k, v in sorted(self.options.items())) or "defaults"


@dataclass
class CampaignSpec:
    name: str
    defaults: dict[str, Any]
    cells: list[Cell]
    repeats: int = 1
    description: str = ""
    raw: dict[str, Any] = field(default_factory=dict)
    path: str = ""


def _show(v: Any) -> str:
    if isinstance(v, list):
        return ",".join(str(x) for x in v) or "none"
    return str(v)


def load_spec(path: str | os.PathLike[str]) -> CampaignSpec:
    """Read and validate a campaign file (InputError naming the file and what is wrong)."""
    p = str(path)
    try:
        with open(p) as f:
            raw = yaml.safe_load(f)
    except OSError as e:
        raise InputError(f"cannot read campaign file: {e.strerror}", p) from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        raise InputError(f"bad YAML: {getattr(e, 'problem', e)}", p, mark.line + 1 if mark else None) from None
    if not isinstance(raw, dict):
        raise InputError("a campaign file is a YAML mapping", p)
    name = raw.get("name") or Path(p).stem
    repeats = raw.get("repeats", 1)
    if not isinstance(repeats, int) or repeats < 1:
        raise InputError(f"repeats must be a positive integer, not {repeats!r}", p)
    defaults = SPEC.from_mapping(raw.get("defaults") or {}, f"{p}: defaults")
    cells: list[Cell] = []
    matrix = raw.get("matrix") or {}
    if not isinstance(matrix, dict):
        raise InputError("matrix must be a mapping of option -> list of values", p)
    if matrix:
        keys = list(matrix)
        values = []
        for k in keys:
            v = matrix[k]
            if not isinstance(v, list) or not v:
                raise InputError(f"matrix: {k} must be a non-empty list", p)
            values.append(v)
        for combo in itertools.product(*values):
            cells.append(Cell(SPEC.from_mapping(dict(zip(keys, combo, strict=True)), f"{p}: matrix")))
    for i, c in enumerate(raw.get("cells") or []):
        if not isinstance(c, dict):
            raise InputError(f"cells[{i}] must be a mapping", p)
        c = dict(c)
        expect = str(c.pop("expect", "valid"))
        if expect not in EXPECT:
            raise InputError(f"cells[{i}]: unknown expect {expect!r} (one of {', '.join(EXPECT)})", p,
                             _cell_line(p, i))
        cells.append(Cell(SPEC.from_mapping(c, f"{p}: cells[{i}]"), expect))
    if not cells:
        cells = [Cell({})]
    seen: set[str] = set()
    for c in cells:
        if c.key in seen:
            raise InputError(f"cell {c.label()} appears twice", p)
        seen.add(c.key)
    return CampaignSpec(str(name), defaults, cells, repeats, str(raw.get("description") or ""), raw, p)


def _cell_line(path: str, i: int) -> int | None:
    """The line of `cells[i]` in a campaign file (None if it cannot be told)."""
    try:
        with open(path) as f:
            root = yaml.compose(f)
        cells = next(v for k, v in root.value if k.value == "cells")
        return cells.value[i].start_mark.line + 1
    except (OSError, yaml.YAMLError, AttributeError, StopIteration, IndexError, TypeError):
        return None


def cell_test_options(spec: CampaignSpec, cell: Cell, runs_root: Path, overrides: Mapping[str, Any]) -> Any:
    opts = {**spec.defaults, **cell.options, **overrides, "results": str(runs_root)}
    return TestOptions(**opts)


def verdict_of(valid: Any, crashed: bool = False) -> str:
    if crashed:
        return "crashed"
    return {True: "valid", False: "invalid"}.get(valid, "unknown") if valid is not None else "crashed"


def run_meets(expect: str, run: Mapping[str, Any]) -> bool:
    """Does one run (`verdict`, `anomaly_types`) meet the expectation (module docstring)?"""
    verdict = run["verdict"]
    if expect == "any":
        return verdict in ("valid", "invalid")
    if expect == "found":
        return bool(run.get("anomaly_types"))
    return verdict == expect


def cell_passes(expect: str, runs: Sequence[Mapping[str, Any]]) -> bool:
    return all(run_meets(expect, r) for r in runs)


def detection(expect: str, runs: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """How many of a cell's runs met its expectation (for a bug's cell: found it), of how many."""
    return {"met": sum(run_meets(expect, r) for r in runs), "runs": len(runs)}


@dataclass
class Opened:
    """One execution of a campaign: its folder, where its runs go and when it began."""

    cdir: Path
    runs_root: Path
    start: dt.datetime


def check_cells(spec: CampaignSpec, overrides: Mapping[str, Any] | None) -> None:
    """Every cell's options are checked before anything runs (InputError naming the cell)."""
    for cell in spec.cells:
        try:
            validate(cell_test_options(spec, cell, Path("."), overrides or {}))
        except InputError as e:
            raise InputError(f"cell {cell.label()}: {e.message}", spec.path or None) from None


def open_campaign(spec: CampaignSpec, root: str | os.PathLike[str] | None,
                  overrides: Mapping[str, Any] | None, extra: Mapping[str, Any] | None = None) -> Opened:
    """Make the campaign folder (a new timestamp below `root/<name>/`) and its campaign.json."""
    start = dt.datetime.now(dt.UTC)
    base = Path(root or os.environ.get("WRACK_CAMPAIGN_RESULTS") or DEFAULT_ROOT) / store.safe_name(spec.name)
    base.mkdir(parents=True, exist_ok=True)
    cdir = base / store.timestamp(start)
    while cdir.exists():
        start += dt.timedelta(milliseconds=1)
        cdir = base / store.timestamp(start)
    cdir.mkdir()
    store.update_latest(cdir)
    store.write_json(cdir / "campaign.json", {
        "name": spec.name, "file": spec.path, "description": spec.description, "spec": spec.raw,
        "defaults": spec.defaults, "repeats": spec.repeats, "overrides": dict(overrides or {}),
        "cells": [{"key": c.key, "options": c.options, "expect": c.expect} for c in spec.cells], **(extra or {})})
    return Opened(cdir, cdir / "runs", start)


def campaign_record(spec: CampaignSpec, cell: Cell, rep: int, opened: Opened) -> dict[str, Any]:
    """What a run records of its campaign (test.json's `campaign`; the pipeline's `campaign_*`
    columns): name, cell options and key, repeat, expectation, and `run` = the campaign
    folder's timestamp (one execution of the campaign)."""
    return {"name": spec.name, "cell": cell.options, "key": cell.key, "repeat": rep, "expect": cell.expect,
            "run": opened.cdir.name}


def run_record(out: Any, opened: Opened, rep: int, wall: float) -> dict[str, Any]:
    """One run's entry in results.json from its RunOutcome (run_dir, results, exit_code, error)."""
    res = out.results or {}
    return {"repeat": rep, "run_id": store.run_id(Path(out.run_dir)), "path": os.path.relpath(out.run_dir, opened.cdir),
            "valid": out.valid, "verdict": verdict_of(out.valid, out.results is None),
            "anomaly_types": list(res.get("anomaly_types") or []), "allowed": list(res.get("allowed") or []),
            "first_anomaly_time": res.get("first_anomaly_time"),
            "first_bad_anomaly_time": res.get("first_bad_anomaly_time"), "wall_s": wall,
            "exit_code": out.exit_code, "error": out.error, "seed": _seed_of(out.run_dir)}


def cell_record(cell: Cell, runs: list[dict[str, Any]]) -> dict[str, Any]:
    """A cell's entry in results.json from its runs' entries."""
    out = {"key": cell.key, "label": cell.label(), "options": cell.options, "expect": cell.expect,
           "runs": runs, "verdict": _worst([r["verdict"] for r in runs]), "passed": cell_passes(cell.expect, runs),
           "detection": detection(cell.expect, runs)}
    if any(r.get("retried") for r in runs):
        out["retried"] = sum(bool(r.get("retried")) for r in runs)
    return out


def finish_campaign(spec: CampaignSpec, opened: Opened, cells_out: list[dict[str, Any]],
                    baseline: Mapping[str, Any] | None, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """results.json, junit.xml and summary.html of a campaign whose runs are done."""
    results = {"name": spec.name, "start": opened.start.isoformat(timespec="seconds"),
               "end": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), **(extra or {}), "cells": cells_out}
    if baseline is not None:
        compare(results, baseline)
    results["summary"] = summary_counts(results)
    store.write_json(opened.cdir / "results.json", results)
    (opened.cdir / "junit.xml").write_text(junit_xml(results))
    (opened.cdir / "summary.html").write_text(summary_html(results))
    return results


def run_campaign(spec: CampaignSpec, *, root: str | os.PathLike[str] | None = None,
                 overrides: Mapping[str, Any] | None = None, baseline: Mapping[str, Any] | None = None,
                 runner: Callable[..., Any] | None = None,
                 on_run: Callable[[Cell, int, Any], None] | None = None) -> tuple[Path, dict[str, Any]]:
    """Run every cell `repeats` times, one after another in this process; write the campaign
    folder; return (folder, results). (harness/spark_campaign.py runs them as Spark tasks.)
    A run interrupted (Ctrl-C, SIGTERM: its cluster torn down by the runner's guard) ends the
    campaign: the folder is written with the runs done, then KeyboardInterrupt is raised."""
    runner = runner or run_test
    check_cells(spec, overrides)
    opened = open_campaign(spec, root, overrides)
    cells_out = []
    interrupted = False
    for cell in spec.cells:
        runs = []
        for rep in range(spec.repeats):
            o = cell_test_options(spec, cell, opened.runs_root, overrides or {})
            t0 = time.monotonic()
            out = runner(o, campaign=campaign_record(spec, cell, rep, opened))
            runs.append(run_record(out, opened, rep, round(time.monotonic() - t0, 3)))
            if on_run is not None:
                on_run(cell, rep, out)
            if interrupted := getattr(out, "error", None) == "interrupted":
                break
        cells_out.append(cell_record(cell, runs))
        if interrupted:
            break
    results = finish_campaign(spec, opened, cells_out, baseline)
    if interrupted:
        raise KeyboardInterrupt(f"campaign interrupted; {opened.cdir} has the runs done")
    return opened.cdir, results


def _seed_of(run_dir: Any) -> Any:
    t = store.read_json(Path(run_dir) / "test.json") or {}
    return t.get("seed")


def _worst(verdicts: list[str]) -> str:
    for v in ("invalid", "crashed", "unknown"):
        if v in verdicts:
            return v
    return "valid" if verdicts else "unknown"


def load_baseline(arg: str | os.PathLike[str]) -> dict[str, Any]:
    """A baseline campaign's results: its folder (or `latest` link) or its results.json."""
    p = Path(arg)
    if p.is_dir():
        if (p / "results.json").is_file():
            p = p / "results.json"
        elif (p / store.LATEST / "results.json").is_file():
            p = p / store.LATEST / "results.json"
    res = store.read_json(p)
    if not isinstance(res, dict) or not isinstance(res.get("cells"), list):
        raise InputError("not a campaign folder or campaign results.json", str(arg))
    res["_path"] = str(p)
    return res


def compare(results: dict[str, Any], baseline: Mapping[str, Any]) -> list[str]:
    """Mark regressions in `results` (in place) against `baseline`; returns the regressed keys."""
    before = {c["key"]: c for c in baseline.get("cells", [])}
    regressed = []
    for c in results["cells"]:
        old = before.get(c["key"])
        c["baseline_verdict"] = old["verdict"] if old else None
        c["baseline_detection"] = detection(c["expect"], old["runs"]) if old else None
        was_valid = bool(old) and all(r["verdict"] == "valid" for r in old["runs"])
        now_bad = any(r["verdict"] in ("invalid", "unknown", "crashed") for r in c["runs"])
        c["regression"] = was_valid and now_bad
        if c["regression"]:
            regressed.append(c["key"])
    results["baseline"] = baseline.get("_path") or baseline.get("name")
    results["regressions"] = regressed
    return regressed


def summary_counts(results: Mapping[str, Any]) -> dict[str, int]:
    cells = results["cells"]
    runs = [r for c in cells for r in c["runs"]]
    out = {"cells": len(cells), "runs": len(runs), "cells_passed": sum(c["passed"] for c in cells),
           "regressions": sum(bool(c.get("regression")) for c in cells)}
    for v in ("valid", "invalid", "unknown", "crashed"):
        out[v] = sum(r["verdict"] == v for r in runs)
    return out


def exit_code(results: Mapping[str, Any]) -> int:
    """1 on any regression (with a baseline) or any checked run (valid or invalid) that missed
    its cell's expectation; 2 if cells failed only through unknown/crashed runs; 0 otherwise."""
    if results.get("regressions"):
        return 1
    missed = [r for c in results["cells"] for r in c["runs"] if not run_meets(c["expect"], r)]
    if any(r["verdict"] in ("valid", "invalid") for r in missed):
        return 1
    return 2 if missed else 0


def junit_xml(results: Mapping[str, Any]) -> str:
    """JUnit XML: one testsuite, one testcase per run (classname = the cell)."""
    cases = []
    n_fail = n_err = 0
    for c in results["cells"]:
        for r in c["runs"]:
            name = f"repeat {r['repeat']} ({r['run_id']})"
            body = ""
            bad = not run_meets(c["expect"], r) or (bool(c.get("regression")) and r["verdict"] != "valid")
            if bad:
                msg = f"{r['verdict']}" + (f": {', '.join(r['anomaly_types'])}" if r["anomaly_types"] else "")
                if not run_meets(c["expect"], r):
                    msg += f" (expected {c['expect']})"
                if c.get("regression"):
                    msg = f"regression (baseline {c.get('baseline_verdict')}): " + msg
                detail = (f"report: {r['path']}/report.html" if r.get("path") else "no run folder") + (
                    f"\nerror: {r['error']}" if r.get("error") else "")
                if r["verdict"] == "crashed":
                    n_err += 1
                    body = f"<error message={quoteattr(msg)}>{xml_escape(detail)}</error>"
                else:
                    n_fail += 1
                    body = f"<failure message={quoteattr(msg)}>{xml_escape(detail)}</failure>"
            if r.get("retried"):  # a retry after its executor was lost (Spark campaigns)
                body += f"<system-out>retried: attempt {(r.get('attempt') or 0) + 1}, the first one's executor was lost</system-out>"
            cases.append(f'  <testcase classname={quoteattr(c["label"])} name={quoteattr(name)}>{body}</testcase>')
    n = len(cases)
    head = (f'<?xml version="1.0" encoding="UTF-8"?>\n<testsuite name={quoteattr("wrack campaign " + results["name"])} '
            f'tests="{n}" failures="{n_fail}" errors="{n_err}" timestamp={quoteattr(results.get("start", ""))}>')
    return "\n".join([head, *cases, "</testsuite>", ""])


def summary_html(results: Mapping[str, Any]) -> str:
    """The campaign's summary page: a matrix of verdicts with links to each run's report."""
    # lazy: jinja2 takes ~50 ms; only the summary page needs it (not `wrack campaign --list`)
    import jinja2

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(Path(__file__).parent / "templates")),
                             autoescape=True)
    return env.get_template("campaign.html.j2").render(r=results, summary=summary_counts(results))
