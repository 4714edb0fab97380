"""Pictures of a run into `plots/`: the checkers' plots and the timeline.

`write_all(run_dir, test, analysis=None)` calls `checkers.plots.write_plots` (latency, rate,
realtime lag, unseen, clock skew) with the fault colours of the run's nemesis packages (the
timeline's bands get the same) and,
when given, the checker's analysis of the history (`checkers.queue.QueueAnalysis`: the plots
are drawn from it instead of analysing the history a second time), then
`checkers.timeline.write_timeline` (plots/timeline.html). Returns the problems met; never
raises (a missing picture must not cost the verdict).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from checkers.plots import write_plots
from checkers.timeline import write_timeline
from harness.faults import fault_packages


def fault_colors(options: Mapping[str, Any]) -> dict[str, str]:
    """Fault kind -> colour for the run's nemesis packages (empty for names no longer known:
    the checkers' default colours apply)."""
    try:
        return {p.name: p.color for p in fault_packages(list(options.get("nemesis") or []), {"t": 1},
                                                         db=options.get("db") or "wrack")}
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
    return problems
