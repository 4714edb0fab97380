"""The run browser behind `wrack serve`: a local web page listing runs and campaigns.

`make_server(roots, host, port)` returns an `http.server.ThreadingHTTPServer` (bound to
127.0.0.1 by default) that serves:

- `/`: every run below the roots (verdict, test name, date, configuration, anomalies, seed)
  in one table, sortable by any column and filterable by text and verdict (inline script,
  no external resource), with a link to each run's report, and the campaigns found;
- `/api/runs`: the same list as JSON;
- `/campaigns` (and `/api/campaigns`): each campaign cell's detection rate over time and
  across git revisions, from the pipeline's tables (harness/serve_campaigns.py: the roots'
  `_pipeline/` folders, where `wrack campaign` ingests its runs, and `tables`);
- `/files/<root index>/<path>`: files below a root (reports, plots, results.json, histories),
  never outside it (`..`, absolute paths and symlinks leaving the root answer 404).

The run list is read from disk at every request, so runs that finish show up on reload.
"""

from __future__ import annotations

import html
import json
import mimetypes
import os
import urllib.parse
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from contracts import store
from harness.serve_campaigns import campaign_rates, campaigns_html, find_tables

CONFIG_KEYS = ("workload", "nodes", "acks", "nemesis", "rf", "min_isr", "safeguards_off", "time_limit", "client")


def list_runs(roots: Sequence[Path]) -> list[dict[str, Any]]:
    """Summaries of every run below `roots`, newest first, with a `href` to its files."""
    out = []
    for i, root in enumerate(roots):
        for run in store.find_runs([root]):
            s = store.summarize(run)
            rel = os.path.relpath(run, root)
            d = s.to_dict()
            d["href"] = f"/files/{i}/{urllib.parse.quote(rel)}/"
            d["report"] = d["href"] + "report.html" if s.has_report else None
            d["config"] = {k: s.options.get(k) for k in CONFIG_KEYS if k in s.options}
            d["date"] = (s.start or "")[:19].replace("T", " ")
            out.append(d)
    out.sort(key=lambda d: d.get("start") or "", reverse=True)
    return out


def list_campaigns(roots: Sequence[Path]) -> list[dict[str, Any]]:
    out = []
    for i, root in enumerate(roots):
        for res in sorted(Path(root).rglob("results.json")):
            if "runs" in res.relative_to(root).parts or not (res.parent / "summary.html").is_file():
                continue
            r = store.read_json(res) or {}
            rel = os.path.relpath(res.parent, root)
            out.append({"name": r.get("name"), "start": r.get("start"), "summary": r.get("summary") or {},
                        "href": f"/files/{i}/{urllib.parse.quote(rel)}/summary.html"})
    out.sort(key=lambda d: d.get("start") or "", reverse=True)
    return out


def _fmt(v: Any) -> str:
    if isinstance(v, list):
        return ",".join(map(str, v)) or "none"
    return "" if v is None else str(v)


def index_html(runs: list[dict[str, Any]], campaigns: list[dict[str, Any]]) -> str:
    e = html.escape
    rows = []
    for r in runs:
        cfg = " ".join(f"{k}={_fmt(v)}" for k, v in r["config"].items())
        name = f'<a href="{e(r["report"])}">{e(r["name"])}</a>' if r["report"] else e(r["name"])
        rows.append(
            f'<tr data-verdict="{e(r["verdict"])}"><td><span class="v {e(r["verdict"])}">{e(r["verdict"])}</span></td>'
            f'<td>{name}</td><td>{e(r["date"])}</td><td><code>{e(cfg)}</code></td>'
            f'<td>{e(", ".join(r["anomaly_types"]))}</td><td>{e(_fmt(r["seed"]))}</td>'
            f'<td><a href="{e(r["href"])}">files</a></td></tr>')
    camps = "".join(
        f'<li><a href="{e(c["href"])}">{e(str(c["name"]))}</a> {e(str(c["start"] or ""))} &middot; '
        f'{e(str(c["summary"].get("cells_passed", "?")))}/{e(str(c["summary"].get("cells", "?")))} cells passed</li>'
        for c in campaigns)
    return _PAGE.replace("{{ROWS}}", "\n".join(rows)).replace("{{COUNT}}", str(len(runs))).replace(
        "{{CAMPAIGNS}}", f"<h2>Campaigns</h2><p><a href=\"/campaigns\">detection rates per cell over time and "
                         f"revisions</a></p><ul>{camps}</ul>" if camps else
        '<p><a href="/campaigns">campaigns: detection rates per cell</a></p>')


