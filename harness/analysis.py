"""Check a run folder: history -> results.json -> plots and timeline -> report.html.

`check_run` (history -> results.json) then `render_outputs` (plots, timeline, report) is
what the runner does after teardown; `analyze_run(run_dir)` does both, and is what `wrack
analyze` does later (also for a run whose harness was killed: its history may end in a torn line
and hold ops that never completed, which count as indeterminate). The workload, its
options and the expected-anomaly policy come from the run's test.json; `workload=`
overrides (a folder with only a history.jsonl).

Queue runs are also checked for liveness (`checkers.liveness`: every key takes a write and a
read within `--recovery-time-limit` of the final heal, else `no-recovery`; availability in
and outside fault windows; recovery times), into results.json's `liveness`.

`check_run` reads the history twice: one validated pass (`HistoryScan`) for the history's
figures, its faults (the policy) and liveness, then the checker's own pass; explanations
read it once more when anomalies were found. The queue checker's analysis (its op table
and series) is handed from the check to the plots, so a history is analysed once. Checker
failures are verdicts, not crashes: a checker that raises yields `{"valid": "unknown",
"error": ...}`; only a missing or malformed history is bad input (`InputError`).
"""

from __future__ import annotations

import datetime as dt
import time
import traceback
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import workloads
from checkers import liveness
from checkers.policy import choose
from checkers.queue.explain import explain
from contracts import store
from contracts.errors import InputError
from contracts.history import ReadStats, read_events
from contracts.pairing import NEMESIS, Pairing, same_line
from harness import plots as hplots
from harness.nodelogs import read_node_events
from harness.report import write_report
from workloads.base import WorkloadOptions


def workload_options(options: Mapping[str, Any]) -> Any:
    """A WorkloadOptions from test options (unknown keys ignored, missing ones default)."""
    return WorkloadOptions.from_test(options)


class HistoryScan:
    """One validated pass over a history (`read_events`), paired by `contracts.pairing`.

    Iterating yields the events, so another consumer (the liveness check) reads the same
    pass; `nemesis` collects the nemesis events (the policy reads them) and `summary()`
    gives results.json's `history`: events, torn lines, ok/fail/info completions and the
    invokes never completed. A malformed or badly paired history raises `InputError`.
    """

    def __init__(self, path: Path):
        self.path = path
        self.read = ReadStats()
        self.nemesis: list[dict[str, Any]] = []
        self.pairing = Pairing(str(path), same_line)
        self.completed = {"ok": 0, "fail": 0, "info": 0}

    def __iter__(self) -> Iterator[dict[str, Any]]:
        invoke = self.pairing.invoke
        complete = self.pairing.complete
        completed = self.completed
        for line, ev in read_events(self.path, self.read, with_lines=True):
            if ev["process"] == NEMESIS:
                self.nemesis.append(ev)
            elif ev["type"] == "invoke":
                invoke(ev, line)
            else:
                complete(ev, line)
                completed[ev["type"]] += 1
            yield ev

    def drain(self) -> None:
        for _ in self:
            pass

    def summary(self) -> dict[str, Any]:
        st = self.read
        return {"events": st.events, "dropped_lines": st.dropped, "dropped_reason": st.dropped_reason,
                "never_completed": len(self.pairing.open), **self.completed}


@dataclass
class CheckedRun:
    """A checked run: the results (as written to results.json) and the checker's analysis the
    plots draw from (`checkers.queue.QueueAnalysis` for the queue workload, else None)."""

    results: dict[str, Any]
    analysis: Any = None


