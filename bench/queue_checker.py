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


class HistoryWriter:
    """A simulated correct queue history (see the module docstring), built event by event
    into `out` from one seeded random generator."""

    def __init__(self, seed: int, n_keys: int, n_proc: int) -> None:
        self.rng = random.Random(seed)
        self.keys = [f"k{i}" for i in range(n_keys)]
        self.log: dict[str, list[int]] = {k: [] for k in self.keys}
        self.next_val = dict.fromkeys(self.keys, 1)
        self.procs = list(range(n_proc))
        self.next_proc = n_proc
        self.assigned: dict[int, list[str]] = {}
        self.pos: dict[tuple[int, str], int] = {}
        self.out = bytearray()
        self.n = 0
        self.t = 0

    def emit(self, p: int, typ: str, f: str, value: object) -> None:
        self.t += self.rng.randint(1, 50) * 1000
        self.out.extend(orjson.dumps({"index": self.n, "time": self.t, "process": p, "type": typ, "f": f, "value": value}))
        self.out.extend(b"\n")
        self.n += 1

    def retire(self, p: int) -> None:
        self.procs.remove(p)
        self.procs.append(self.next_proc)
        self.next_proc += 1
        self.assigned.pop(p, None)

    def assign(self, p: int, ks: list[str]) -> None:
        self.emit(p, "invoke", "assign", ks)
        self.emit(p, "ok", "assign", ks)
        self.assigned[p] = ks
        for k in ks:
            self.pos[(p, k)] = 0

    def random_keys(self) -> list[str]:
        return sorted(self.rng.sample(self.keys, self.rng.randint(1, len(self.keys))))

    def poll(self, p: int, maxn: int | None = None) -> None:
        if p not in self.assigned:
            self.assign(p, self.random_keys())
        self.emit(p, "invoke", "poll", [["poll"]])
        res = {}
        for k in self.assigned[p]:
            start = self.pos[(p, k)]
            lk = self.log[k]
            stop = min(start + (maxn or self.rng.randint(0, 4)), len(lk))
            if stop > start:
                res[k] = [[o, lk[o]] for o in range(start, stop)]
                self.pos[(p, k)] = stop
        self.emit(p, "ok", "poll", [["poll", res]])

    def send(self, p: int) -> None:
        """A send: ok (85%), fail (7%) or info (8%: written or not, and the process retires)."""
        rng = self.rng
        k = rng.choice(self.keys)
        v = self.next_val[k]
        self.next_val[k] += 1
        self.emit(p, "invoke", "send", [["send", k, v]])
        x = rng.random()
        if x < 0.85:
            self.log[k].append(v)
            self.emit(p, "ok", "send", [["send", k, [len(self.log[k]) - 1, v]]])
        elif x < 0.92:
            self.emit(p, "fail", "send", [["send", k, v]])
        else:
            if rng.random() < 0.5:
                self.log[k].append(v)
            self.emit(p, "info", "send", [["send", k, v]])
            self.retire(p)

    def step(self) -> None:
        """One op of a random process: send, poll, assign or crash."""
        p = self.rng.choice(self.procs)
        r = self.rng.random()
        if r < 0.5:
            self.send(p)
        elif r < 0.93:
            self.poll(p)
        elif r < 0.97:
            self.assign(p, self.random_keys())
        else:
            self.emit(p, "invoke", "crash", None)
            self.emit(p, "info", "crash", None)
            self.retire(p)

    def read_back(self) -> None:
        """The final phase: a new process assigns every key and polls until it has read all."""
        p = self.next_proc
        self.assign(p, list(self.keys))
        while any(self.pos[(p, k)] < len(self.log[k]) for k in self.keys):
            self.poll(p, maxn=5)


def generate(path: Path, n_events: int, seed: int, n_keys: int = 50, n_proc: int = 20) -> int:
    """Write a clean history of about n_events events; returns the number written."""
    g = HistoryWriter(seed, n_keys, n_proc)
    with open(path, "wb") as f:
        while g.n < n_events * 0.99:
            g.step()
            if len(g.out) > 1 << 22:
                f.write(g.out)
                g.out.clear()
        g.read_back()
        f.write(g.out)
    return g.n


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
