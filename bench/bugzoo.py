"""The bug zoo's detection power: each cell of campaigns/bugzoo.yaml run N times.

Runs the cells through `harness.campaign.run_campaign` (real local clusters: root) and
prints one row per cell:

- detected: runs that met the cell's expectation / N (`harness.campaign.run_meets`: invalid
  for a safeguard switched off, an anomaly found for acks=1 / min ISR 1 / unclean election,
  valid for the safe configuration);
- first anomaly: the median, over the runs that found an anomaly, of the checker's
  `first_anomaly_time` (when the history first witnessed an anomaly, allowed or not: the
  lossy cells expect allowed ones), in seconds from the start of the workload, with how many
  runs it is taken over;
- wall: the median wall time of one run (setup, workload, heal, final read, teardown, check);
- the verdicts, the anomaly types seen, and the load average when the cell's last run
  finished (2 shared cores: figures are noisy).

    flock /tmp/wrack-e2e.lock .venv/bin/python bench/bugzoo.py [--runs 3] [--cells elr,acks=1]
        [--time-limit S] [--file campaigns/bugzoo.yaml] [--out DIR] [--json]
        [--workers N [--worker-cores C] | --master URL]

`--workers N` runs the campaign as Spark tasks (harness/spark_campaign.py) on a standalone
cluster of N workers of C cores (default 1) it starts on this host (harness/spark_standalone.py)
and stops at the end; `--master URL` on a running one; `--tests-per-host N` caps the tests
at once on a host. The last line gives the campaign's
wall time (start to results) with the load average, to compare with the sequential run.

`--cells`: comma list; a number picks the cell with that 1-based number, any other item the
cells whose label (as `wrack campaign --list` prints it) contains it. `--out DIR` keeps the
campaign folder (runs, summary.html, junit.xml) under DIR; without it a temporary folder
is used and removed.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from contracts.errors import EXIT_BAD_INPUT, InputError  # noqa: E402
from harness import campaign as C  # noqa: E402
from harness.options import SPEC  # noqa: E402


def loadavg() -> str:
    try:
        return open("/proc/loadavg").read().split()[0]
    except OSError:
        return "?"


def pick(cells: list[C.Cell], wanted: str | None) -> list[C.Cell]:
    """The cells `--cells` names (every cell without it); InputError for an item matching none."""
    if not wanted:
        return cells
    out: list[C.Cell] = []
    for item in (x.strip() for x in wanted.split(",") if x.strip()):
        hits = [c for i, c in enumerate(cells, 1) if (item == str(i) if item.isdigit() else item in c.label())]
        if not hits:
            raise InputError(f"--cells: {item!r} matches no cell (see wrack campaign FILE --list)")
        out += [c for c in hits if c not in out]
    return out


def median(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None


def cell_row(cell: dict[str, Any], load: str) -> dict[str, Any]:
    """The figures of one cell of a campaign's results."""
    runs = cell["runs"]
    times = [r["first_anomaly_time"] / 1e9 for r in runs if r.get("first_anomaly_time") is not None]
    return {"cell": cell["label"], "expect": cell["expect"], "runs": len(runs),
            "detected": sum(C.run_meets(cell["expect"], r) for r in runs),
            "first_anomaly_s": median(times), "first_anomaly_runs": len(times),
            "wall_s": median([r["wall_s"] for r in runs]),
            "verdicts": [r["verdict"] for r in runs],
            "anomaly_types": sorted({t for r in runs for t in r["anomaly_types"]}), "load": load}


def fmt(x: float | None, spec: str = ".1f") -> str:
    return "-" if x is None else format(x, spec)


def print_table(rows: list[dict[str, Any]]) -> None:
    w = max(len(r["cell"]) for r in rows)
    print(f"{'cell':{w}s}  {'expect':7s}  detected  first anomaly (median s, runs)  wall (median s)  "
          f"load  verdicts; anomaly types")
    for r in rows:
        first = f"{fmt(r['first_anomaly_s'])} ({r['first_anomaly_runs']})"
        print(f"{r['cell']:{w}s}  {r['expect']:7s}  {r['detected']:>3d}/{r['runs']:<4d}  {first:>30s}  "
              f"{fmt(r['wall_s']):>15s}  {r['load']:>4s}  {','.join(r['verdicts'])}; "
              f"{', '.join(r['anomaly_types']) or 'none'}", flush=True)
    full = sum(r["detected"] == r["runs"] for r in rows)
    print(f"{full}/{len(rows)} cells met their expectation in every run; "
          f"{sum(r['detected'] for r in rows)}/{sum(r['runs'] for r in rows)} runs", flush=True)


