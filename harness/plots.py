"""Pictures of a run into `plots/`: the checkers' plots and timeline, plus the clock plot.

`write_all(run_dir, results, test)` calls the checkers' plotting (`checkers.plots`: latency,
rate, lag, unseen; `checkers.timeline`: plots/timeline.html) when that part is installed,
falls back to a latency plot of its own otherwise, and draws `clock-skew.png` from the
nemesis's clock events (any nemesis event whose value carries `offsets` or
`clock_offsets`: node -> seconds). Fault windows are shaded in the package colours.
Returns the problems met; never raises.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.history import fault_windows, read_events

DEFAULT_COLORS = {"partition": "#E9DCA0", "kill": "#E9A4A0", "pause": "#A0B1E9", "clock": "#A0E9E3",
                  "power-loss": "#C8A0E9", "corrupt": "#E9C8A0"}


def fault_colors(options: Mapping[str, Any]) -> dict[str, str]:
    """Fault kind -> colour for the run's nemesis packages (defaults for the rest)."""
    colors = dict(DEFAULT_COLORS)
    try:
        from harness.faults import fault_packages

        for p in fault_packages(list(options.get("nemesis") or []), {"t": 1}):
            colors[p.name] = p.color
    except Exception:  # noqa: BLE001 - unknown packages keep the defaults
        pass
    return colors


def _call(fn: Any, **kw: Any) -> Any:
    """Call `fn` with the keyword arguments it declares (the checkers' signatures may grow)."""
    params = inspect.signature(fn).parameters
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return fn(**kw)
    return fn(**{k: v for k, v in kw.items() if k in params})


def write_all(run_dir: Path, results: Mapping[str, Any], test: Mapping[str, Any]) -> list[str]:
    run_dir = Path(run_dir)
    out = run_dir / "plots"
    out.mkdir(exist_ok=True)
    hist = run_dir / "history.jsonl"
    options = test.get("options") or {}
    colors = fault_colors(options)
    problems: list[str] = []
    drew = False
    try:
        cp = importlib.import_module("checkers.plots")
        fn = getattr(cp, "write_plots", None) or getattr(cp, "plot_all", None)
        if fn is not None:
            _call(fn, history_path=hist, path=hist, history=hist, out_dir=out, plots_dir=out, results=results,
                  colors=colors, nemesis_colors=colors)
            drew = True
    except ModuleNotFoundError:
        pass
    except Exception as e:  # noqa: BLE001
        problems.append(f"checkers.plots: {type(e).__name__}: {e}")
    if not drew:
        try:
            latency_plot(hist, out / "latency-raw.png", colors)
        except Exception as e:  # noqa: BLE001
            problems.append(f"latency plot: {type(e).__name__}: {e}")
    try:
        tl = importlib.import_module("checkers.timeline")
        fn = getattr(tl, "write_timeline", None) or getattr(tl, "render_timeline", None)
        if fn is not None:
            _call(fn, history_path=hist, path=hist, history=hist, out_dir=out, out=out / "timeline.html",
                  out_path=out / "timeline.html", colors=colors)
    except ModuleNotFoundError:
        pass
    except Exception as e:  # noqa: BLE001
        problems.append(f"checkers.timeline: {type(e).__name__}: {e}")
    try:
        clock_plot(hist, out / "clock-skew.png", colors)
    except Exception as e:  # noqa: BLE001
        problems.append(f"clock plot: {type(e).__name__}: {e}")
    return problems


def _shade(ax: Any, nemesis_events: list[dict[str, Any]], colors: Mapping[str, str], end_s: float) -> None:
    seen: set[str] = set()
    for w in fault_windows(nemesis_events):
        stop = (w.stop if w.stop is not None else end_s * 1e9) / 1e9
        label = w.kind if w.kind not in seen else None
        seen.add(w.kind)
        ax.axvspan(w.start / 1e9, stop, color=colors.get(w.kind, "#DDDDDD"), alpha=0.45, label=label, lw=0)


def latency_plot(hist: Path, out: Path, colors: Mapping[str, str]) -> bool:
    """Latency of every completed op (log scale), coloured by outcome, faults shaded."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    nem: list[dict[str, Any]] = []
    invokes: dict[Any, dict[str, Any]] = {}
    pts: dict[str, list[tuple[float, float]]] = {"ok": [], "fail": [], "info": []}
    end = 0
    for ev in read_events(hist):
        end = max(end, ev["time"])
        if ev["process"] == "nemesis":
            nem.append(ev)
        elif ev["type"] == "invoke":
            invokes[ev["process"]] = ev
        else:
            inv = invokes.pop(ev["process"], None)
            if inv is not None:
                pts[ev["type"]].append((inv["time"] / 1e9, max(ev["time"] - inv["time"], 1) / 1e6))
    if not any(pts.values()):
        return False
    fig, ax = plt.subplots(figsize=(10, 4), dpi=90)
    _shade(ax, nem, colors, end / 1e9)
    for t, c in (("ok", "#2e7d32"), ("fail", "#ef6c00"), ("info", "#c62828")):
        if pts[t]:
            xs, ys = zip(*pts[t], strict=True)
            ax.scatter(xs, ys, s=4, c=c, label=t, alpha=0.7, lw=0)
    ax.set_yscale("log")
    ax.set_xlabel("time (s)")
    ax.set_ylabel("latency (ms)")
    ax.legend(loc="upper right", fontsize=8, markerscale=3)
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)
    return True


def clock_offsets(ev: Mapping[str, Any]) -> dict[str, float] | None:
    v = ev.get("value")
    if not isinstance(v, Mapping):
        return None
    for k in ("clock_offsets", "offsets"):
        if isinstance(v.get(k), Mapping):
            try:
                return {str(n): float(o) for n, o in v[k].items()}
            except (TypeError, ValueError):
                return None
    return None


def clock_plot(hist: Path, out: Path, colors: Mapping[str, str]) -> bool:
    """Clock offset per node over time (a step line per node) from the nemesis's clock events;
    False (and no file) when the run had none."""
    series: dict[str, list[tuple[float, float]]] = {}
    nem: list[dict[str, Any]] = []
    end = 0
    for ev in read_events(hist):
        end = max(end, ev["time"])
        if ev["process"] != "nemesis":
            continue
        nem.append(ev)
        offs = clock_offsets(ev)
        if offs:
            for node, o in offs.items():
                series.setdefault(node, []).append((ev["time"] / 1e9, o))
    if not series:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10, 3.5), dpi=90)
    _shade(ax, nem, colors, end / 1e9)
    for node in sorted(series):
        pts = series[node] + [(end / 1e9, series[node][-1][1])]
        xs, ys = zip(*pts, strict=True)
        ax.step(xs, ys, where="post", label=node)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("clock offset (s)")
    ax.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)
    return True
