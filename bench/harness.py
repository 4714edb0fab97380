"""Harness overhead: what the harness itself costs.

1. Interpreter throughput: ops/s the generator interpreter runs and journals (history
   appended and flushed per event) against a no-op client, for 1, 4 and 10 client threads
   with no rate limit (best of N runs of `--seconds` each), and the generator alone
   (`contracts.generator.simulate`: ops/s of the combinators without threads or I/O).
2. Time outside the workload window of a real test on the local backend (root): cluster
   creation, broker start, topics, heal, final read-back, teardown, check and report, from
   the run's `timings`, for a `--window` s test (default 60) of the queue workload with
   partitions and kills against the real broker (skipped when it does not run), and of the
   no-op workload with the stand-in broker (the harness's own share).

3. Check and report of a big stored run (`--report-events`, default 1,000,000; 0 skips):
   CPU seconds of `check_run` and of `render_outputs` on a queue history from
   bench/queue_checker.py's generator, with the plots drawn from the check's analysis (what
   the runner does) and, for comparison, with the plots analysing the history again.

4. Workload push (root): acknowledged sends per second of the queue workload on a healthy
   5-node local cluster (acks=all, RF 3, min ISR 2, no faults) over a `--push-window` s test
   (default 30) with the default options (`--in-flight 64`, `--rate 5000`), beside the same
   test with `--in-flight 0` (only the consuming clients send); the target is >= 2,000/s.

Prints one line per figure with the load average beside it (2 shared cores: figures are
noisy). Target: at most 15 s outside the window on local.

    .venv/bin/python bench/harness.py [--seconds 3] [--repeat 3] [--window 60] [--no-cluster]
                                      [--report-events 1000000]
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def loadavg() -> str:
    try:
        return open("/proc/loadavg").read().split()[0]
    except OSError:
        return "?"


def interpreter_ops(threads: int, seconds: float) -> float:
    from contracts import generator as g
    from contracts.history import HistoryWriter
    from harness import interpreter
    from workloads.noop import NoopClient

    with tempfile.TemporaryDirectory() as d:
        h = HistoryWriter(Path(d) / "history.jsonl")
        t0 = time.monotonic()
        st = interpreter.run(g.time_limit(seconds, g.repeat({"f": "noop"})), threads=threads,
                             clients=lambda t, p: NoopClient(), history=h, rng=random.Random(0))
        el = time.monotonic() - t0
        h.close()
    return st.completed() / el


def generator_ops(n: int = 200_000) -> float:
    from contracts import generator as g

    gen = g.limit(n, g.stagger(0.0001, g.mix(g.repeat({"f": "a"}), g.repeat({"f": "b"}))))
    t0 = time.monotonic()
    h = g.simulate(gen, 10, latency=0.0005, max_events=2 * n + 10)
    return (len(h) / 2) / (time.monotonic() - t0)


def outside_window(window: float, workload: str, broker_command: list[str] | None, nemesis: list[str]) -> dict:
    from harness.runner import TestOptions, run_test

    with tempfile.TemporaryDirectory(prefix="wrack-bench-") as d:
        o = TestOptions(workload=workload, nodes=5, nemesis=nemesis, time_limit=window, rate=100,
                        nemesis_interval=8, broker_command=broker_command, results=d, seed=1)
        t0 = time.monotonic()
        out = run_test(o)
        total = time.monotonic() - t0
        import json

        test = json.loads((out.run_dir / "test.json").read_text())
    tm = test.get("timings", {})
    return {"valid": out.valid, "total": total, "workload": tm.get("workload", 0.0), "timings": tm,
            "outside": total - tm.get("workload", 0.0), "error": out.error}


def push(window: float, in_flight: int) -> dict:
    """Section 4: acknowledged sends/s of a healthy-cluster queue test, and its op counts."""
    import json

    from harness.runner import TestOptions, run_test

    with tempfile.TemporaryDirectory(prefix="wrack-bench-") as d:
        o = TestOptions(nodes=5, nemesis=[], time_limit=window, in_flight=in_flight, results=d, seed=1)
        out = run_test(o)
        test = json.loads((out.run_dir / "test.json").read_text())
    ops = test.get("ops", {})
    return {"valid": out.valid, "acked": ops.get("send:ok", 0), "window": test["timings"].get("workload", window),
            "failed": ops.get("send:fail", 0), "info": ops.get("send:info", 0), "polls": ops.get("poll:ok", 0),
            "error": out.error}


def check_and_report(n_events: int) -> None:
    """Section 3 of the module docstring."""
    import importlib.util
    import json
    import shutil

    from harness.analysis import check_run, render_outputs

    spec = importlib.util.spec_from_file_location("queue_checker_bench", ROOT / "bench" / "queue_checker.py")
    qb = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(qb)

    with tempfile.TemporaryDirectory(prefix="wrack-bench-") as d:
        run = Path(d) / "run"
        run.mkdir()
        n = qb.generate(run / "history.jsonl", n_events, seed=5)
        test = {"name": "bench", "run_id": "bench/run", "end": "x",
                "options": {"workload": "queue", "acks": "all", "min_isr": 2, "rf": 3, "nemesis": []}}
        (run / "test.json").write_text(json.dumps(test))
        t0 = time.process_time()
        checked = check_run(run)
        t_check = time.process_time() - t0
        t0 = time.process_time()
        problems = render_outputs(run, test, analysis=checked.analysis)
        t_with = time.process_time() - t0
        shutil.rmtree(run / "plots")
        t0 = time.process_time()
        problems += render_outputs(run, test)
        t_without = time.process_time() - t0
    print(f"check + report of a {n} event queue run (CPU s): check {t_check:.1f}, plots+timeline+report "
          f"{t_with:.1f} from the check's analysis vs {t_without:.1f} analysing again"
          f"{'; problems ' + '; '.join(problems) if problems else ''}  load {loadavg()}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--window", type=float, default=60.0)
    ap.add_argument("--no-cluster", action="store_true")
    ap.add_argument("--report-events", type=int, default=1_000_000, help="0: skip the check+report figure")
    ap.add_argument("--push-window", type=float, default=30.0, help="seconds of the push figure (0: skip it)")
    a = ap.parse_args()
    if a.report_events:
        check_and_report(a.report_events)
    for threads in (1, 4, 10):
        best = max(interpreter_ops(threads, a.seconds) for _ in range(a.repeat))
        print(f"interpreter, no-op client, {threads:2d} thread(s): {best:8.0f} ops/s journaled "
              f"(best of {a.repeat} x {a.seconds:g} s)  load {loadavg()}", flush=True)
    best = max(generator_ops() for _ in range(a.repeat))
    print(f"generator alone (simulate, stagger+mix, 10 threads): {best:8.0f} ops/s  load {loadavg()}", flush=True)
    if a.no_cluster:
        return
    from clusters.testing import can_run_local

    if not can_run_local():
        print("outside-window figures skipped: needs root and network namespaces")
        return
    if a.push_window:
        for in_flight in (64, 0):
            r = push(a.push_window, in_flight)
            print(f"queue workload push, 5 local nodes, acks=all RF 3, no faults, --in-flight {in_flight}: "
                  f"{r['acked'] / r['window']:7.0f} acknowledged sends/s ({r['acked']} in {r['window']:.1f} s; "
                  f"{r['failed']} fail, {r['info']} info, {r['polls']} polls; valid {r['valid']}"
                  f"{'; error ' + r['error'] if r['error'] else ''})  load {loadavg()}", flush=True)
    standin = [sys.executable, str(ROOT / "tests" / "clusters" / "standin_broker.py")]
    runs = [("noop workload, stand-in broker", "noop", standin)]
    broker = Path(sys.executable).parent / "wrack-broker"
    import subprocess

    if broker.exists() and subprocess.run([str(broker), "--help"], capture_output=True).returncode == 0:
        runs.append(("queue workload, real broker", "queue", None))
    else:
        print("queue workload skipped: wrack-broker does not run")
    for label, workload, cmd in runs:
        r = outside_window(a.window, workload, cmd, ["partition", "kill"])
        tm = ", ".join(f"{k} {v:.1f}" for k, v in r["timings"].items())
        print(f"{a.window:g} s test, 5 local nodes, {label}: {r['outside']:.1f} s outside the workload window "
              f"(total {r['total']:.1f} s; {tm}; valid {r['valid']}{'; error ' + r['error'] if r['error'] else ''})"
              f"  load {loadavg()}", flush=True)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    main()
