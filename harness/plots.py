"""Pictures of a run into `plots/`: the checkers' plots and the timeline.

`write_all(run_dir, test, analysis=None)` calls `checkers.plots.write_plots` (latency, rate,
realtime lag, unseen, clock skew) with the fault colours of the run's nemesis packages (the
timeline's bands get the same) and,
when given, the checker's analysis of the history (`checkers.queue.QueueAnalysis`: the plots
are drawn from it instead of analysing the history a second time), then
`checkers.timeline.write_timeline` (plots/timeline.html), and for a run the linearizable
checker found invalid its counterexample (`write_counterexample`: plots/linearizability.html,
`checkers.linearizable.visualize`). Returns the problems met; never raises (a missing
picture must not cost the verdict).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import suites
from checkers.linearizable.check import analyse
from checkers.linearizable.visualize import write_html
from checkers.plots import write_plots
from checkers.timeline import write_timeline
from contracts import store
from contracts.history import read_events
from harness.faults import fault_packages

COUNTEREXAMPLE = "linearizability.html"  # in plots/: the linearizable checker's counterexample


def fault_colors(options: Mapping[str, Any]) -> dict[str, str]:
    """Fault kind -> colour for the run's nemesis packages, each package's own (empty for names
    no longer known: the checkers' default colours apply)."""
    try:
        system = suites.get(options.get("db") or suites.DEFAULT)
        return {p.name: p.color for p in fault_packages(list(options.get("nemesis") or []), system, {"t": 1})}
    except ValueError:
        return {}


def write_all(run_dir: Path, test: Mapping[str, Any], analysis: Any = None) -> list[str]:
    run_dir = Path(run_dir)
    out = run_dir / "plots"
    out.mkdir(exist_ok=True)
    hist = run_dir / "history.jsonl"
    colors = fault_colors(test.get("options") or {})
    problems: list[str] = []
    try:
        write_plots(hist, out, analysis=analysis, colors=colors)
    except Exception as e:  # noqa: BLE001
        problems.append(f"plots: {type(e).__name__}: {e}")
    try:
        write_timeline(hist, out / "timeline.html", title=f"Timeline: {test.get('run_id') or run_dir.name}",
                       colors=colors)
    except Exception as e:  # noqa: BLE001
        problems.append(f"timeline: {type(e).__name__}: {e}")
    try:
        write_counterexample(run_dir, out / COUNTEREXAMPLE)
    except Exception as e:  # noqa: BLE001
        problems.append(f"counterexample: {type(e).__name__}: {e}")
    return problems


def write_counterexample(run_dir: Path, target: Path) -> bool:
    """For a run whose results.json has the linearizable checker's invalid verdict, analyse
    its history again with the same model (the search stops at the first key that fails) and
    write the visualisation (each process's ops on a timeline, the longest linearization,
    the op that cannot follow it) to `target`; False (nothing written) for any other run."""
    results = store.read_json(run_dir / "results.json") or {}
    if results.get("checker") != "linearizable" or results.get("valid") is not False or not results.get("model"):
        return False
    a = analyse(read_events(run_dir / "history.jsonl"), results["model"])
    write_html(a, str(target), title=f"{run_dir.parent.name}/{run_dir.name}: {results['model']}")
    return True