def check_run(run_dir: Path, *, workload: str | None = None, time_limit: float | None = None) -> CheckedRun:
    """Run the workload's checker on the run's history and write results.json."""
    run_dir = Path(run_dir)
    hist = run_dir / "history.jsonl"
    if not hist.is_file():
        raise InputError("no history.jsonl in this run folder", str(run_dir))
    test = store.read_json(run_dir / "test.json")
    options = dict((test or {}).get("options") or {})
    if workload:
        options["workload"] = workload
    options.setdefault("workload", "queue")
    incomplete = test is None or test.get("end") is None

    try:
        wl = workloads.make(options["workload"], workload_options(options))
    except ValueError as e:
        raise InputError(str(e), str(run_dir / "test.json")) from None
    scan = HistoryScan(hist)  # one pass for the history's figures, its faults and liveness
    live = None
    if wl.checker == "queue":
        live = liveness.check(scan, keys=wl.keys, bound_s=wl.opts.recovery_time_limit)
    else:
        scan.drain()  # raises InputError for a malformed history
    hstats = scan.summary()
    policy = choose(options, incomplete=incomplete, events=scan.nemesis, keys=getattr(wl, "keys", ()),
                    isr_changes=isr_changes(run_dir, test or {}))
    t0 = time.monotonic()
    analysis = None
    try:
        if hasattr(wl, "analyze"):  # the checker's analysis, kept for the plots
            analysis = wl.analyze(hist, policy.allowed, time_limit, policies=policy.names)
            results = dict(analysis.result)
        else:
            results = dict(wl.check(hist, policy.allowed, time_limit))
    except InputError:
        raise
    except Exception as e:  # noqa: BLE001 - a checker crash is an unknown verdict, not a harness crash
        results = {"valid": "unknown", "anomaly_types": [], "anomalies": {},
                   "error": f"checker {wl.checker} crashed: {type(e).__name__}: {e}",
                   "traceback": traceback.format_exc(limit=8)}
    results.setdefault("anomaly_types", sorted((results.get("anomalies") or {}).keys()))
    results.setdefault("allowed", policy.allowed)
    results["policy"] = policy.to_dict()
    results["checker"] = wl.checker
    results["history"] = hstats
    results["check_seconds"] = round(time.monotonic() - t0, 3)
    results["checked_at"] = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    if hstats["dropped_lines"] or incomplete:
        results["incomplete_run"] = True
    if live is not None:
        add_liveness(results, live)
    if wl.checker == "queue" and results.get("anomaly_types"):
        results["explanations"] = explain_run(run_dir, results, test or {}, options)
    store.write_json(run_dir / "results.json", results)
    return CheckedRun(results, analysis)


def add_liveness(results: dict[str, Any], live: Mapping[str, Any]) -> None:
    """Put `checkers.liveness`'s result into `results`: its figures under `liveness`, and a
    `no-recovery` anomaly (never allowed) into the verdict."""
    results["liveness"] = {k: v for k, v in live.items() if k not in ("anomalies", "anomaly_types", "anomaly_counts")}
    if live.get("valid") is not False:
        return
    for kind, examples in live["anomalies"].items():
        results.setdefault("anomalies", {})[kind] = examples
        results.setdefault("anomaly_counts", {})[kind] = len(examples)
        if kind not in results["anomaly_types"]:
            results["anomaly_types"] = [*results["anomaly_types"], kind]
    results["valid"] = False


def explain_run(run_dir: Path, results: Mapping[str, Any], test: Mapping[str, Any],
                options: Mapping[str, Any]) -> dict[str, Any]:
    """Why each anomalous offset was lost (`checkers.queue.explain` over the history and the
    nodes' event lines, `harness.nodelogs`); an explanation that fails is noted, never raised."""
    try:
        ne = read_node_events(run_dir, dict(test))
        out = explain(read_events(run_dir / "history.jsonl"), ne.events, dict(results), dict(options))
        out["clock"] = ne.clock
        return out
    except Exception as e:  # noqa: BLE001 - a missing explanation must not cost the verdict
        return {"error": f"{type(e).__name__}: {e}", "explained": [], "counts": {}}


def isr_changes(run_dir: Path, test: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The controller's ISR changes from the nodes' event lines, on the history's clock, for the
    policy (`checkers.lossy`: they see a replica's spell outside the ISR that the observer's
    polls miss). None when the logs are missing or their clock is only approximate."""
    try:
        ne = read_node_events(run_dir, dict(test))
    except Exception:  # noqa: BLE001 - without them the observer's events stand alone
        return []
    if ne.clock not in ("monotonic", "wall"):
        return []
    return [{"time": e["time"], "key": e["tp"], "isr": list(e.get("isr") or [])} for e in ne.events
            if e.get("event") == "partition-change" and e.get("time") is not None and e.get("tp")]


def render_outputs(run_dir: Path, test: Mapping[str, Any] | None = None, analysis: Any = None) -> list[str]:
    """Plots (from `analysis` when given), timeline and report.html for a checked run; returns
    the problems met (never raises for a plot: a missing picture must not cost the verdict)."""
    problems = hplots.write_all(run_dir, test or store.read_json(run_dir / "test.json") or {}, analysis)
    try:
        write_report(run_dir)
    except Exception as e:  # noqa: BLE001
        problems.append(f"report: {type(e).__name__}: {e}")
    return problems


def analyze_run(run_dir: Path, *, workload: str | None = None, time_limit: float | None = None
                ) -> dict[str, Any]:
    """check_run + render_outputs; returns the results (with `render_problems` if any)."""
    checked = check_run(run_dir, workload=workload, time_limit=time_limit)
    results = checked.results
    problems = render_outputs(Path(run_dir), analysis=checked.analysis)
    if problems:
        results["render_problems"] = problems
        store.write_json(Path(run_dir) / "results.json", results)
    return results
