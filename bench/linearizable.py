"""Benchmark of the linearizability checker at Jepsen scale, side by side with Porcupine.

    .venv/bin/python bench/linearizable.py [--time-limit S] [--keep DIR] [--shapes NAMES] [--no-porcupine]
    .venv/bin/python bench/linearizable.py --suite porcupine-data [--repeat N] [--quiet]

Run it under `flock /tmp/wrack-e2e.lock` (it times things). The default suite, `jepsen`:

- generates keyed cas-register histories (`write_history`, below: our own simulation of a
  correct register, Jepsen's linearizable-register workload: read, write and cas of values
  0-4 in equal shares, one client slot per process, a third of the ops crashing `info`
  after a timeout; the slot goes on under a new process id): 100 keys x 1,000 ops with 5
  processes per key, 20 keys x 10,000 ops with 10, one hot key x 3,000 ops with 20; each
  valid, with an impossible read (one read returns 99, which no op writes) and with a
  stale read (one read returns the value of an acknowledged write that an acknowledged
  write overwrote before the read began), planted in the middle key at 55-60 % of its ops;
- checks each file with `wrack check --checker linearizable --model cas-register` and with
  Porcupine (its Go sources in the shared data folder beside the checkout, `PORCUPINE_SRC`, through our driver
  bench/porcupine_driver/main.go, built with Debian's golang-go in a temp dir), each as one
  process: wall time (start-up and reading included), peak RSS, verdict;
- prints a table: ours, Porcupine, Porcupine's wall / ours, and the load average.

Both get `--time-limit` seconds (default 60); a process over `--memory-cap` GB (default 4)
is killed. The files go to a temp dir (removed afterwards) unless `--keep DIR`.

`--suite porcupine-data`: the older benchmark on Porcupine's conformance data (etcd logs, kv
files) and long single-object histories, in this process (best of `--repeat`).
"""

from __future__ import annotations

import argparse
import csv
import heapq
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from checkers.linearizable.check import analyse  # noqa: E402
from contracts.formats import read_history  # noqa: E402

SHARED = Path(os.environ.get("WRACK_SHARED", ROOT.parent / "shared"))
DATA = SHARED / "data" / "porcupine"
PORCUPINE_SRC = SHARED / "data" / "porcupine-src"
DRIVER = ROOT / "bench" / "porcupine_driver" / "main.go"

MS = 1_000_000  # ns
IMPOSSIBLE = 99  # a value no op writes (ops write 0..4; the stale read's marker 5)
MARKER = 5
# name -> (keys, ops per key, processes per key)
SHAPES = {"100x1000": (100, 1000, 5), "20x10000": (20, 10_000, 10), "hot3000": (1, 3000, 20)}
PLANTS = (None, "impossible", "stale")


# --------------------------------------------------------------------------- the histories


def simulate_key(rng: random.Random, key: str, nops: int, procs: int, plant: str | None,
                 pids: Iterator[int]) -> list[tuple[int, int, dict]]:
    """(time, 0 invoke / 1 completion, event) of one key: `procs` client slots issue ops back
    to back (think time ~0.2 ms); an op takes ~1 ms (log-normal) and takes effect at a
    random instant inside its interval on one correct register. A crashing op (1/3) ends
    `info` after a timeout 5x longer, having taken effect or not (1/2); the slot goes on
    under a new process id. `plant` (see the module docstring) changes one read."""
    heap = [(rng.randint(0, 2 * MS), s) for s in range(procs)]
    heapq.heapify(heap)
    ops = []
    forced = int(nops * 0.55) if plant == "stale" else -1  # the marker's write
    for i in range(nops):
        call, slot = heapq.heappop(heap)
        f = rng.choice(("read", "write", "cas"))
        crash = rng.random() < 1 / 3
        lat = int(rng.lognormvariate(0, 0.6) * MS)
        if i == forced:
            f, crash = "write", False
        if crash:
            lat = 5 * lat + 5 * MS
        ret = call + max(1, lat)
        inv = None if f == "read" else rng.randint(0, 4) if f == "write" else [rng.randint(0, 4), rng.randint(0, 4)]
        ops.append({"i": i, "call": call, "eff": rng.randint(call, ret), "ret": ret, "slot": slot, "f": f,
                    "inv": MARKER if i == forced else inv, "crash": crash})
        heapq.heappush(heap, (ret + 1 + int(rng.expovariate(1.0) * 0.2 * MS), slot))
    state = None
    for o in sorted(ops, key=lambda o: o["eff"]):
        happens = not o["crash"] or rng.random() < 0.5
        f, inv = o["f"], o["inv"]
        if f == "read":
            o["type"], o["out"] = "ok", state
        elif f == "write" or state == inv[0]:
            if happens:
                state = inv if f == "write" else inv[1]
            o["type"], o["out"], o["moved"] = "ok", inv, happens
        else:
            o["type"], o["out"] = "fail", inv
    _plant(ops, plant, forced)
    return _events(ops, key, pids)


