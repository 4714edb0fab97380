"""Benchmark of the Kafka queue checker: a big clean history, checked through the CLI.

    .venv/bin/python bench/queue_checker.py [--events 1000000] [--repeat 3] [--no-plots]

Generates (once, cached under the temp dir) a simulated correct queue history: 50 keys,
20 client processes, sends (ok/fail/info), assigns of random key sets, polls of 0-4
records per assigned key, client crashes (new process ids), then a final phase that
assigns every key and reads everything back; about `--events` events (half as many ops).
Then runs `wrack check --checker queue --json FILE` `--repeat` times (wall time including
interpreter start, its CPU time and peak RSS) and prints the best and median, events/s and
ops/s, the load average around the runs, and once the time of `--plots DIR` (plots and
timeline) on top of the check. The verdict must be valid with no anomaly.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parent.parent


def generate(path: Path, n_events: int, seed: int, n_keys: int = 50, n_proc: int = 20) -> int:
    """Write a clean history of about n_events events; returns the number written."""
    rng = random.Random(seed)
    keys = [f"k{i}" for i in range(n_keys)]
    log: dict[str, list[int]] = {k: [] for k in keys}
    next_val = dict.fromkeys(keys, 1)
    procs = list(range(n_proc))
    next_proc = n_proc
    assigned: dict[int, list[str]] = {}
    pos: dict[tuple[int, str], int] = {}
    out = bytearray()
    n = 0
    t = 0
    dumps = orjson.dumps

    def emit(p: int, typ: str, f: str, value: object) -> None:
        nonlocal n, t
        t += rng.randint(1, 50) * 1000
        out.extend(dumps({"index": n, "time": t, "process": p, "type": typ, "f": f, "value": value}))
        out.extend(b"\n")
        n += 1

    def retire(p: int) -> None:
        nonlocal next_proc
        procs.remove(p)
        procs.append(next_proc)
        next_proc += 1
        assigned.pop(p, None)

    def assign(p: int, ks: list[str]) -> None:
        emit(p, "invoke", "assign", ks)
        emit(p, "ok", "assign", ks)
        assigned[p] = ks
        for k in ks:
            pos[(p, k)] = 0

    def poll(p: int, maxn: int | None = None) -> None:
        if p not in assigned:
            assign(p, sorted(rng.sample(keys, rng.randint(1, n_keys))))
        emit(p, "invoke", "poll", [["poll"]])
        res = {}
        for k in assigned[p]:
            start = pos[(p, k)]
            lk = log[k]
            stop = min(start + (maxn or rng.randint(0, 4)), len(lk))
            if stop > start:
                res[k] = [[o, lk[o]] for o in range(start, stop)]
                pos[(p, k)] = stop
        emit(p, "ok", "poll", [["poll", res]])

    with open(path, "wb") as f:
        while n < n_events * 0.99:
            p = rng.choice(procs)
            r = rng.random()
            if r < 0.5:
                k = rng.choice(keys)
                v = next_val[k]
                next_val[k] += 1
                emit(p, "invoke", "send", [["send", k, v]])
                x = rng.random()
                if x < 0.85:
                    log[k].append(v)
                    emit(p, "ok", "send", [["send", k, [len(log[k]) - 1, v]]])
                elif x < 0.92:
                    emit(p, "fail", "send", [["send", k, v]])
                else:
                    if rng.random() < 0.5:
                        log[k].append(v)
                    emit(p, "info", "send", [["send", k, v]])
                    retire(p)
            elif r < 0.93:
                poll(p)
            elif r < 0.97:
                assign(p, sorted(rng.sample(keys, rng.randint(1, n_keys))))
            else:
                emit(p, "invoke", "crash", None)
                emit(p, "info", "crash", None)
                retire(p)
            if len(out) > 1 << 22:
                f.write(out)
                out.clear()
        p = next_proc
        assign(p, list(keys))
        while any(pos[(p, k)] < len(log[k]) for k in keys):
            poll(p, maxn=5)
        f.write(out)
    return n


def run_timed(cmd: list[str]) -> tuple[float, float, int, bytes, float]:
    """(wall seconds, peak RSS MiB, exit code, stdout, CPU seconds) of one child process."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out = b""
    assert proc.stdout is not None
    out = proc.stdout.read()
    _pid, status, ru = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    return wall, ru.ru_maxrss / 1024, proc.returncode, out, ru.ru_utime + ru.ru_stime


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=int, default=1_000_000, help="about this many events (default 1,000,000)")
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=3, help="check runs; best and median are printed")
    ap.add_argument("--history", default=None, help="use this history file instead of generating one")
    ap.add_argument("--no-plots", action="store_true", help="skip the plots + timeline run")
    args = ap.parse_args()
    wrack = str(Path(sys.executable).parent / "wrack")
    if args.history:
        hist = Path(args.history)
    else:
        hist = Path(tempfile.gettempdir()) / f"wrack-bench-queue-{args.events}-{args.seed}.jsonl"
        if not hist.is_file():
            t0 = time.perf_counter()
            n = generate(hist.with_suffix(".tmp"), args.events, args.seed)
            hist.with_suffix(".tmp").rename(hist)
            print(f"generated {n} events into {hist} in {time.perf_counter() - t0:.1f} s")
    with open(hist, "rb") as f:
        n_events = sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 22), b""))
    print(f"history: {hist} ({n_events} events, {hist.stat().st_size / 2**20:.0f} MiB)")
    walls: list[float] = []
    rss: list[float] = []
    cpus: list[float] = []
    result: dict = {}
    load_before = os.getloadavg()
    for _ in range(args.repeat):
        wall, mib, code, out, cpu = run_timed([wrack, "check", "--checker", "queue", "--json", str(hist)])
        result = json.loads(out)
        walls.append(wall)
        rss.append(mib)
        cpus.append(cpu)
        print(f"  run: {wall:.2f} s wall, {cpu:.2f} s CPU, peak RSS {mib:.0f} MiB, exit {code}, "
              f"valid={result.get('valid')}")
    load_after = os.getloadavg()
    ops = result.get("checked", {}).get("ops", n_events // 2)
    best = min(walls)
    print(f"queue check (CLI, interpreter start included): best {best:.2f} s, median "
          f"{statistics.median(walls):.2f} s over {len(walls)} runs; CPU best {min(cpus):.2f} s")
    print(f"  {n_events / best:,.0f} events/s, {ops / best:,.0f} ops/s ({ops} ops); peak RSS {max(rss):.0f} MiB")
    print(f"  verdict: valid={result.get('valid')} anomaly_types={result.get('anomaly_types')}")
    print(f"  load average before {load_before[0]:.2f}, after {load_after[0]:.2f} (2 cores shared)")
    ok = result.get("valid") is True and not result.get("anomaly_types")
    if not args.no_plots:
        with tempfile.TemporaryDirectory(prefix="wrack-bench-plots-") as d:
            wall, mib, code, out, cpu = run_timed([wrack, "check", "--checker", "queue", "--json", str(hist),
                                                   "--plots", d])
            files = sorted(os.listdir(d))
            size = sum(os.path.getsize(os.path.join(d, x)) for x in files)
            print(f"check + plots + timeline: {wall:.2f} s wall, {cpu:.2f} s CPU ({cpu - min(cpus):.2f} s over the "
                  f"check), peak RSS "
                  f"{mib:.0f} MiB, {len(files)} files, {size / 2**20:.1f} MiB: {', '.join(files)}")
            print(f"  load average now {os.getloadavg()[0]:.2f}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
