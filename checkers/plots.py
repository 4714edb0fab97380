"""The plots people read first: PNGs (matplotlib, Agg) with fault windows shaded.

`write_plots(history_path, out_dir, *, analysis=None, colors=None)` writes, into `out_dir`:

- `latency-raw.png`: latency of every completed op over time (log scale), one colour per
  outcome (ok / fail / info), one marker per f;
- `latency-quantiles.png`: p50 / p95 / p99 / max latency of completed ops per time bucket, per f
  (crash ops left out);
- `rate.png`: completions per second per time bucket, per f and outcome;
- `realtime-lag.png`: for queue histories, the realtime lag of each acknowledged send (ack to
  the completion of the first poll returning it) against its ack time, with the max per bucket;
- `unseen.png`: for queue histories, acknowledged sends not yet returned by any poll, over time;
- `clock-skew.png`: when the nemesis sampled clocks, each node's offset over time (steps).
  A sample is a nemesis event whose `f` ends in `-clock` (`start-clock`, `stop-clock`,
  `check-clock`) with `value["clock-offsets"]`: node -> offset in seconds (faked minus real),
  as `nemesis/clock.py` records them (docs/nemesis.md, "Clock skew").

Every time axis is seconds since the history started; fault windows (start-X/stop-X,
kill/start, pause/resume nemesis events) are shaded with one legend entry per fault kind,
and other nemesis events (clock samples and `cluster-state` observations aside) are thin
dashed lines. `analysis` (a `checkers.queue.QueueAnalysis`, e.g. the one the check made) avoids analysing the history
again; without it the file is read and, for queue histories, analysed once. Series with more than
`max_points` points are thinned for drawing (every failure and indeterminate op is kept).
Returns the names of the plots written.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from checkers.files import looks_like_queue
from checkers.queue import analyze_file
from checkers.queue.analysis import QueueAnalysis
from checkers.queue.reader import EventFile
from checkers.stats import op_table
from contracts.history import FAULT_COLORS, fault_windows

EXTRA_COLORS = ("#F2C6DE", "#C6DEF1", "#DBCDF0", "#FAEDCB", "#C9E4DE", "#F7D9C4")
TYPE_COLORS = {"ok": "#2F7FD8", "fail": "#E8579A", "info": "#F29A1F"}
F_MARKERS = ("o", "x", "s", "^", "v", "D", "+")
QUANTILES = ((0.5, "p50"), (0.95, "p95"), (0.99, "p99"), (1.0, "max"))
BUCKETS = 200
NOT_LATENCY = frozenset({"crash"})  # the workload killing its own client: no latency to speak of


def write_plots(history_path: str | os.PathLike[str], out_dir: str | os.PathLike[str], *,
                analysis: Any = None, colors: Mapping[str, str] | None = None, max_points: int = 150_000,
                **_ignored: Any) -> list[str]:
    """Write the plots of one history into `out_dir` (see the module docstring)."""
    # lazy: matplotlib takes ~0.3 s (only plotting needs it), and Agg must be chosen before pyplot loads
    import matplotlib

    matplotlib.use("Agg")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    an = analysis if analysis is not None else _load(os.fspath(history_path))

    ctx = _Context(an, fault_windows(an.nemesis), dict(FAULT_COLORS, **(colors or {})), max_points)
    written = []
    for name, fn in (("latency-raw", _latency_raw), ("latency-quantiles", _latency_quantiles),
                     ("rate", _rate), ("realtime-lag", _realtime_lag), ("unseen", _unseen),
                     ("clock-skew", _clock_skew)):
        if fn(ctx, out / f"{name}.png"):
            written.append(name)
    return written


def _load(path: str) -> Any:
    """An analysis-like object for any history: the queue checker's for queue histories."""
    if looks_like_queue(path):
        return analyze_file(path)

    ef = EventFile(path)
    tab, nemesis, last = op_table(ef, path, ef.line_of)
    return QueueAnalysis(result={}, table=tab, nemesis=nemesis, last_time=last)


