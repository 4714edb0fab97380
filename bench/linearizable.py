"""Benchmark of the linearizability checker on Porcupine's conformance data.

Prints, per file, the time to read it and the time to check it (best of --repeat runs,
wall clock, in this process), the cached configurations and the peak Python heap of a
check (tracemalloc, a separate run so it does not slow the timed ones); then totals for
the etcd suite and the kv files, kv c10 with partitioning switched off, and one whole
`wrack check` process over the etcd suite (interpreter start included, best of 3).
Reference (Porcupine in Go on this machine, the README of the porcupine data): etcd suite 0.455 s,
kv c50-ok 0.128 s, kv c10-ok/c10-bad without partitioning 2.7 s / 2.6 s.

    .venv/bin/python bench/linearizable.py [--repeat N] [--data DIR] [--quiet]
"""

from __future__ import annotations

import argparse
import csv
import os
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from checkers.linearizable.check import analyse  # noqa: E402
from contracts.formats import read_history  # noqa: E402

DATA = Path(os.environ.get("WRACK_SHARED", ROOT.parent / "shared")) / "data" / "porcupine"


def measure(path: Path, model: str, partition: bool, repeat: int) -> dict:
    """Best-of-`repeat` read and check times, configs, verdict and peak heap of one file."""
    best_read = best_check = float("inf")
    a = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        events = list(read_history(path))
        t1 = time.perf_counter()
        a = analyse(iter(events), model, partition=partition, with_lines=True, path=str(path))
        t2 = time.perf_counter()
        best_read, best_check = min(best_read, t1 - t0), min(best_check, t2 - t1)
    events = list(read_history(path))
    tracemalloc.start()
    analyse(iter(events), model, partition=partition, with_lines=True, path=str(path))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert a is not None
    return {"read": best_read, "check": best_check, "valid": a.valid, "ops": a.ops,
            "configs": sum(p.configs for p in a.partitions), "peak": peak}


def synthetic(model: str, n: int, crash: float, seed: int = 1) -> list[dict]:
    """A linearizable history of `n` ops of one `log` or `cas-register` object: op i takes
    effect at time 10*i inside an interval of up to +-40 around it (about 8 ops overlap);
    a fraction `crash` of them are indeterminate (`info`), half of those took effect."""
    import random

    rng = random.Random(seed)
    log: list[int] = []
    reg = None
    free: dict[int, int] = {}  # process -> time it is free again
    next_pid = 0
    timed = []
    for i in range(n):
        t = 10 * i
        call, ret = t - rng.randint(0, 40), t + rng.randint(0, 40)
        p = next((q for q, f in free.items() if f < call), None)
        if p is None:
            p, next_pid = next_pid, next_pid + 1
        crashed = rng.random() < crash
        happens = not crashed or rng.random() < 0.5
        if model == "log":
            if rng.random() < 0.5:
                f, v = "send", 1000 + i
                inv = v
                if happens:
                    log.append(v)
                out = [len(log) - 1, v]
            else:
                f, inv = "read", max(0, len(log) - rng.randint(0, 5))
                out = [inv, log[inv] if inv < len(log) else None]
        else:
            f = rng.choice(["read", "write", "cas"])
            if f == "read":
                inv, out = None, reg
            elif f == "write":
                inv = out = rng.randint(0, 4)
                if happens:
                    reg = inv
            else:
                inv = out = [rng.randint(0, 4), rng.randint(0, 4)]
                if reg != inv[0]:
                    f = "cas-fail"
                elif happens:
                    reg = inv[1]
        typ = "info" if crashed else "fail" if f == "cas-fail" else "ok"
        f = "cas" if f == "cas-fail" else f
        timed.append((call, 0, {"process": p, "type": "invoke", "f": f, "value": inv}))
        timed.append((ret, 1, {"process": p, "type": typ, "f": f, "value": out}))
        if crashed:
            free.pop(p, None)  # a crashed process never comes back
        else:
            free[p] = ret
    timed.sort(key=lambda x: (x[0], x[1]))
    return [dict(ev, time=t, index=j) for j, (t, _, ev) in enumerate(timed)]


