"""Benchmark of the Spark pipeline: ingest and check of a synthetic campaign, local[1] vs local[2].

    .venv/bin/python bench/pipeline.py                  # 200 runs, 10,000,000 ops (the issue's size)
    .venv/bin/python bench/pipeline.py --ops 2000000 --runs 40   # a quicker rerun
    .venv/bin/python bench/pipeline.py --data /tmp/camp --keep    # keep (and reuse) the generated runs

Generates the campaign with pipeline.synth (correct simulated Kafka queue histories, one
lost write planted in most acks=1 / min-ISR-1 / safeguard-off runs), then for each master
runs, in a fresh process (its own JVM), `ingest` into a new pipeline directory and
`check` of every run, and prints wall times, the phases of each (where the time goes),
the CPU the JVM's threads and the check's tasks used, and the load average before and
after. Then the single-process queue checker (checkers.queue.check_file) over the same
history files, in one process and in one process per core. Targets (issue 28): check on
local[2] within 1.5x of the single-process checker on as many processes, and at least
1.6x faster than on local[1]; both ratios are printed last. Figures are only comparable
on a quiet machine: the load average is printed beside each.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def cpu_busy() -> float:
    """Seconds of CPU the whole machine has spent busy (all cores; /proc/stat)."""
    try:
        f = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return 0.0
    idle = f[3] + (f[4] if len(f) > 4 else 0)
    return (sum(f[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def jvm_threads() -> dict[int, tuple[str, float]]:
    """CPU seconds of every thread of this process's JVM children, and of the Python workers
    they started (pyspark's daemon and its forks, with their reaped children): id -> (group, s)."""
    tick = os.sysconf("SC_CLK_TCK")
    procs: dict[int, tuple[int, str, float]] = {}  # pid -> (ppid, comm, CPU with reaped children)
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            comm, rest = stat.read_text().rsplit(")", 1)
            f = rest.split()
            procs[int(stat.parent.name)] = (int(f[1]), comm.split("(", 1)[1], sum(int(x) for x in f[11:15]) / tick)
        except (OSError, IndexError, ValueError):
            continue
    jvms = [pid for pid, (ppid, comm, _) in procs.items() if ppid == os.getpid() and "java" in comm]
    out: dict[int, tuple[str, float]] = {}
    for jvm in jvms:
        try:
            for t in Path(f"/proc/{jvm}/task").iterdir():
                comm = (t / "comm").read_text().strip()
                f = (t / "stat").read_text().rsplit(")", 1)[1].split()
                out[int(t.name)] = (thread_group(comm), (int(f[11]) + int(f[12])) / tick)
        except (OSError, IndexError, ValueError):
            continue
    kids = {pid for pid, (ppid, _, _) in procs.items() if ppid in jvms}
    while kids:
        for pid in kids:
            out[-pid] = ("python workers", procs[pid][2])
        kids = {pid for pid, (ppid, _, _) in procs.items() if ppid in kids}
    return out


def thread_group(comm: str) -> str:
    """A JVM thread name (15 characters at most in /proc) -> what the thread does."""
    for prefix, group in (("Executor task", "tasks"), ("C1 Compiler", "JIT"), ("C2 Compiler", "JIT"),
                          ("GC Thread", "GC"), ("ParGC", "GC"), ("G1 ", "GC"), ("VM Thread", "GC"),
                          ("shuffle", "shuffle"), ("block-manager", "block manager")):
        if comm.startswith(prefix):
            return group
    return "other"


def thread_cpu_diff(before: dict[int, tuple[str, float]], after: dict[int, tuple[str, float]]) -> dict[str, float]:
    groups: dict[str, float] = {}
    for tid, (group, cpu) in after.items():
        groups[group] = groups.get(group, 0.0) + cpu - before.get(tid, (group, 0.0))[1]
    return {g: round(v, 1) for g, v in sorted(groups.items(), key=lambda kv: -kv[1])}


def generate(data: Path, runs: int, ops: int, seed: int) -> dict[str, Any]:
    from pipeline import synth

    manifest = data / "manifest.json"
    want = {"runs": runs, "ops": ops, "seed": seed, "synth": 2}
    if manifest.is_file() and json.loads(manifest.read_text()).get("params") == want:
        m = json.loads(manifest.read_text())
        print(f"reusing {m['runs']} runs, {m['ops']:,} ops, {m['events']:,} events in {data}")
        return m
    shutil.rmtree(data / "results", ignore_errors=True)
    t0 = time.perf_counter()
    written = synth.write_campaign(data / "results", runs=runs, total_ops=ops, seed=seed, plant_unsafe=0.5,
                                   keys=8, concurrency=10, workers=os.cpu_count() or 2)
    m = {"params": want, "runs": len(written), "ops": sum(r.ops for r in written),
         "events": sum(r.events for r in written),
         "bytes": sum((r.path / "history.jsonl").stat().st_size for r in written),
         "seconds": round(time.perf_counter() - t0, 1)}
    manifest.write_text(json.dumps(m))
    print(f"generated {m['runs']} runs, {m['ops']:,} ops, {m['events']:,} events, "
          f"{m['bytes'] / 1e9:.2f} GB of history in {m['seconds']} s")
    return m


def spark_job(master: str, results: str, out: str) -> dict[str, Any]:
    """In a fresh process: ingest then check on `master`; returns the figures."""
    from pipeline.check import check
    from pipeline.ingest import ingest
    from pipeline.session import session

    res: dict[str, Any] = {"master": master}
    t0 = time.perf_counter()
    with session(master, progress=False) as spark:
        res["session_s"] = round(time.perf_counter() - t0, 2)
        res["load_before"] = loadavg()
        c0, t0 = cpu_busy(), time.perf_counter()
        s = ingest(spark, [results], out)
        res["ingest_cores"] = round((cpu_busy() - c0) / (time.perf_counter() - t0), 2)
        res["ingest"] = s.to_json() | {"damaged": len(s.damaged)}
        res["load_mid"] = loadavg()
        c1, t1, th, d1 = cpu_busy(), time.perf_counter(), jvm_threads(), time.process_time()
        c = check(spark, out)
        res["check_threads"] = thread_cpu_diff(th, jvm_threads()) | {"driver": round(time.process_time() - d1, 1)}
        res["check_s"] = round(time.perf_counter() - t1, 2)
        res["check_cores"] = round((cpu_busy() - c1) / res["check_s"], 2)
        res["check_timings"] = c.timings
        res["check_rows"] = c.rows
        res["check_task_s"] = c.task_seconds
        res["partitions"] = c.partitions
        res["invalid_runs"] = sum(r.get("valid") is False for r in c.results.values())
        res["anomalies"] = sum(sum(r.get("anomaly_counts", {}).values()) for r in c.results.values())
        res["load_after"] = loadavg()
    return res


def _single(path: str) -> tuple[float, float, int]:
    import checkers.queue as cq

    t0, c0 = time.perf_counter(), time.process_time()
    r = cq.check_file(path, max_examples=32)
    return time.perf_counter() - t0, time.process_time() - c0, sum(r["anomaly_counts"].values())


def single_process(results: Path, workers: int) -> dict[str, Any]:
    files = sorted(str(p) for p in results.rglob("history.jsonl"))
    load = loadavg()
    t0 = time.perf_counter()
    if workers == 1:
        out = [_single(f) for f in files]
    else:
        with ProcessPoolExecutor(workers) as ex:
            out = list(ex.map(_single, files))
    return {"workers": workers, "wall_s": round(time.perf_counter() - t0, 2),
            "in_check_s": round(sum(t for t, _, _ in out), 2), "cpu_s": round(sum(c for _, c, _ in out), 2),
            "anomalies": sum(n for _, _, n in out),
            "load_before": load, "load_after": loadavg()}


def summary(sp: dict[str, dict[str, Any]], single: dict[int, dict[str, Any]]) -> None:
    """The two ratios of the targets, and ingest + check on local[2]."""
    print()
    if "local[1]" in sp and "local[2]" in sp:
        ratio = sp["local[1]"]["check_s"] / sp["local[2]"]["check_s"]
        ing_ratio = sp["local[1]"]["ingest"]["seconds"] / sp["local[2]"]["ingest"]["seconds"]
        print(f"local[2] vs local[1]: check {ratio:.2f}x faster (target >= 1.6x), ingest {ing_ratio:.2f}x")
    if "local[2]" in sp:
        l2 = sp["local[2]"]
        print(f"local[2]: check {l2['check_s']:.1f} s, ingest + check {l2['ingest']['seconds'] + l2['check_s']:.1f} s")
        for w, s in sorted(single.items()):
            print(f"local[2] check / single-process checker on {w} process(es): "
                  f"{l2['check_s'] / s['wall_s']:.2f}x{' (target <= 1.5x)' if w == 2 else ''}")
    # CPU seconds depend less on what else runs on the machine than wall times do
    cpu = [f"{m} {sum(r['check_threads'].values()):.1f}" for m, r in sp.items()]
    cpu += [f"single-process on {w} {s['cpu_s']:.1f}" for w, s in sorted(single.items())]
    print("CPU-s of the check (JVM threads, Python workers, driver): " + ", ".join(cpu))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ops", type=int, default=10_000_000, help="client ops in the whole campaign")
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--data", default=None, help="where the runs go (default: a temp dir, removed)")
    ap.add_argument("--keep", action="store_true", help="keep --data (and reuse it next time)")
    ap.add_argument("--masters", default="local[1],local[2]")
    ap.add_argument("--no-single", action="store_true", help="skip the single-process checker")
    ap.add_argument("--job", nargs=3, metavar=("MASTER", "RESULTS", "OUT"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.job:
        print(json.dumps(spark_job(*a.job)))
        return 0
    data = Path(a.data) if a.data else Path(tempfile.mkdtemp(prefix="wrack-bench-pipeline-"))
    data.mkdir(parents=True, exist_ok=True)
    print(f"bench/pipeline: {a.runs} runs, {a.ops:,} ops; cores {os.cpu_count()}; load average {loadavg()}")
    try:
        gen = generate(data, a.runs, a.ops, a.seed)
        figures: dict[str, Any] = {"campaign": gen, "spark": []}
        for master in a.masters.split(","):
            out = data / f"pq-{master.replace('[', '').replace(']', '').replace('*', 'all')}"
            shutil.rmtree(out, ignore_errors=True)
            t0 = time.perf_counter()
            p = subprocess.run([sys.executable, __file__, "--job", master, str(data / "results"), str(out)],
                               capture_output=True, text=True)
            if p.returncode != 0:
                print(p.stderr[-4000:], file=sys.stderr)
                return 1
            r = json.loads(p.stdout.strip().splitlines()[-1])
            r["process_s"] = round(time.perf_counter() - t0, 1)
            figures["spark"].append(r)
            ing = r["ingest"]
            print(f"\n{master}: session start {r['session_s']} s")
            print(f"  ingest {ing['seconds']:.1f} s ({ing['ops']:,} ops -> {ing['op_rows']:,} rows; parse+write "
                  f"in tasks {ing['task_seconds']:.1f} task-s, {r['ingest_cores']} cores busy)  load {r['load_before']} -> {r['load_mid']}")
            print(f"  check  {r['check_s']:.1f} s ({r['check_rows']:,} ops rows, {r['partitions']} tasks taking "
                  f"{r['check_task_s']:.1f} task-s, {r['invalid_runs']} invalid runs, {r.get('anomalies')} anomalies, "
                  f"{r['check_cores']} cores busy)  "
                  f"load {r['load_mid']} -> {r['load_after']}")
            print("  CPU in check by JVM thread group, Python workers and the driver's Python (s): "
                  + ", ".join(f"{g} {v}" for g, v in r["check_threads"].items()))
            for phase, s in r["check_timings"].items():
                print(f"    {phase:32s} {s:8.1f} s")
            shutil.rmtree(out, ignore_errors=True)
        sp = {r["master"]: r for r in figures["spark"]}
        if not a.no_single:
            for w in (1, min(2, os.cpu_count() or 1)):
                s = single_process(data / "results", w)
                figures.setdefault("single", []).append(s)
                print(f"single-process checker, {w} process(es): {s['wall_s']:.1f} s wall ({s['in_check_s']:.1f} s in "
                      f"check_file, {s['cpu_s']:.1f} CPU-s), {s['anomalies']} anomalies  load {s['load_before']} -> {s['load_after']}")
        summary(sp, {s["workers"]: s for s in figures.get("single", [])})
        print("\n" + json.dumps(figures))
    finally:
        if not a.keep:
            shutil.rmtree(data, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
