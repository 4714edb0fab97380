"""`wrack pipeline report`: the analytics as JSON, PNG plots and an HTML fragment.

`write_report(report, dir)` writes `report.json`, the plots (`PLOTS`, matplotlib, PNG)
and `report.html` (a standalone page around the fragment) into `dir`. `html_fragment`
is what the campaign summary embeds: one `<section class="wrack-pipeline">` with the
tables and the plots inlined as data: URIs (no external resource, opens offline; every
value is escaped). It takes the report dict (or a report directory).
"""

from __future__ import annotations

import base64
import html
import io
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

PLOTS = {
    "anomaly-rate": "Anomaly rate by configuration",
    "time-to-first-anomaly": "Time to first anomaly by configuration",
    "availability": "Availability inside vs outside fault windows",
    "latency": "Latency of ok ops inside vs outside fault windows",
    "regressions": "Invalid rate against the baseline",
}


def write_report(report: dict[str, Any], out_dir: str) -> list[str]:
    """Write report.json, the plots and report.html into `out_dir`; returns the files written."""
    os.makedirs(out_dir, exist_ok=True)
    written = []
    p = os.path.join(out_dir, "report.json")
    _atomic(p, json.dumps(report, indent=1).encode())
    written.append(p)
    for name, png in render_plots(report).items():
        p = os.path.join(out_dir, f"{name}.png")
        _atomic(p, png)
        written.append(p)
    p = os.path.join(out_dir, "report.html")
    _atomic(p, page(report, out_dir).encode())
    written.append(p)
    return written


