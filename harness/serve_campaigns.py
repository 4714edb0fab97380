"""`wrack serve`'s campaign page: each cell's detection rate over time and across git
revisions, from the pipeline's tables (docs/pipeline.md).

Where: every pipeline directory given (`wrack serve --tables DIR`) and the `_pipeline/`
folder of each root (where `wrack campaign` ingests its runs: harness/campaign_tables.py).

What: the `runs` table's campaign runs (a run with a `campaign_expect`; runs ingested
before campaigns recorded it are counted apart, as `without_expect`), each judged by
`harness.campaign.run_meets` against its cell's expectation, with its verdict from its
latest `wrack pipeline check` (the `verdicts` table) if any, else from results.json (no
results: crashed). Per campaign and cell:

- `executions`: one point per execution of the campaign (`campaign_run`, the campaign
  folder's timestamp), in time order: runs that met the expectation, runs, the git revisions;
- `revisions`: one point per git revision (`git_rev`, `+` when the checkout was dirty), in
  the order of its first run.

`campaign_rates(dirs)` returns that as JSON-able dicts (`/api/campaigns`); `campaigns_html`
renders the page (`/campaigns`): per campaign a table of cells x executions and one of
cells x revisions, each entry `met/runs` shaded by the rate, and a line of the rate over
executions per cell (inline SVG; no script, no external resource).
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from harness.campaign import Cell, run_meets

VERDICT = {"true": "valid", "false": "invalid", "unknown": "unknown"}
RUN_COLUMNS = ["run_id", "start", "git_rev", "git_dirty", "campaign", "campaign_cell", "campaign_expect",
               "campaign_run", "campaign_retried", "has_results", "valid", "anomaly_types"]


def find_tables(roots: Iterable[str | Path], extra: Iterable[str | Path] = ()) -> list[Path]:
    """Pipeline directories: `extra` and each root's `_pipeline/` that holds a `runs` table."""
    out: list[Path] = []
    for d in [*extra, *(Path(r) / "_pipeline" for r in roots)]:
        p = Path(d).resolve()
        if (p / "runs").is_dir() and p not in out:
            out.append(p)
    return out


def _latest_verdicts(out: Path) -> dict[str, dict[str, Any]]:
    # lazy: pyarrow (pipeline.store) only when the campaign page is asked for
    from pipeline import store

    best: dict[str, dict[str, Any]] = {}
    rows = store.read_table(str(out), "verdicts", ["run_id", "valid", "anomaly_types", "checked_at", "check_id"])
    for row in rows.to_pylist():
        cur = best.get(row["run_id"])
        if cur is None or (row["checked_at"], row["check_id"]) > (cur["checked_at"], cur["check_id"]):
            best[row["run_id"]] = row
    return best


def _runs(dirs: Sequence[Path]) -> list[dict[str, Any]]:
    """Every campaign run of the tables, once per run id, with its verdict and whether it met."""
    # lazy: see _latest_verdicts
    from pipeline import store

    seen: dict[str, dict[str, Any]] = {}
    for d in dirs:
        checked = _latest_verdicts(d)
        for r in store.read_table(str(d), "runs", RUN_COLUMNS).to_pylist():
            if not r["campaign"] or r["run_id"] in seen:
                continue
            v = checked.get(r["run_id"])
            src = v if v is not None else r
            r["verdict"] = VERDICT.get(src["valid"] or "", "unknown") if r["has_results"] or v else "crashed"
            r["anomaly_types"] = list(src["anomaly_types"] or [])
            r["met"] = run_meets(r["campaign_expect"], r) if r["campaign_expect"] else None
            seen[r["run_id"]] = r
    return list(seen.values())


def _label(cell_json: str | None) -> str:
    try:
        opts = json.loads(cell_json or "{}")
    except ValueError:
        return str(cell_json)
    return Cell(opts if isinstance(opts, dict) else {}).label()