class _Context:
    def __init__(self, an: Any, windows: list[Any], colors: dict[str, str], max_points: int):
        self.an = an
        self.windows = windows
        self.colors = colors
        self.max_points = max_points
        cols = an.table.columns()
        self.cols = cols
        t1 = cols["t1"][cols["done"]]
        self.end_ns = float(max(an.last_time, t1.max() if t1.size else 0,
                                max((e.get("time", 0) for e in an.nemesis), default=0)))
        self.end_s = self.end_ns / 1e9
        self.f_names = list(an.table.f_names)
        self.done = cols["done"]
        self.np = np

    def figure(self, title: str, ylabel: str, height: float = 4.2) -> tuple[Any, Any]:
        # lazy: pyplot takes ~0.8 s, after matplotlib.use("Agg") in write_plots
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(11, height), dpi=100)
        ax.set_title(title, fontsize=11)
        ax.set_xlabel("time (s)")
        ax.set_ylabel(ylabel)
        ax.set_xlim(0, max(self.end_s, 1e-9) * 1.01)
        ax.grid(True, alpha=0.25, lw=0.5)
        return fig, ax

    def shade(self, ax: Any) -> None:
        """Fault windows as shaded spans (one legend entry per kind), other nemesis events as lines."""
        seen: set[str] = set()
        extra = iter(EXTRA_COLORS * 10)
        in_window: set[int] = set()
        for w in self.windows:
            color = self.colors.get(w.kind)
            if color is None:
                color = self.colors[w.kind] = next(extra)
            stop = (w.stop if w.stop is not None else self.end_ns) / 1e9
            ax.axvspan(w.start / 1e9, stop, color=color, alpha=0.5, lw=0, zorder=0,
                       label=None if w.kind in seen else w.kind)
            seen.add(w.kind)
            in_window.add(id(w.start_event))
            if w.stop_event is not None:
                in_window.add(id(w.stop_event))
        marked: set[str] = set()
        for ev in self.an.nemesis:
            if (ev.get("type") == "invoke" or id(ev) in in_window or _clock_sample(ev) is not None
                    or ev.get("f") == "cluster-state"):  # observations (nemesis.observer), not faults
                continue
            f = str(ev.get("f"))
            ax.axvline(ev.get("time", 0) / 1e9, color="#888888", ls="--", lw=0.8, zorder=0,
                       label=None if f in marked else f)
            marked.add(f)

    def save(self, fig: Any, ax: Any, path: Path, legend: bool = True) -> bool:
        # lazy: pyplot: see figure()
        import matplotlib.pyplot as plt

        if legend:
            handles, labels = ax.get_legend_handles_labels()
            if handles:
                ax.legend(loc="upper left", bbox_to_anchor=(1.005, 1.0), fontsize=8, markerscale=2,
                          frameon=False)
        fig.tight_layout()
        fig.savefig(path)
        plt.close(fig)
        return True

    def thin(self, idx: Any) -> Any:
        """At most max_points of the given indices, evenly spaced."""
        n = idx.size
        if n <= self.max_points:
            return idx
        step = n / self.max_points
        return idx[(self.np.arange(self.max_points) * step).astype(self.np.int64)]

    def buckets(self, n: int = BUCKETS) -> tuple[Any, float]:
        """Edges of about `n` buckets in seconds over the run, and their width."""
        np = self.np
        width = max(self.end_s / n, 1e-3)
        n = max(1, int(np.ceil(self.end_s / width)))
        return np.arange(n + 1) * width, width


def _latency_raw(ctx: _Context, path: Path) -> bool:
    np = ctx.np
    c = ctx.cols
    if not ctx.done.any():
        return False
    fig, ax = ctx.figure("Latency of every op", "latency (ms)")
    ctx.shade(ax)
    x = c["t0"] / 1e9
    y = np.maximum(c["t1"] - c["t0"], 1) / 1e6
    for code, f in enumerate(ctx.f_names):
        for tcode, tname in ((0, "ok"), (2, "fail"), (1, "info")):
            sel = np.nonzero(ctx.done & (c["f"] == code) & (c["type"] == tcode))[0]
            if not sel.size:
                continue
            if tname == "ok":
                sel = ctx.thin(sel)
            ax.plot(x[sel], y[sel], ls="", marker=F_MARKERS[code % len(F_MARKERS)], ms=2.2, mew=0.6,
                    alpha=0.55, color=TYPE_COLORS[tname], label=f"{f} {tname}", rasterized=True)
    ax.set_yscale("log")
    return ctx.save(fig, ax, path)


