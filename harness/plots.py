"""Pictures of a run into `plots/`: the checkers' plots and the timeline.

`write_all(run_dir, results, test)` calls `checkers.plots.write_plots` (latency, rate,
realtime lag, unseen, clock skew) with the fault colours of the run's nemesis packages, and
`checkers.timeline.write_timeline` (plots/timeline.html). When no clock-skew.png came out
of it but the nemesis recorded clock offsets (`nemesis/clock.py` writes them under
`clock-offsets`), `clock_plot` draws it. Returns the problems met; never raises (a missing
picture must not cost the verdict).
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
    if not (out / "clock-skew.png").exists():
        try:
            clock_plot(hist, out / "clock-skew.png", colors)
        except Exception as e:  # noqa: BLE001
            problems.append(f"clock plot: {type(e).__name__}: {e}")
    try:
        from checkers.timeline import write_timeline

        write_timeline(hist, out / "timeline.html", title=f"Timeline: {test.get('run_id') or run_dir.name}")
    except Exception as e:  # noqa: BLE001
        problems.append(f"timeline: {type(e).__name__}: {e}")
    return problems


CLOCK_KEYS = ("clock-offsets", "clock_offsets", "offsets")


def clock_offsets(ev: Mapping[str, Any]) -> dict[str, float] | None:
    """node -> clock offset (s) recorded by a nemesis event, if it carries any."""
    v = ev.get("value")
    if not isinstance(v, Mapping):
        return None
    for k in CLOCK_KEYS:
        m = v.get(k)
        if isinstance(m, Mapping):
            try:
                return {str(n): float(o) for n, o in m.items()}
            except (TypeError, ValueError):
                return None
    return None


def clock_plot(hist: Path, out: Path, colors: Mapping[str, str]) -> bool:
    """Clock offset per node over time (steps), clock fault windows shaded; False and no file
    when the history has no clock offsets."""
    from harness.history import fault_windows, read_events

    series: dict[str, list[tuple[float, float]]] = {}
    nem: list[dict[str, Any]] = []
    end = 0.0
    for ev in read_events(hist):
        end = max(end, ev["time"] / 1e9)
        if ev["process"] != "nemesis":
            continue
        nem.append(ev)
        for node, o in (clock_offsets(ev) or {}).items():
            series.setdefault(node, []).append((ev["time"] / 1e9, o))
    if not series:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10, 3.6), dpi=90)
    for w in fault_windows(nem):
        ax.axvspan(w.start / 1e9, (w.stop / 1e9) if w.stop is not None else end,
                   color=colors.get(w.kind, "#A0E9E3"), alpha=0.4, lw=0)
    for node in sorted(series):
        pts = sorted(series[node]) + [(end, sorted(series[node])[-1][1])]
        ax.step([p[0] for p in pts], [p[1] for p in pts], where="post", lw=1.3, label=node)
    ax.set_title("Clock offsets per node")
    ax.set_xlabel("time (s)")
    ax.set_ylabel("offset (s)")
    ax.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)
    return True
