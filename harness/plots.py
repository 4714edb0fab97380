"""Pictures of a run into `plots/`: the checkers' plots and the timeline.

`write_all(run_dir, results, test)` calls `checkers.plots.write_plots` (latency, rate,
realtime lag, unseen, and clock-skew.png from the nemesis's clock events) with the fault
colours of the run's nemesis packages, and `checkers.timeline.write_timeline`
(plots/timeline.html). Returns the problems met; never raises (a missing picture must not
cost the verdict).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any


def fault_colors(options: Mapping[str, Any]) -> dict[str, str]:
    """Fault kind -> colour for the run's nemesis packages."""
    colors: dict[str, str] = {}
    try:
        from harness.faults import fault_packages

        for p in fault_packages(list(options.get("nemesis") or []), {"t": 1}):
            colors[p.name] = p.color
    except Exception:  # noqa: BLE001 - unknown packages keep the checkers' defaults
        pass
    return colors


def write_all(run_dir: Path, results: Mapping[str, Any], test: Mapping[str, Any]) -> list[str]:
    run_dir = Path(run_dir)
    out = run_dir / "plots"
    out.mkdir(exist_ok=True)
    hist = run_dir / "history.jsonl"
    colors = fault_colors(test.get("options") or {})
    problems: list[str] = []
    try:
        from checkers.plots import write_plots

        write_plots(hist, out, colors=colors)
    except Exception as e:  # noqa: BLE001
        problems.append(f"plots: {type(e).__name__}: {e}")
    try:
        from checkers.timeline import write_timeline

        write_timeline(hist, out / "timeline.html", title=f"Timeline: {test.get('run_id') or run_dir.name}")
    except Exception as e:  # noqa: BLE001
        problems.append(f"timeline: {type(e).__name__}: {e}")
    return problems
