"""The run report: one self-contained HTML file that opens offline.

`render_report(data)` is a pure function from a run's loaded contents to HTML that leads
with the bug (harness/report_lead.py): the verdict and its one-line cause first (with the time
to the first anomaly and what the run tested less than it promised), then each anomaly with
its explanation and the ops involved (examples in pages), the system under test's own
sections (`SystemUnderTest.report_sections`, e.g. why each anomalous offset was lost), the
plots (embedded PNGs), the commands that reproduce the run (rerun, shrink, replay its
schedule), the coverage (which fault packages and stories played as planned), the
configuration folded (only what differs from the defaults, only this system's options), then
the loss rules that were applied, the faults, the timeline and per-node logs. Everything is autoescaped: payload values from
the history stay text, never markup. No external resource is referenced (no CDN, no file
links needed to render).

The timeline is part of the page (`checkers.timeline.fragment_from_page` over
plots/timeline.html: the checkers' own element, script and style, with only the base64 data
and the escaped title taken from the file), not an iframe: a sandboxed `srcdoc` iframe is an
opaque-origin frame that Chromium renders in a process of its own (IsolateSandboxedIframes),
which a headless screenshot or a print could catch before it had painted. It is the page's
only script; everything else renders without JavaScript.

`write_report(run_dir)` loads a run folder (docs/ARCHITECTURE.md layout) and writes
`report.html` into it.
"""

from __future__ import annotations

import base64
import html
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import suites
from checkers.timeline import fragment_from_page
from contracts.errors import InputError
from contracts.history import fault_windows, read_events
from contracts.pairing import NEMESIS, Pairing, same_line
from harness import report_lead as lead

LOG_TAIL_LINES = 400
PLOT_TITLES = {
    "latency-raw": "Latency of every op",
    "latency-quantiles": "Latency quantiles",
    "rate": "Throughput",
    "realtime-lag": "Realtime lag",
    "unseen": "Unseen acknowledged sends",
    "clock-skew": "Clock offsets",
}


@dataclass
class RunData:
    """What a report shows; every field optional except the test options."""

    test: dict[str, Any]
    results: dict[str, Any] | None = None
    plots: list[tuple[str, bytes]] = field(default_factory=list)  # (name, PNG bytes)
    timeline_fragment: str | None = None  # the embeddable timeline element (trusted markup)
    logs: dict[str, str] = field(default_factory=dict)  # node -> log tail
    run_dir: str = ""
    faults: list[dict[str, Any]] = field(default_factory=list)  # fault windows (kind, start s, stop s, value)
    nemesis_errors: list[dict[str, Any]] = field(default_factory=list)  # failed fault actions, heal errors
    ops: dict[int, list[dict[str, Any]]] = field(default_factory=dict)  # op index -> its events
    counterexample: str | None = None  # the linearizability counterexample's page, relative to the run
    system_sections: list[str] = field(default_factory=list)  # the system's own sections (trusted markup)
    schedule: dict[str, Any] | None = None  # schedule.json: the fault actions played


def verdict_word(valid: Any) -> str:
    if valid is True:
        return "valid"
    if valid is False:
        return "invalid"
    return "unknown"


def load_run(run_dir: str | os.PathLike[str]) -> RunData:
    """Load what a report needs from a run folder; missing pieces are simply absent."""
    d = Path(run_dir)
    test = _read_json(d / "test.json") or {"name": d.parent.name}
    results = _read_json(d / "results.json")
    plots: list[tuple[str, bytes]] = []
    for sub in (d / "plots", d):
        if sub.is_dir():
            for p in sorted(sub.glob("*.png")):
                plots.append((p.stem, p.read_bytes()))
    timeline = None
    for cand in (d / "plots" / "timeline.html", d / "timeline.html"):
        if cand.is_file():
            timeline = fragment_from_page(cand.read_text(errors="replace"))
            break
    logs: dict[str, str] = {}
    nodes = d / "nodes"
    if nodes.is_dir():
        for node in sorted(p for p in nodes.iterdir() if p.is_dir()):
            for log in sorted(node.glob("*.log")):
                logs[f"{node.name}/{log.name}"] = _tail(log, LOG_TAIL_LINES)
    faults, nem_errors, ops = _scan_history(d / "history.jsonl", _example_indices(results))
    cx = "plots/linearizability.html"
    return RunData(test=test, results=results, plots=plots, timeline_fragment=timeline, logs=logs,
                   run_dir=str(d), faults=faults, nemesis_errors=nem_errors, ops=ops,
                   counterexample=cx if (d / cx).is_file() else None,
                   system_sections=_system_sections(results, test), schedule=_read_json(d / "schedule.json"))