def row(name: str, m: dict, expected: str | None) -> str:
    mark = "" if expected is None or str(m["valid"]).lower() == expected else "  MISMATCH"
    return (f"  {name:28s} {m['ops']:5d} ops  read {m['read'] * 1e3:7.2f} ms  check {m['check'] * 1e3:8.2f} ms"
            f"  {m['configs']:8d} configs  peak {m['peak'] / 1024:8.0f} KiB  {str(m['valid']):5s}{mark}")


def loadavg() -> str:
    """The 1, 5 and 15 minute load averages."""
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def whole_process(files: list[Path]) -> float:
    """Best-of-3 wall time of one `wrack check` over `files`, interpreter start included."""
    wrack = Path(sys.executable).parent / "wrack"
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        subprocess.run([str(wrack), "check", "--checker", "linearizable", "--model", "cas-register",
                        *map(str, files)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=3, help="timed runs per file (best is printed)")
    ap.add_argument("--data", default=str(DATA), help="the porcupine data folder")
    ap.add_argument("--quiet", action="store_true", help="totals only")
    args = ap.parse_args()
    data = Path(args.data)
    if not (data / "expected.csv").exists():
        print(f"no Porcupine data at {data}: nothing to measure")
        return 0
    with open(data / "expected.csv") as f:
        expected = {r["file"]: r["linearizable"] for r in csv.DictReader(f) if r["linearizable"] != "skip-empty"}
    print(f"load average before: {loadavg()}")
    etcd = sorted(f for f in expected if f.startswith("etcd/"))
    totals = {"read": 0.0, "check": 0.0, "peak": 0}
    mismatches = 0
    print(f"etcd suite ({len(etcd)} files, cas-register):")
    for f in etcd:
        m = measure(data / f, "cas-register", True, args.repeat)
        totals["read"] += m["read"]
        totals["check"] += m["check"]
        totals["peak"] = max(totals["peak"], m["peak"])
        mismatches += str(m["valid"]).lower() != expected[f]
        if not args.quiet:
            print(row(f, m, expected[f]))
    print(f"  TOTAL etcd: read {totals['read']:.3f} s, check {totals['check']:.3f} s "
          f"(Porcupine/Go 0.455 s), largest peak {totals['peak'] / 1024:.0f} KiB, {mismatches} mismatches")
    print("kv files (kv model):")
    for f in sorted(x for x in expected if x.startswith("kv/")):
        m = measure(data / f, "kv", True, args.repeat)
        mismatches += str(m["valid"]).lower() != expected[f]
        print(row(f + " partitioned", m, expected[f]))
    for f in ("kv/c10-ok.txt", "kv/c10-bad.txt"):
        m = measure(data / f, "kv", False, args.repeat)
        mismatches += str(m["valid"]).lower() != expected[f]
        print(row(f + " no-partition", m, expected[f]) + "  (Porcupine/Go 2.7 s / 2.6 s)")
    print("long synthetic histories (one object, ~8 ops concurrent, crashed ops indeterminate):")
    for model, n, crash in (("log", 20000, 0.01), ("log", 20000, 0.05), ("cas-register", 20000, 0.01)):
        events = synthetic(model, n, crash)
        t0 = time.perf_counter()
        a = analyse(iter(events), model)
        dt = time.perf_counter() - t0
        tracemalloc.start()
        analyse(iter(events), model)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        mismatches += a.valid is not True
        print(f"  {model:12s} {n} ops, {crash:.0%} crashed: check {dt:.3f} s, "
              f"{sum(p.configs for p in a.partitions)} configs, peak {peak / 2**20:.1f} MiB, {a.valid}")
    t = whole_process([data / f for f in etcd])
    print(f"one `wrack check` process over the etcd suite, interpreter start included: {t:.3f} s (best of 3)")
    print(f"load average after: {loadavg()}")
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
