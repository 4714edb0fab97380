"""Check a run folder: history -> results.json -> plots and timeline -> report.html.

`check_run` (history -> results.json) then `render_outputs` (plots, timeline, report) is
what the runner does after teardown; `analyze_run(run_dir)` does both, and is what `wrack
analyze` does later (also for a run whose harness was killed: its history may end in a torn line
and hold ops that never completed, which count as indeterminate). The workload, its
options and the expected-anomaly policy come from the run's test.json; `workload=`
overrides (a folder with only a history.jsonl).

A run is checked by its workload's checker (`analyze`) composed with `checkers.compose`;
a workload with `checks_recovery` (queue) adds liveness (`checkers.liveness`: every key takes
a write and a read within `--recovery-time-limit` of the final heal, else `no-recovery`;
availability in and outside fault windows; recovery times), into results.json's `liveness`.
The checkers' raw results and the system's loss rules for this run (`SystemUnderTest.
loss_rules`, from its configuration and fault history) make the verdict in one place,
`checkers.verdict.judge` (a run that ended in an error is at best unknown). results.json is
the workload checker's result at the top, with the verdict and the composed anomalies
(`flatten`), and the system's explanation of the anomalies (`explanations`) when it has one.

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
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import suites
from checkers import liveness, replicas
from checkers.compose import MERGED_KEYS, compose, merge_results
from checkers.coverage import fault_coverage
from checkers.coverage import warnings as coverage_warnings
from checkers.policy import Policy
from checkers.verdict import judge
from contracts import store
from contracts.errors import InputError
from contracts.history import ReadStats, read_events
from contracts.pairing import NEMESIS, Pairing, same_line
from contracts.protocols import Workload
from harness import plots as hplots
from harness.report import write_report
from suites.base import RunFacts


class HistoryScan:
    """One validated pass over a history (`read_events`), paired by `contracts.pairing`.

    Iterating yields the events, so another consumer (the liveness check) reads the same
    pass; `nemesis` collects the nemesis events (the policy reads them) and `summary()`
    gives results.json's `history`: events, torn lines, ok/fail/info completions and the
    invokes never completed. Each pass starts afresh; `drain()` completes one unless a pass
    was completed. A malformed or badly paired history raises `InputError`.
    """

    def __init__(self, path: Path):
        self.path = path
        self.complete = False
        self._start()

    def _start(self) -> None:
        self.read = ReadStats()
        self.nemesis: list[dict[str, Any]] = []
        self.pairing = Pairing(str(self.path), same_line)
        self.completed = {"ok": 0, "fail": 0, "info": 0}

    def __iter__(self) -> Iterator[dict[str, Any]]:
        self._start()
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
        self.complete = True

    def drain(self) -> None:
        if not self.complete:
            for _ in self:
                pass

    def summary(self) -> dict[str, Any]:
        st = self.read
        return {"events": st.events, "dropped_lines": st.dropped, "dropped_reason": st.dropped_reason,
                "never_completed": len(self.pairing.open), **self.completed}


class RunInputs:
    """One run's inputs for its checkers (`checkers.compose.Run`): `events()` is the shared
    validated pass (`HistoryScan`); `policy` is the system's loss rules for the run, which
    read that pass's faults, so the first to ask completes the pass if no checker read it."""

    def __init__(self, run_dir: Path, test: Mapping[str, Any], options: Mapping[str, Any], *,
                 system: Any, keys: Sequence[str], time_limit: float | None):
        self.run_dir = run_dir
        self.history_path = run_dir / "history.jsonl"
        self.scan = HistoryScan(self.history_path)
        self.test, self.options, self.system, self.keys = test, options, system, keys
        self.time_limit = time_limit
        self.incomplete = stopped_early(test)

    def events(self) -> HistoryScan:
        return self.scan

    @cached_property
    def policy(self) -> Policy:
        self.scan.drain()  # raises InputError for a malformed history
        return self.system.loss_rules(RunFacts(self.options, self.scan.nemesis, self.keys, self.incomplete,
                                               self.run_dir, self.test))


def stopped_early(test: Mapping[str, Any]) -> bool:
    """Whether the run stopped before its read-back ended, so that an acknowledged record may
    just not have been polled: no end recorded (the harness was killed), or an error
    (interrupted, a crash) before the last phase (`final`, or `heal` for a workload without
    a read-back) was timed."""
    if not test or test.get("end") is None:
        return True
    return bool(test.get("error")) and not {"final", "heal"} & set(test.get("timings") or {})