def on_spark(a: argparse.Namespace, spec: C.CampaignSpec, out_root: str, overrides: Any,
             loads: dict[str, str]) -> tuple[Path, dict[str, Any]]:
    """The campaign as Spark tasks, on `--master` or on a standalone cluster of `--workers`."""
    from contextlib import nullcontext

    from harness.progress import Progress
    from harness.spark_campaign import run_spark_campaign
    from harness.spark_standalone import standalone

    def on_run(cell: C.Cell, rep: int, rec: dict[str, Any]) -> None:
        loads[cell.key] = loadavg()
        t = rec.get("first_anomaly_time")
        print(f"  {cell.label()} #{rep + 1}: {rec['verdict']} {','.join(rec['anomaly_types']) or '-'}"
              f"{f' first anomaly {t / 1e9:.1f} s' if t is not None else ''}{' (retried)' if rec['retried'] else ''}"
              f"{'; error ' + rec['error'] if rec.get('error') else ''}  {rec.get('host')}, {rec['wall_s']:.0f} s, "
              f"load {loadavg()}", file=sys.stderr, flush=True)

    cluster = standalone(workers=a.workers, cores=a.worker_cores) if a.workers else nullcontext(None)
    with cluster as sc:
        master = sc.url if sc is not None else a.master
        print(f"on Spark {master}" + (f" ({a.workers} workers of {a.worker_cores} core(s) on this host)"
                                      if sc is not None else ""), file=sys.stderr, flush=True)
        return run_spark_campaign(spec, master=master, root=out_root, overrides=overrides, on_run=on_run,
                                  progress=Progress(enabled=True, live=False), per_host=a.tests_per_host)


def run(a: argparse.Namespace, out_root: str) -> list[dict[str, Any]]:
    from harness.progress import Progress
    from harness.runner import run_test

    spec = C.load_spec(a.file)
    spec.cells = pick(spec.cells, a.cells)
    spec.repeats = a.runs
    overrides = SPEC.from_mapping({"time_limit": a.time_limit} if a.time_limit else {}, "--time-limit")
    quiet = Progress(enabled=False)
    loads: dict[str, str] = {}
    t0 = time.monotonic()
    if a.workers or a.master:
        cdir, results = on_spark(a, spec, out_root, overrides, loads)
        return finish(a, cdir, results, loads, t0)

    def runner(o: Any, campaign: dict[str, Any] | None = None) -> Any:
        return run_test(o, quiet, campaign=campaign)

    def on_run(cell: C.Cell, rep: int, out: Any) -> None:
        loads[cell.key] = loadavg()
        res = out.results or {}
        t = res.get("first_anomaly_time")
        print(f"  {cell.label()} #{rep + 1}: {C.verdict_of(out.valid, out.results is None)}"
              f" {','.join(res.get('anomaly_types') or []) or '-'}"
              f"{f' first anomaly {t / 1e9:.1f} s' if t is not None else ''}"
              f"{'; error ' + out.error if out.error else ''}  load {loadavg()}", file=sys.stderr, flush=True)

    cdir, results = C.run_campaign(spec, root=out_root, overrides=overrides, runner=runner, on_run=on_run)
    return finish(a, cdir, results, loads, t0)


def finish(a: argparse.Namespace, cdir: Path, results: dict[str, Any], loads: dict[str, str],
           t0: float) -> list[dict[str, Any]]:
    wall = time.monotonic() - t0
    if a.out:
        print(f"campaign folder: {cdir}", file=sys.stderr)
    runs = [r for c in results["cells"] for r in c["runs"]]
    print(f"campaign wall time: {wall:.0f} s for {len(runs)} runs ({sum(r['wall_s'] for r in runs):.0f} s of runs; "
          f"{sum(bool(r.get('retried')) for r in runs)} retried); load average {loadavg()} at the end",
          file=sys.stderr, flush=True)
    return [cell_row(c, loads.get(c["key"], "?")) for c in results["cells"]]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3, help="runs per cell (default 3)")
    ap.add_argument("--cells", default=None, help="comma list of cell numbers or label parts (default all)")
    ap.add_argument("--time-limit", type=float, default=None, metavar="S",
                    help="seconds of workload and faults per run (default: the file's, i.e. wrack test's)")
    ap.add_argument("--file", default=str(ROOT / "campaigns" / "bugzoo.yaml"))
    ap.add_argument("--out", default=None, metavar="DIR", help="keep the campaign folder under DIR")
    ap.add_argument("--json", action="store_true", help="print the rows as JSON lines too")
    ap.add_argument("--workers", type=int, default=0, metavar="N",
                    help="run as Spark tasks on N workers started on this host (harness/spark_standalone.py)")
    ap.add_argument("--worker-cores", type=int, default=1, metavar="C", help="cores per worker (default 1)")
    ap.add_argument("--master", default=None, metavar="URL", help="run as Spark tasks on this master")
    ap.add_argument("--tests-per-host", type=int, default=None, metavar="N",
                    help="with Spark: at most N tests at once on a host (default: one per 2 of its cores; "
                         "harness/campaign_task.py host_slot)")
    a = ap.parse_args()
    try:
        if a.runs < 1:
            raise InputError(f"--runs: {a.runs} must be at least 1")
        print(f"bug zoo: {a.file}, {a.runs} run(s) per cell, load average {loadavg()} at the start",
              file=sys.stderr, flush=True)
        if a.out:
            rows = run(a, a.out)
        else:
            with tempfile.TemporaryDirectory(prefix="wrack-bugzoo-") as d:
                rows = run(a, d)
    except InputError as e:
        print(f"bugzoo: error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    print_table(rows)
    if a.json:
        for r in rows:
            print(json.dumps(r))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    sys.exit(main())