def _system_sections(results: dict[str, Any] | None, test: dict[str, Any]) -> list[str]:
    """The system under test's own report sections (`SystemUnderTest.report_sections`); one that
    fails is shown as a line saying so, never raised."""
    options = test.get("options") if isinstance(test.get("options"), dict) else {}
    try:
        return list(suites.get(options.get("db") or suites.DEFAULT).report_sections(results or {}, test))
    except Exception as e:  # noqa: BLE001 - a missing section must not cost the report
        return [f"<p class=\"muted\">The system's own sections failed: {escape(f'{type(e).__name__}: {e}')}</p>"]


MAX_OPS_SHOWN = 400


def _example_indices(results: dict[str, Any] | None) -> set[int]:
    """History indices named by the anomaly examples (the ops the report shows in full)."""
    out: set[int] = set()
    for examples in ((results or {}).get("anomalies") or {}).values():
        if isinstance(examples, dict):
            examples = examples.get("examples") or examples.get("errs") or []
        for e in (examples if isinstance(examples, list) else [])[:20]:
            if not isinstance(e, dict):
                continue
            for k in ("ops", "op_indices", "indices"):
                named = e.get(k)
                for i in named if isinstance(named, list) else []:  # the linearizable checker's `ops` is a count
                    if isinstance(i, int) and len(out) < MAX_OPS_SHOWN:
                        out.add(i)
                    elif isinstance(i, dict) and isinstance(i.get("index"), int) and len(out) < MAX_OPS_SHOWN:
                        out.add(i["index"])
    return out


def _scan_history(path: Path, wanted: set[int]
                  ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[int, list[dict[str, Any]]]]:
    """Fault windows, nemesis errors, and the events of the wanted ops (invoke + completion)."""
    if not path.is_file():
        return [], [], {}
    nem: list[dict[str, Any]] = []
    ops: dict[int, list[dict[str, Any]]] = {}
    pairing = Pairing(str(path), same_line)
    try:
        for line, ev in read_events(path, with_lines=True):
            if ev["process"] == NEMESIS:
                nem.append(ev)
                continue
            if ev["type"] == "invoke":
                pairing.invoke(ev, line)
                if ev["index"] in wanted:
                    ops[ev["index"]] = [ev]
            else:
                inv = pairing.complete(ev, line)[0]["index"]
                if inv in ops:
                    ops[inv].append(ev)
                elif ev["index"] in wanted:  # an example naming the completion's index
                    ops[ev["index"]] = [ev]
    except InputError:
        pass
    faults = [{"kind": w.kind, "start": w.start / 1e9, "stop": None if w.stop is None else w.stop / 1e9,
               "value": w.start_event.get("value")} for w in fault_windows(nem)]
    errors = [{"time": e["time"] / 1e9, "f": e["f"], "value": e.get("value")} for e in nem
              if e["f"] in ("nemesis-error", "heal-errors")]
    return faults, errors, ops


def write_report(run_dir: str | os.PathLike[str]) -> Path:
    """Render `report.html` for a run folder and return its path."""
    data = load_run(run_dir)
    out = Path(run_dir) / "report.html"
    tmp = out.with_suffix(".html.tmp")
    tmp.write_text(render_report(data))
    os.replace(tmp, out)
    return out


def _read_json(p: Path) -> dict[str, Any] | None:
    try:
        with open(p) as f:
            v = json.load(f)
        return v if isinstance(v, dict) else None
    except (OSError, ValueError):
        return None