def _atomic(path: str, data: bytes) -> None:
    tmp = os.path.join(os.path.dirname(path), "." + os.path.basename(path) + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


# ------------------------------------------------------------------ plots


def _short(cfg: str) -> str:
    """A configuration label for an axis: the nemesis on one line, the rest on the next."""
    return (cfg.replace("nemesis=", "").replace(" acks=", "\na=").replace(" min_isr=", " isr=")
            .replace(" flush=", " f=").replace(" safeguards=", " sg="))


def render_plots(report: dict[str, Any]) -> dict[str, bytes]:
    """name -> PNG bytes of every plot the report has data for."""
    # lazy: matplotlib takes ~0.3 s (only the plots need it), and Agg must be chosen before pyplot loads
    import matplotlib

    matplotlib.use("Agg")
    # lazy: pyplot takes ~0.8 s, after matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out: dict[str, bytes] = {}

    def save(fig: Any, name: str) -> None:
        buf = io.BytesIO()
        fig.tight_layout()
        fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
        plt.close(fig)
        out[name] = buf.getvalue()

    cells = [c for c in report.get("by_config", []) if c.get("anomaly_rate") is not None]
    fs = report.get("faults", {})
    reg = report.get("regressions") or {}
    for plot, data in ((_anomaly_rate, cells), (_time_to_first_anomaly, cells),
                       (_availability, fs.get("by_config", [])),
                       (_latency, [r for r in fs.get("by_f", []) if r["latency_ms"]["p50"] is not None]),
                       (_regressions, reg.get("anomaly_rate_up") if report.get("by_config") else None)):
        if data:
            plot(plt, save, data)
    return out


def _anomaly_rate(plt: Any, save: Callable[[Any, str], None], cells: list[dict[str, Any]]) -> None:
    fig, ax = plt.subplots(figsize=(9, max(2.5, 0.45 * len(cells) + 1)))
    labels = [_short(c["config"]) for c in cells]
    ax.barh(labels, [c["anomaly_rate"] for c in cells], color="#d9534f", label="any anomaly")
    ax.barh(labels, [c["invalid_rate"] for c in cells], color="#8b1a1a", height=0.4, label="invalid")
    ax.set_xlim(0, 1)
    ax.set_xlabel("share of runs")
    ax.set_title(PLOTS["anomaly-rate"])
    ax.legend(loc="lower right", fontsize=8)
    ax.tick_params(axis="y", labelsize=7)
    save(fig, "anomaly-rate")


def _time_to_first_anomaly(plt: Any, save: Callable[[Any, str], None], cells: list[dict[str, Any]]) -> None:
    timed = [c for c in cells if c["time_to_first_anomaly_s"]["all"]]
    if not timed:
        return
    fig, ax = plt.subplots(figsize=(9, max(2.5, 0.45 * len(timed) + 1)))
    for i, c in enumerate(timed):
        xs = c["time_to_first_anomaly_s"]["all"]
        ax.scatter(xs, [i] * len(xs), s=14, color="#d9534f", alpha=0.7)
        ax.plot([c["time_to_first_anomaly_s"]["median"]] * 2, [i - 0.3, i + 0.3], color="black")
    ax.set_yticks(range(len(timed)), [_short(c["config"]) for c in timed], fontsize=7)
    ax.set_xlabel("seconds from the start of the run (bar: median)")
    ax.set_title(PLOTS["time-to-first-anomaly"])
    save(fig, "time-to-first-anomaly")


def _availability(plt: Any, save: Callable[[Any, str], None], by_cfg: list[dict[str, Any]]) -> None:
    cfgs = sorted({r["config"] for r in by_cfg})
    look = {(r["config"], r["inside"]): r for r in by_cfg}
    fig, ax = plt.subplots(figsize=(9, max(2.5, 0.55 * len(cfgs) + 1)))
    ys = range(len(cfgs))
    for off, inside, color, lab in ((-0.2, False, "#5cb85c", "outside faults"),
                                    (0.2, True, "#f0ad4e", "inside fault windows")):
        vals = [(look.get((c, inside)) or {}).get("availability") or 0 for c in cfgs]
        ax.barh([y + off for y in ys], vals, height=0.4, color=color, label=lab)
    ax.set_yticks(list(ys), [_short(c) for c in cfgs], fontsize=7)
    ax.set_xlim(0, 1)
    ax.set_xlabel("availability (ok / all ops)")
    ax.set_title(PLOTS["availability"])
    ax.legend(loc="lower right", fontsize=8)
    save(fig, "availability")


def _latency(plt: Any, save: Callable[[Any, str], None], by_f: list[dict[str, Any]]) -> None:
    fs_names = sorted({r["f"] for r in by_f})
    look = {(r["f"], r["inside"]): r for r in by_f}
    fig, ax = plt.subplots(figsize=(9, 3.5))
    width = 0.12
    for j, (q, inside) in enumerate((("p50", False), ("p50", True), ("p95", False), ("p95", True),
                                     ("p99", False), ("p99", True))):
        vals = [((look.get((f, inside)) or {}).get("latency_ms") or {}).get(q) or 0 for f in fs_names]
        ax.bar([i + (j - 2.5) * width for i in range(len(fs_names))], vals, width,
               label=f"{q} {'inside' if inside else 'outside'}",
               color=("#f0ad4e" if inside else "#5cb85c"), alpha=0.45 + 0.18 * (j // 2))
    ax.set_xticks(range(len(fs_names)), fs_names)
    ax.set_yscale("log")
    ax.set_ylabel("ms")
    ax.set_title(PLOTS["latency"])
    ax.legend(fontsize=7, ncol=3)
    save(fig, "latency")


def _regressions(plt: Any, save: Callable[[Any, str], None], rows: list[dict[str, Any]]) -> None:
    fig, ax = plt.subplots(figsize=(9, max(2.5, 0.45 * len(rows) + 1)))
    ax.barh([i - 0.2 for i in range(len(rows))], [r["baseline_anomaly_rate"] for r in rows], 0.4,
            color="#999999", label="baseline")
    ax.barh([i + 0.2 for i in range(len(rows))], [r["anomaly_rate"] for r in rows], 0.4,
            color="#d9534f", label="now")
    ax.set_yticks(range(len(rows)), [_short(r["config"]) for r in rows], fontsize=7)
    ax.set_xlim(0, 1)
    ax.set_title("Anomaly rate up against the baseline")
    ax.legend(fontsize=8)
    save(fig, "regressions")


# ------------------------------------------------------------------ HTML


def _e(x: Any) -> str:
    return html.escape("" if x is None else str(x))


def _pct(x: Any) -> str:
    return "–" if x is None else f"{100 * x:.1f}%"


def html_fragment(report: dict[str, Any] | str | os.PathLike[str]) -> str:
    """One self-contained `<section>` for the campaign summary (plots inlined, values escaped)."""
    plots: dict[str, bytes] = {}
    if not isinstance(report, dict):
        d = Path(report)
        report = json.loads((d / "report.json").read_text())
        for name in PLOTS:
            p = d / f"{name}.png"
            if p.is_file():
                plots[name] = p.read_bytes()
    else:
        plots = render_plots(report)
    v = report.get("verdicts", {})
    parts = ['<section class="wrack-pipeline">', "<h2>Campaign analytics (Spark pipeline)</h2>",
             f"<p>{_e(report.get('runs'))} runs, {_e(report.get('checked'))} checked: "
             f"{_e(v.get('true', 0))} valid, {_e(v.get('false', 0))} invalid, {_e(v.get('unknown', 0))} unknown."]
    if report.get("damaged_runs"):
        parts.append(f" {len(report['damaged_runs'])} damaged histories (ingested up to their last good line).")
    parts.append("</p>")
    parts.append("<h3>Anomalies by configuration</h3><table><thead><tr><th>configuration</th><th>runs</th>"
                 "<th>anomaly rate</th><th>invalid rate</th><th>types (runs)</th>"
                 "<th>time to first anomaly (median s)</th></tr></thead><tbody>")
    for c in report.get("by_config", []):
        types = ", ".join(f"{t} ({n})" for t, n in c["runs_by_type"].items())
        parts.append(f"<tr><td>{_e(c['config'])}</td><td>{_e(c['runs'])}</td><td>{_pct(c['anomaly_rate'])}</td>"
                     f"<td>{_pct(c['invalid_rate'])}</td><td>{_e(types)}</td>"
                     f"<td>{_e(c['time_to_first_anomaly_s']['median'])}</td></tr>")
    parts.append("</tbody></table>")
    overall = report.get("faults", {}).get("overall", [])
    if overall:
        parts.append("<h3>Inside vs outside fault windows</h3><table><thead><tr><th></th><th>ops</th>"
                     "<th>availability</th><th>p50 ms</th><th>p95 ms</th><th>p99 ms</th><th>max ms</th></tr>"
                     "</thead><tbody>")
        for r in overall:
            lat = r["latency_ms"]
            parts.append(f"<tr><td>{'inside' if r['inside'] else 'outside'}</td><td>{_e(r['ops'])}</td>"
                         f"<td>{_pct(r['availability'])}</td><td>{_e(lat['p50'])}</td><td>{_e(lat['p95'])}</td>"
                         f"<td>{_e(lat['p99'])}</td><td>{_e(lat['max'])}</td></tr>")
        parts.append("</tbody></table>")
    reg = report.get("regressions")
    if reg is not None:
        parts.append(f"<h3>Regressions against {_e(report.get('baseline'))}</h3>")
        if reg["runs"]:
            parts.append("<table><thead><tr><th>run</th><th>configuration</th><th>verdict</th><th>anomalies</th>"
                         "</tr></thead><tbody>")
            for r in reg["runs"]:
                parts.append(f"<tr><td>{_e(r['run_id'])}</td><td>{_e(r['config'])}</td><td>{_e(r['valid'])}</td>"
                             f"<td>{_e(', '.join(r['anomaly_types']))}</td></tr>")
            parts.append("</tbody></table>")
        else:
            parts.append(f"<p>No regression in {_e(reg['compared_cells'])} configurations compared.</p>")
    for name, title in PLOTS.items():
        if name in plots:
            b64 = base64.b64encode(plots[name]).decode()
            parts.append(f'<figure><img alt="{_e(title)}" src="data:image/png;base64,{b64}">'
                         f"<figcaption>{_e(title)}</figcaption></figure>")
    parts.append("</section>")
    return "\n".join(parts)


def page(report: dict[str, Any], out_dir: str | None = None) -> str:
    """A standalone HTML page around the fragment."""
    frag = html_fragment(out_dir) if out_dir and os.path.isfile(os.path.join(out_dir, "report.json")) \
        else html_fragment(report)
    style = ("body{font-family:sans-serif;margin:2em;max-width:1100px}table{border-collapse:collapse;"
             "margin:1em 0}td,th{border:1px solid #ccc;padding:3px 8px;font-size:13px;text-align:left}"
             "img{max-width:100%}")
    return (f"<!doctype html><html><head><meta charset=\"utf-8\"><title>Wrack pipeline report</title>"
            f"<style>{style}</style></head><body>{frag}</body></html>")