def _latency_quantiles(ctx: _Context, path: Path) -> bool:
    np = ctx.np
    c = ctx.cols
    if not ctx.done.any():
        return False
    # coarser buckets than the rate plot: a quantile needs a few dozen ops per bucket
    edges, width = ctx.buckets(max(10, min(BUCKETS // 2, int(ctx.done.sum()) // 60)))
    fig, ax = ctx.figure("Latency quantiles (completed ops)", "latency (ms)")
    ctx.shade(ax)
    styles = ("-", "--", ":", "-.")
    cmap = _palette(len(ctx.f_names))
    for code, f in enumerate(ctx.f_names):
        if f in NOT_LATENCY:
            continue
        sel = ctx.done & (c["f"] == code)
        if not sel.any():
            continue
        t = c["t1"][sel] / 1e9
        lat = np.maximum(c["t1"][sel] - c["t0"][sel], 1) / 1e6
        b = np.minimum((t / width).astype(np.int64), edges.size - 2)
        order = np.argsort(b, kind="stable")
        b, lat = b[order], lat[order]
        starts = np.searchsorted(b, np.arange(edges.size - 1))
        stops = np.append(starts[1:], b.size)
        mids = (edges[:-1] + edges[1:]) / 2
        for (q, qname), ls in zip(QUANTILES, styles, strict=True):
            xs, ys = [], []
            for i in range(mids.size):
                if stops[i] > starts[i]:
                    xs.append(mids[i])
                    ys.append(np.quantile(lat[starts[i]:stops[i]], q))
            if xs:
                ax.plot(xs, ys, ls=ls, lw=1.1, color=cmap[code], label=f"{f} {qname}")
    ax.set_yscale("log")
    return ctx.save(fig, ax, path)


def _rate(ctx: _Context, path: Path) -> bool:
    np = ctx.np
    c = ctx.cols
    if not ctx.done.any():
        return False
    edges, width = ctx.buckets()
    fig, ax = ctx.figure("Throughput (completions per second)", "ops/s")
    ctx.shade(ax)
    styles = {"ok": "-", "fail": "--", "info": ":"}
    cmap = _palette(len(ctx.f_names))
    mids = (edges[:-1] + edges[1:]) / 2
    for code, f in enumerate(ctx.f_names):
        for tcode, tname in ((0, "ok"), (2, "fail"), (1, "info")):
            sel = ctx.done & (c["f"] == code) & (c["type"] == tcode)
            if not sel.any():
                continue
            counts, _ = np.histogram(c["t1"][sel] / 1e9, bins=edges)
            ax.plot(mids, counts / width, ls=styles[tname], lw=1.1, color=cmap[code], label=f"{f} {tname}")
    ax.set_ylim(bottom=0)
    return ctx.save(fig, ax, path)


def _realtime_lag(ctx: _Context, path: Path) -> bool:
    np = ctx.np
    if not getattr(ctx.an, "ack_t", None):
        return False
    ts, lags, _keys = ctx.an.lag_points()
    if not ts:
        return False
    t = np.asarray(ts, dtype=np.float64) / 1e9
    lag = np.asarray(lags, dtype=np.float64) / 1e9
    fig, ax = ctx.figure("Realtime lag: ack of a send to the first poll returning it", "lag (s)")
    ctx.shade(ax)
    sel = ctx.thin(np.argsort(t, kind="stable"))
    ax.plot(t[sel], lag[sel], ls="", marker=".", ms=1.5, alpha=0.35, color="#2F7FD8", label="sends",
            rasterized=True)
    edges, width = ctx.buckets()
    b = np.minimum((t / width).astype(np.int64), edges.size - 2)
    mx = np.full(edges.size - 1, np.nan)
    np.fmax.at(mx, b, lag)
    mids = (edges[:-1] + edges[1:]) / 2
    ok = ~np.isnan(mx)
    ax.plot(mids[ok], mx[ok], color="#C62828", lw=1.2, label="max per bucket")
    ax.set_ylim(bottom=0)
    return ctx.save(fig, ax, path)


def _unseen(ctx: _Context, path: Path) -> bool:
    if not getattr(ctx.an, "ack_t", None):
        return False
    times, counts = ctx.an.unseen_series()
    if not times:
        return False
    xs = [0.0] + [t / 1e9 for t in times] + [ctx.end_s]
    ys = [0] + counts + [counts[-1]]
    fig, ax = ctx.figure("Unseen: acknowledged sends no poll has returned yet", "sends")
    ctx.shade(ax)
    ax.step(xs, ys, where="post", color="#6A1B9A", lw=1.2, label="unseen")
    ax.fill_between(xs, ys, step="post", color="#6A1B9A", alpha=0.15)
    ax.set_ylim(bottom=0)
    return ctx.save(fig, ax, path)


def _clock_skew(ctx: _Context, path: Path) -> bool:
    series: dict[str, list[tuple[float, float]]] = {}
    for ev in ctx.an.nemesis:
        offs = _clock_sample(ev)
        if offs:
            for node, o in offs.items():
                series.setdefault(node, []).append((ev.get("time", 0) / 1e9, o))
    if not series:
        return False
    fig, ax = ctx.figure("Clock offsets per node", "offset (s)", height=3.6)
    ctx.shade(ax)
    for node in sorted(series):
        pts = sorted(series[node]) + [(ctx.end_s, sorted(series[node])[-1][1])]
        ax.step([p[0] for p in pts], [p[1] for p in pts], where="post", lw=1.3, label=node)
    return ctx.save(fig, ax, path)


CLOCK_OFFSETS = "clock-offsets"  # the key nemesis/clock.py records its samples under


def _clock_sample(ev: Mapping[str, Any]) -> dict[str, float] | None:
    """node -> offset (s) of a clock event (see the module docstring), else None."""
    v = ev.get("value")
    if not str(ev.get("f", "")).endswith("-clock") or not isinstance(v, Mapping):
        return None
    m = v.get(CLOCK_OFFSETS)
    if not isinstance(m, Mapping):
        return None
    try:
        return {str(n): float(o) for n, o in m.items()}
    except (TypeError, ValueError):
        return None


def _palette(n: int) -> list[str]:
    base = ["#1565C0", "#2E7D32", "#AD1457", "#EF6C00", "#6A1B9A", "#00838F", "#4E342E", "#9E9D24"]
    return [base[i % len(base)] for i in range(max(n, 1))]