class WorkloadCheck:
    """The workload's checker (`analyze`) as a `contracts.protocols.Checker`; keeps what the plots
    draw from (`plots`, None until checked)."""

    def __init__(self, wl: Workload):
        self.wl = wl
        self.plots: Any = None

    def check(self, run: RunInputs) -> dict[str, Any]:
        checked = self.wl.analyze(run.history_path, run.time_limit)
        self.plots = checked.plots
        return dict(checked.result)


@dataclass
class LivenessCheck:
    """`checkers.liveness` as a `contracts.protocols.Checker`, over the run's shared pass."""

    keys: Sequence[str]
    bound_s: float

    def check(self, run: RunInputs) -> dict[str, Any]:
        return liveness.check(run.events(), keys=self.keys, bound_s=self.bound_s)


class ReplicaCheck:
    """`checkers.replicas` (replicas that disagree on a committed record) as a
    `contracts.protocols.Checker`, over the nemesis events of the run's shared pass."""

    def check(self, run: RunInputs) -> dict[str, Any]:
        scan = run.events()
        scan.drain()
        return replicas.check(scan.nemesis)


@dataclass
class CheckedRun:
    """A checked run: the results (as written to results.json) and the checker's analysis the
    plots draw from (`checkers.queue.QueueAnalysis` for the queue workload, else None)."""

    results: dict[str, Any]
    analysis: Any = None


def check_run(run_dir: Path, *, workload: str | None = None, time_limit: float | None = None) -> CheckedRun:
    """Run the workload's checkers on the run's history, judge it, and write results.json."""
    run_dir = Path(run_dir)
    if not (run_dir / "history.jsonl").is_file():
        raise InputError("no history.jsonl in this run folder", str(run_dir))
    test = store.read_json(run_dir / "test.json") or {}
    options = dict(test.get("options") or {})
    try:
        system = suites.get(options.get("db") or suites.DEFAULT)
        wl = system.make_workload(workload or options.get("workload") or system.default_workload, options)
    except ValueError as e:
        raise InputError(str(e), str(run_dir / "test.json")) from None
    options["workload"] = wl.name
    run = RunInputs(run_dir, test, options, system=system, keys=wl.keys, time_limit=time_limit)
    main = WorkloadCheck(wl)
    # liveness first: it reads the shared pass, which the workload's policy then finds complete
    beside: dict[str, Any] = {"liveness": LivenessCheck(wl.keys, wl.opts.recovery_time_limit)} if wl.checks_recovery else {}
    beside["replicas"] = ReplicaCheck()
    t0 = time.monotonic()
    composed = compose({**beside, wl.checker: main}).check(run)
    verdict = judge({n: composed[n] for n in (*beside, wl.checker)}, run.policy, run_error=test.get("error"))
    results, beside_results = flatten(composed, wl.checker)
    verdict.write_into(results, run.policy)
    if test.get("error"):
        results["run_error"] = test["error"]
    results["checker"] = wl.checker
    results["history"] = run.scan.summary()
    results["faults"] = fault_coverage(run.scan.nemesis)
    warnings = coverage_warnings(results["faults"])
    if test.get("mix_unplayed"):
        warnings.append(f"the default mix's first round did not finish before the workload's overtime ran out: "
                        f"{', '.join(test['mix_unplayed'])} never played")
    if warnings:
        results["warnings"] = warnings
    results["check_seconds"] = round(time.monotonic() - t0, 3)
    results["checked_at"] = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    if results["history"]["dropped_lines"] or run.incomplete:
        results["incomplete_run"] = True
    results.update(beside_results)  # under their names: `liveness`
    if results.get("anomaly_types") and (why := system.explain(run_dir, results, test)) is not None:
        results["explanations"] = why
    store.write_json(run_dir / "results.json", results)
    return CheckedRun(results, main.plots)


def flatten(composed: Mapping[str, Any], main: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """results.json's layout of a composed check (`checkers.compose`): (the `main` checker's
    result with the merged verdict and anomalies, its own anomaly types first; every other
    part by name, without its anomalies, which are merged into the first)."""
    others = [name for name in composed if name not in (main, *MERGED_KEYS)]
    results = {**composed[main], **merge_results({main: composed[main], **{n: composed[n] for n in others}})}
    parts = {name: {k: v for k, v in composed[name].items() if k not in MERGED_KEYS or k == "valid"}
             for name in others}
    return results, parts


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