def _plant(ops: list[dict], plant: str | None, forced: int) -> None:
    reads = [o for o in ops if o["f"] == "read" and not o["crash"]]
    if plant == "impossible":
        reads[int(len(reads) * 0.6)]["out"] = IMPOSSIBLE
    elif plant == "stale":
        w = ops[forced]
        # the first acknowledged op, invoked after the marker's write returned, that set another value
        x = min((o for o in ops if not o["crash"] and o.get("moved") and o["call"] > w["ret"]
                 and (o["f"] == "cas" or o["inv"] != MARKER)), key=lambda o: o["ret"])
        min((o for o in reads if o["call"] > x["ret"]), key=lambda o: o["call"])["out"] = MARKER


def _events(ops: list[dict], key: str, pids: Iterator[int]) -> list[tuple[int, int, dict]]:
    cur: dict[int, int] = {}
    out = []
    for o in sorted(ops, key=lambda o: o["call"]):
        p = cur.setdefault(o["slot"], next(pids))
        out.append((o["call"], 0, {"process": p, "type": "invoke", "f": o["f"], "value": [key, o["inv"]]}))
        if o["crash"]:
            out.append((o["ret"], 1, {"process": p, "type": "info", "f": o["f"], "value": [key, o["inv"]]}))
            del cur[o["slot"]]
        else:
            out.append((o["ret"], 1, {"process": p, "type": o["type"], "f": o["f"], "value": [key, o["out"]]}))
    out.sort(key=lambda e: (e[0], e[1]))
    return out