def _tail(p: Path, n: int) -> str:
    try:
        with open(p, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - 256 * 1024))
            lines = f.read().decode(errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join(lines[-n:])


def render_report(data: RunData) -> str:
    """The report's HTML (a pure function of `data`)."""
    # lazy: jinja2 (~50 ms) loads in the background while a test runs (harness.runner._preload_reporting)
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(Path(__file__).parent / "templates")),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters["tojson_pretty"] = lambda v: json.dumps(v, indent=2, sort_keys=True, default=str)
    results = data.results or {}
    valid = results.get("valid", "unknown") if data.results is not None else "unknown"
    anomalies = []
    allowed = set(results.get("allowed") or results.get("allowed_types") or [])
    for kind in results.get("anomaly_types") or sorted((results.get("anomalies") or {}).keys()):
        examples = (results.get("anomalies") or {}).get(kind)
        count = (results.get("anomaly_counts") or {}).get(kind)
        if isinstance(examples, dict) and "count" in examples:  # condensed form {count, examples}
            count = examples.get("count", count)
            examples = examples.get("examples") or examples.get("errs") or []
        if not isinstance(examples, list):
            examples = [examples] if examples is not None else []
        anomalies.append({
            "kind": kind,
            "allowed": kind in allowed,
            "count": count if count is not None else len(examples),
            "pages": lead.pages([_example(e) for e in examples[:20]]),
        })
    plots = [
        {"name": name, "title": PLOT_TITLES.get(name, name.replace("-", " ").capitalize()),
         "src": "data:image/png;base64," + base64.b64encode(png).decode()}
        for name, png in data.plots
    ]
    options = data.test.get("options") if isinstance(data.test.get("options"), dict) else {
        k: v for k, v in data.test.items() if k not in ("versions",)}
    other = {k: v for k, v in results.items()
             if k not in ("valid", "anomaly_types", "anomalies", "allowed", "allowed_types")}
    policy = results.get("policy") if isinstance(results.get("policy"), dict) else None
    op_lines = {i: [_op_line(ev) for ev in evs] for i, evs in data.ops.items()}
    other = {k: v for k, v in other.items()
             if k not in ("policy", "history", "traceback", "explanations", "liveness", "faults", "warnings")}
    fat, fbad = results.get("first_anomaly_time"), results.get("first_bad_anomaly_time")
    coverage = lead.coverage(data.test, results, data.schedule)
    tmpl = env.get_template("report.html.j2")
    return tmpl.render(
        cause=lead.cause_line(data.test, data.results, coverage),
        coverage=coverage,
        config=lead.configuration(data.test),
        commands=lead.commands(data.run_dir, data.test, data.results),
        policy=policy,
        system_sections=data.system_sections,
        liveness=results.get("liveness") if isinstance(results.get("liveness"), dict) else None,
        first_anomaly_s=fat / 1e9 if isinstance(fat, (int, float)) else None,
        first_bad_s=fbad / 1e9 if isinstance(fbad, (int, float)) else None,
        history_stats=results.get("history") or {},
        warnings=[str(w) for w in results.get("warnings") or []],
        fault_coverage=results.get("faults") if isinstance(results.get("faults"), dict) else None,
        faults=data.faults,
        nemesis_errors=data.nemesis_errors,
        op_lines=op_lines,
        timings=data.test.get("timings") or {},
        git=data.test.get("git") or {},
        run_error=results.get("run_error") or data.test.get("error"),
        checker_error=results.get("error"),
        test=data.test,
        name=data.test.get("name", "run"),
        verdict=verdict_word(valid),
        options=options,
        versions=data.test.get("versions") or {},
        anomalies=anomalies,
        allowed=sorted(allowed),
        plots=plots,
        timeline_fragment=data.timeline_fragment,
        counterexample=data.counterexample,
        logs=data.logs,
        other_results=other,
        run_dir=data.run_dir,
    )


def _op_line(ev: dict[str, Any]) -> str:
    """One history event as a line of text (escaped by the template, never markup)."""
    v = json.dumps(ev.get("value"), default=str, separators=(",", ":"))
    if len(v) > 300:
        v = v[:300] + "..."
    err = f"  error={ev['error']}" if ev.get("error") else ""
    return f"#{ev.get('index')} t={ev.get('time', 0) / 1e9:.3f}s p={ev.get('process')} {ev.get('type')} {ev.get('f')} {v}{err}"


def _example(e: Any) -> dict[str, Any]:
    """One anomaly example as (sentence, ops, rest) for the template."""
    if isinstance(e, dict):
        sentence = e.get("explanation") or e.get("message") or e.get("description") or ""
        raw = e.get("ops") or e.get("op_indices") or e.get("indices") or []
        ops = [o["index"] if isinstance(o, dict) and isinstance(o.get("index"), int) else o
               for o in (raw if isinstance(raw, list) else [raw])]
        rest = {k: v for k, v in e.items() if k not in ("explanation", "message", "description", "ops",
                                                          "op_indices", "indices")}
        return {"sentence": sentence, "ops": ops, "rest": rest}
    return {"sentence": str(e), "ops": [], "rest": {}}


def escape(s: str) -> str:
    """HTML-escape a string (exposed for callers that build fragments by hand)."""
    return html.escape(s, quote=True)