_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>wrack runs</title>
<style>
 body { font: 14px/1.45 "DejaVu Sans", system-ui, sans-serif; margin: 0; background: #f6f7f9; color: #1d2330; }
 main { max-width: 1400px; margin: 0 auto; padding: 20px; }
 table { border-collapse: collapse; width: 100%; background: #fff; }
 th, td { text-align: left; padding: 5px 9px; border-bottom: 1px solid #e3e6ec; vertical-align: top; }
 th { cursor: pointer; user-select: none; color: #5b6475; } th:after { content: " \\2195"; color: #bbb; }
 .v { border-radius: 10px; padding: 1px 8px; color: #fff; font-weight: 600; font-size: 12px; }
 .valid { background: #2e7d32; } .invalid { background: #c62828; } .unknown, .unchecked { background: #ef6c00; }
 .bar { margin: 10px 0; display: flex; gap: 12px; align-items: center; }
 input, select { font: inherit; padding: 4px 8px; }
</style></head><body><main>
<h1>Wrack runs</h1>
{{CAMPAIGNS}}
<div class="bar"><input id="q" placeholder="filter: name, config, anomaly, seed..." size="50">
<select id="verdict"><option value="">every verdict</option><option>valid</option><option>invalid</option>
<option>unknown</option><option>unchecked</option></select><span id="shown">{{COUNT}} runs</span></div>
<table id="runs"><thead><tr><th>verdict</th><th>test</th><th>date</th><th>configuration</th><th>anomalies</th>
<th>seed</th><th></th></tr></thead><tbody>
{{ROWS}}
</tbody></table>
<script>
(function () {
  var tbody = document.querySelector('#runs tbody'), q = document.getElementById('q'),
      sel = document.getElementById('verdict'), shown = document.getElementById('shown');
  function apply() {
    var text = q.value.toLowerCase(), v = sel.value, n = 0;
    Array.prototype.forEach.call(tbody.rows, function (tr) {
      var ok = (!v || tr.dataset.verdict === v) && (!text || tr.textContent.toLowerCase().indexOf(text) >= 0);
      tr.style.display = ok ? '' : 'none'; if (ok) n++;
    });
    shown.textContent = n + ' runs';
  }
  q.addEventListener('input', apply); sel.addEventListener('change', apply);
  var dir = {};
  document.querySelectorAll('#runs th').forEach(function (th, i) {
    th.addEventListener('click', function () {
      dir[i] = !dir[i];
      var rows = Array.prototype.slice.call(tbody.rows);
      rows.sort(function (a, b) {
        var x = a.cells[i].textContent, y = b.cells[i].textContent;
        var nx = parseFloat(x), ny = parseFloat(y);
        var c = (!isNaN(nx) && !isNaN(ny)) ? nx - ny : x.localeCompare(y);
        return dir[i] ? c : -c;
      });
      rows.forEach(function (r) { tbody.appendChild(r); });
    });
  });
})();
</script>
</main></body></html>
"""


def safe_path(root: Path, rel: str) -> Path | None:
    """`root/rel` if it stays inside `root` (after resolving links), else None."""
    root_r = root.resolve()
    p = (root_r / rel.lstrip("/")).resolve()
    try:
        p.relative_to(root_r)
    except ValueError:
        return None
    return p


def make_server(roots: Sequence[str | os.PathLike[str]], host: str = "127.0.0.1", port: int = 8080,
                tables: Sequence[str | os.PathLike[str]] = ()) -> ThreadingHTTPServer:
    root_paths = [Path(r) for r in roots]
    table_paths = [Path(t) for t in tables]

    class Handler(BaseHTTPRequestHandler):
        server_version = "wrack-serve"

        def log_message(self, fmt: str, *a: Any) -> None:  # quiet
            return

        def _send(self, code: int, body: bytes, ctype: str) -> None:
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("X-Content-Type-Options", "nosniff")
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def do_HEAD(self) -> None:  # noqa: N802
            self.do_GET()

        def do_GET(self) -> None:  # noqa: N802
            url = urllib.parse.urlsplit(self.path)
            path = urllib.parse.unquote(url.path)
            if path in ("/", "/index.html"):
                body = index_html(list_runs(root_paths), list_campaigns(root_paths)).encode()
                return self._send(200, body, "text/html; charset=utf-8")
            if path == "/api/runs":
                return self._send(200, json.dumps(list_runs(root_paths), default=str).encode(), "application/json")
            if path in ("/campaigns", "/api/campaigns"):
                dirs = find_tables(root_paths, table_paths)
                data = campaign_rates(dirs)
                if path == "/api/campaigns":
                    return self._send(200, json.dumps(data, default=str).encode(), "application/json")
                return self._send(200, campaigns_html(data, dirs).encode(), "text/html; charset=utf-8")
            if path.startswith("/files/"):
                parts = path[len("/files/"):].split("/", 1)
                if parts[0].isdigit() and int(parts[0]) < len(root_paths):
                    p = safe_path(root_paths[int(parts[0])], parts[1] if len(parts) > 1 else "")
                    if p is not None and p.is_dir() and (p / "report.html").is_file():
                        p = p / "report.html"
                    if p is not None and p.is_file():
                        ctype = mimetypes.guess_type(p.name)[0] or "application/octet-stream"
                        if p.suffix in (".jsonl", ".log", ".properties"):
                            ctype = "text/plain"
                        if ctype.startswith("text/") or ctype in ("application/json",):
                            ctype += "; charset=utf-8"
                        return self._send(200, p.read_bytes(), ctype)
            return self._send(404, b"not found\n", "text/plain; charset=utf-8")

    return ThreadingHTTPServer((host, port), Handler)