def _points(runs: list[dict[str, Any]], key: str) -> list[dict[str, Any]]:
    """Runs grouped by `key` (campaign_run or revision), in the order of each group's first run."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in sorted(runs, key=lambda r: r["start"] or ""):
        groups.setdefault(r[key], []).append(r)
    out = []
    for k, rs in groups.items():
        revs = sorted({r["rev"] for r in rs})
        out.append({key: k, "met": sum(bool(r["met"]) for r in rs), "runs": len(rs), "first": rs[0]["start"],
                    "revisions": revs, "retried": sum(bool(r["campaign_retried"]) for r in rs)})
    return out


def campaign_rates(dirs: Sequence[Path]) -> list[dict[str, Any]]:
    """Per campaign (by name) and cell: detection over executions and revisions (module docstring)."""
    runs = _runs(dirs)
    for r in runs:
        r["rev"] = ((r["git_rev"] or "?")[:10] + ("+" if r["git_dirty"] else "")) if r["git_rev"] else "?"
        r["campaign_run"] = r["campaign_run"] or (r["start"] or "?")[:10]
    out = []
    for name in sorted({r["campaign"] for r in runs}):
        mine = [r for r in runs if r["campaign"] == name]
        judged = [r for r in mine if r["met"] is not None]
        cells = []
        for key in sorted({r["campaign_cell"] for r in judged}, key=lambda k: _label(k)):
            rs = [r for r in judged if r["campaign_cell"] == key]
            cells.append({"cell": _label(key), "options": json.loads(key or "{}"),
                          "expect": rs[-1]["campaign_expect"],
                          "met": sum(bool(r["met"]) for r in rs), "runs": len(rs),
                          "executions": _points(rs, "campaign_run"), "revisions": _points(rs, "rev")})
        executions = [p["campaign_run"] for p in _points(judged, "campaign_run")]
        revisions = [p["rev"] for p in _points(judged, "rev")]
        out.append({"campaign": name, "runs": len(mine), "without_expect": len(mine) - len(judged),
                    "executions": executions, "revisions": revisions, "cells": cells})
    return out


def _shade(met: int, runs: int) -> str:
    if not runs:
        return "#f0f0f0"
    rate = met / runs
    return "#c8e6c9" if rate == 1 else "#ffcdd2" if rate == 0 else "#ffe0b2"


def _spark(points: list[dict[str, Any]], width: int = 160, height: int = 28) -> str:
    """The rate over executions as an inline SVG polyline (0 % at the bottom, 100 % at the top)."""
    if not points:
        return ""
    n = len(points)
    xy = [(4 + (width - 8) * (i / (n - 1) if n > 1 else 0.5), 4 + (height - 8) * (1 - p["met"] / p["runs"]))
          for i, p in enumerate(points)]
    pts = " ".join(f"{x:.1f},{y:.1f}" for x, y in xy)
    dots = "".join(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="2.5"/>' for x, y in xy)
    return (f'<svg width="{width}" height="{height}" role="img" aria-label="detection rate over executions">'
            f'<polyline points="{pts}" fill="none" stroke="#1565c0" stroke-width="1.5"/>'
            f'<g fill="#1565c0">{dots}</g></svg>')


def _grid(points: list[dict[str, Any]], columns: list[str], key: str) -> str:
    """One table cell per column: the point of that column (`key`), shaded by its rate."""
    e = html.escape
    by = {p[key]: p for p in points}
    tds = []
    for col in columns:
        p = by.get(col)
        if p is None:
            tds.append('<td class="none">&ndash;</td>')
            continue
        title = f"{col}: {p['met']}/{p['runs']} met; revisions {', '.join(p['revisions'])}"
        if p["retried"]:
            title += f"; {p['retried']} retried"
        tds.append(f'<td style="background:{_shade(p["met"], p["runs"])}" title="{e(title)}">'
                   f'{p["met"]}/{p["runs"]}</td>')
    return "".join(tds)


def campaigns_html(data: list[dict[str, Any]], dirs: Sequence[Path]) -> str:
    """The campaign page (module docstring)."""
    e = html.escape
    parts = []
    for camp in data:
        execs, revs = camp["executions"], camp["revisions"]
        head_e = "".join(f"<th>{e(x[:16])}</th>" for x in execs)
        head_r = "".join(f"<th><code>{e(x)}</code></th>" for x in revs)
        rows_e, rows_r = [], []
        for c in camp["cells"]:
            lead = (f'<td><code>{e(c["cell"])}</code></td><td>{e(c["expect"])}</td>'
                    f'<td style="background:{_shade(c["met"], c["runs"])}">{c["met"]}/{c["runs"]}</td>')
            rows_e.append(f"<tr>{lead}<td>{_spark(c['executions'])}</td>{_grid(c['executions'], execs, 'campaign_run')}</tr>")
            rows_r.append(f"<tr>{lead}{_grid(c['revisions'], revs, 'rev')}</tr>")
        note = f" ({camp['without_expect']} runs without a recorded expectation not counted)" \
            if camp["without_expect"] else ""
        parts.append(
            f'<section><h2>{e(camp["campaign"])}</h2><p class="muted">{camp["runs"]} runs, '
            f'{len(execs)} executions, {len(revs)} revisions{e(note)}. An entry: runs that met the cell\'s '
            f'expectation / runs.</p><h3>Over time (one column per execution)</h3><table><tr><th>cell</th>'
            f'<th>expect</th><th>all</th><th>rate</th>{head_e}</tr>{"".join(rows_e)}</table>'
            f'<h3>Across git revisions</h3><table><tr><th>cell</th><th>expect</th><th>all</th>{head_r}</tr>'
            f'{"".join(rows_r)}</table></section>')
    body = "".join(parts) or "<p>No campaign runs in the tables yet (wrack campaign ingests each run).</p>"
    where = ", ".join(str(d) for d in dirs) or "none found"
    return _PAGE.replace("{{BODY}}", body).replace("{{WHERE}}", e(where))


_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>wrack campaigns</title>
<style>
 body { font: 14px/1.45 "DejaVu Sans", system-ui, sans-serif; margin: 0; background: #f6f7f9; color: #1d2330; }
 main { max-width: 1400px; margin: 0 auto; padding: 20px; }
 section { background: #fff; border: 1px solid #e3e6ec; border-radius: 10px; padding: 14px 20px; margin: 14px 0;
           overflow-x: auto; }
 table { border-collapse: collapse; } .muted { color: #5b6475; }
 th, td { text-align: left; padding: 4px 8px; border-bottom: 1px solid #e3e6ec; white-space: nowrap; }
 th { color: #5b6475; font-weight: 600; } td.none { color: #bbb; }
</style></head><body><main>
<h1>Campaigns: detection rate per cell</h1>
<p class="muted"><a href="/">runs</a> &middot; tables: {{WHERE}}</p>
{{BODY}}
</main></body></html>
"""