def write_history(path: Path, keys: int, nops: int, procs: int, plant: str | None, seed: int = 1) -> None:
    """A keyed history of `keys` keys run side by side (see `simulate_key`), `plant` in the
    middle key, as JSON Lines (docs/ARCHITECTURE.md "History: JSON Lines, Jepsen's vocabulary")."""
    rng = random.Random(seed)
    pids = iter(range(10**9))
    per_key = [simulate_key(rng, f"k{k}", nops, procs, plant if k == keys // 2 else None, pids)
               for k in range(keys)]
    with open(path, "wb") as f:
        for idx, (t, _, ev) in enumerate(heapq.merge(*per_key, key=lambda e: (e[0], e[1]))):
            ev["index"], ev["time"] = idx, t
            f.write(orjson.dumps(ev) + b"\n")


# --------------------------------------------------------------------------- running


@dataclass
class Run:
    wall: float
    cpu: float | None  # user + system seconds (None: killed before it said)
    rss_mb: float
    verdict: str
    note: str = ""


def run_process(cmd: list[str], limit: float, cap_mb: float) -> tuple[float, float | None, float, int, bytes, str]:
    """Run `cmd`: (wall s, CPU s, peak RSS MB, exit code, stdout, note). Killed (note says why)
    past `limit` + 10 s or `cap_mb` of RSS (sampled every 50 ms). CPU and peak RSS come from
    GNU time (/usr/bin/time) around it, which starts it from a small process: the peak RSS
    a process reports after a fork from this one would count this one's memory too. A
    killed process has no CPU figure, and the largest RSS sampled."""
    with tempfile.TemporaryDirectory() as d:
        usage = Path(d) / "usage"
        gnu_time = ["/usr/bin/time", "-f", "%M %U %S", "-o", str(usage)] if Path("/usr/bin/time").exists() else []
        with open(Path(d) / "out", "w+b") as out:
            t0 = time.perf_counter()
            p = subprocess.Popen(gnu_time + cmd, stdout=out, stderr=subprocess.DEVNULL, start_new_session=True)
            wall, cpu, rss, note = _wait(p, t0, limit, cap_mb)
            out.seek(0)
            stdout = out.read()
        try:
            kb, user, system = usage.read_text().split()[-3:]
            rss, cpu = int(kb) / 1024, float(user) + float(system)
        except (OSError, ValueError):
            cpu = None if note else cpu  # killed: no figure; no GNU time: wait4's
        return wall, cpu, rss, p.returncode, stdout, note


def _rss_mb(pid: int) -> float:
    """Resident memory of `pid` and its children, MB (0 if gone)."""
    total = 0.0
    try:
        kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        for q in [str(pid), *kids]:
            total += int(Path(f"/proc/{q}/status").read_text().split("VmRSS:")[1].split()[0]) / 1024
    except (OSError, IndexError, ValueError):
        pass
    return total


def _wait(p: subprocess.Popen, t0: float, limit: float, cap_mb: float) -> tuple[float, float, float, str]:
    """Wait for `p`, killing it past the limits: (wall s, CPU s, peak RSS MB, note); wait4's
    figures, the RSS at least the largest sampled."""
    note: list[str] = []
    done = threading.Event()
    peak = [0.0]

    def watch() -> None:
        while not done.wait(0.05):
            rss = _rss_mb(p.pid)
            peak[0] = max(peak[0], rss)
            over = time.perf_counter() - t0 > limit + 10
            if rss > cap_mb or over:
                note.append(f"killed at {rss:.0f} MB" if rss > cap_mb else "killed after the time limit")
                os.killpg(p.pid, signal.SIGKILL)
                return

    threading.Thread(target=watch, daemon=True).start()
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    done.set()
    p.returncode = os.waitstatus_to_exitcode(status)
    return wall, ru.ru_utime + ru.ru_stime, max(peak[0], ru.ru_maxrss / 1024), "; ".join(note)


def ours(path: Path, limit: float, cap_mb: float) -> Run:
    wrack = Path(sys.executable).parent / "wrack"
    wall, cpu, rss, rc, out, note = run_process([str(wrack), "check", "--checker", "linearizable", "--model",
                                            "cas-register", "--json", "--time-limit", str(limit), str(path)],
                                                limit, cap_mb)
    try:
        res = json.loads(out)
        verdict = {True: "valid", False: "invalid"}.get(res["valid"], "unknown")
        if res["valid"] is False:
            w = res["anomalies"]["nonlinearizable"][0].get("window", {})
            note = note or f"window {w.get('ops')} ops ({w.get('decided_by')})"
    except (ValueError, KeyError):
        verdict = f"rc {rc}"
    return Run(wall, cpu, rss, verdict, note)


def porcupine(driver: Path, path: Path, limit: float, cap_mb: float) -> Run:
    wall, cpu, rss, rc, out, note = run_process([str(driver), "-timeout", str(limit), str(path)], limit, cap_mb)
    try:
        verdict = {"Ok": "valid", "Illegal": "invalid", "Unknown": "unknown"}[json.loads(out)["result"]]
    except (ValueError, KeyError):
        verdict = "killed" if note else f"rc {rc}"
    return Run(wall, cpu, rss, verdict, note or ("no answer in the time limit" if verdict == "unknown" else ""))


def build_porcupine(tmp: Path) -> tuple[Path | None, str]:
    """Our driver built against Porcupine's sources in `tmp` (go.mod with a replace), or why not."""
    if shutil.which("go") is None:
        return None, "no `go` (apt-get install golang-go)"
    if not (PORCUPINE_SRC / "checker.go").exists():
        return None, f"no Porcupine sources at {PORCUPINE_SRC}"
    src = tmp / "driver"
    src.mkdir()
    shutil.copy(DRIVER, src / "main.go")
    (src / "go.mod").write_text("module wrackbench/porcupinedriver\n\ngo 1.16\n\n"
                                "require github.com/anishathalye/porcupine v0.0.0\n\n"
                                f"replace github.com/anishathalye/porcupine => {PORCUPINE_SRC}\n")
    env = dict(os.environ, GOCACHE=str(tmp / "gocache"), GOPATH=str(tmp / "gopath"), GOFLAGS="-mod=mod",
               GOPROXY="off", GOTELEMETRY="off")
    r = subprocess.run(["go", "build", "-o", str(tmp / "porcupine-driver"), "."], cwd=src, env=env,
                       capture_output=True, text=True, check=False)
    if r.returncode:
        return None, "go build failed: " + r.stderr.strip()[-300:]
    return tmp / "porcupine-driver", ""


def jepsen(args: argparse.Namespace) -> int:
    """The default suite (see the module docstring)."""
    tmp = Path(tempfile.mkdtemp(prefix="wrack-linbench-"))
    try:
        folder = Path(args.keep) if args.keep else tmp
        folder.mkdir(parents=True, exist_ok=True)
        driver, why = (None, "--no-porcupine") if args.no_porcupine else build_porcupine(tmp)
        print(f"Porcupine: {driver or why}")
        cap = args.memory_cap * 1024
        print(f"{'history':22s} {'ops':>7s} | {'ours':>8s} {'wall':>7s} {'CPU':>7s} {'RSS':>7s} | {'Porcupine':>9s} "
              f"{'wall':>7s} {'CPU':>7s} {'RSS':>7s} | {'P/ours':>6s} | load   | notes")
        bad = 0
        for shape in args.shapes.split(","):
            keys, nops, procs = SHAPES[shape]
            for plant in PLANTS:
                path = folder / f"{shape}-{plant or 'valid'}.jsonl"
                if not path.exists():
                    write_history(path, keys, nops, procs, plant)
                load = loadavg().split()[0]
                a = ours(path, args.time_limit, cap)
                b = porcupine(driver, path, args.time_limit, cap) if driver else None
                bad += a.verdict != ("valid" if plant is None else "invalid")
                print(_row(path.stem, keys * nops, a, b, load), flush=True)
        print(f"load average after: {loadavg()}")
        return 1 if bad else 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _row(name: str, ops: int, a: Run, b: Run | None, load: str) -> str:
    def cells(r: Run | None) -> str:
        if r is None:
            return f"{'-':>8s} {'':>7s} {'':>7s} {'':>7s}"
        cpu = f"{r.cpu:6.2f}s" if r.cpu is not None else f"{'-':>7s}"
        return f"{r.verdict:>8s} {r.wall:6.2f}s {cpu} {r.rss_mb:5.0f}MB"
    ratio = "" if b is None else f"{b.wall / a.wall:5.1f}x" + (">" if b.verdict in ("unknown", "killed") else " ")
    notes = "; ".join(x for x in (a.note and f"ours: {a.note}", b and b.note and f"Porcupine: {b.note}") if x)
    return f"{name:22s} {ops:7d} | {cells(a)} | {cells(b)} | {ratio:>6s} | {load:6s} | {notes}"


# --------------------------------------------------------------------------- porcupine-data suite


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


def conformance(args: argparse.Namespace) -> int:
    """`--suite porcupine-data`: Porcupine's conformance files and long single-object histories."""
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--suite", choices=["jepsen", "porcupine-data"], default="jepsen", help="which benchmark")
    ap.add_argument("--time-limit", type=float, default=60.0, metavar="S", help="per file and checker (jepsen)")
    ap.add_argument("--memory-cap", type=float, default=4.0, metavar="GB", help="kill a checker past this RSS")
    ap.add_argument("--keep", metavar="DIR", help="write (or reuse) the generated histories in DIR")
    ap.add_argument("--shapes", default=",".join(SHAPES), help=f"comma list of {', '.join(SHAPES)}")
    ap.add_argument("--no-porcupine", action="store_true", help="ours only")
    ap.add_argument("--repeat", type=int, default=3, help="timed runs per file, best printed (porcupine-data)")
    ap.add_argument("--data", default=str(DATA), help="the porcupine data folder (porcupine-data)")
    ap.add_argument("--quiet", action="store_true", help="totals only (porcupine-data)")
    args = ap.parse_args()
    return jepsen(args) if args.suite == "jepsen" else conformance(args)


if __name__ == "__main__":
    sys.exit(main())
