"""Synthetic run folders: simulated Kafka queue histories, correct unless told otherwise.

A small discrete-event simulation of Jepsen's kafka workload against an ideal broker:
`concurrency` workers, each one a Jepsen process (a new process id after every `info`),
send to random keys, poll their assigned keys, re-assign, crash; a final phase assigns
every key from the beginning and polls until everything is read. Effects happen at the
completion instant, so the history is correct by construction. Nemesis windows
(start-X/stop-X events) make ops slower and less available while they are open.

`plant` asks for anomalies of chosen types (`PLANTABLE`), injected as a faulty broker or
client would cause them (a hidden acknowledged record, a truncated and reused offset, a
duplicated append, a failed send that was appended, a consumer that skips or rewinds).
Planting a type always makes the history show that type; some bring related types along
(a truncated offset is also a lost write, a hidden record also makes consumers skip).

`write_run` writes one run folder as RUN_LAYOUT describes (test.json + history.jsonl,
optionally torn or damaged); `write_campaign` writes many, one cell of a configuration
matrix each, and is what the tests and `bench/pipeline.py` share. Everything is
deterministic in the seed.
"""

from __future__ import annotations

import heapq
import itertools
import json
import multiprocessing as mp
import os
import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from contracts.history import dumps

PLANTABLE_LOG = ("nonlinearizable",)  # the log workload: a read that misses an acknowledged send
PLANTABLE = (
    "lost-write",
    "unseen",
    "duplicate",
    "inconsistent-offsets",
    "G1a",
    "poll-skip",
    "nonmonotonic-poll",
    "int-poll-skip",
    "int-nonmonotonic-poll",
)

MS = 1_000_000  # ns


@dataclass
class SynthConfig:
    """What to simulate. `ops` counts client operations (an invoke and its completion)."""

    ops: int = 2_000
    keys: int = 6
    concurrency: int = 8
    seed: int = 0
    p_send: float = 0.5
    p_assign: float = 0.03
    p_crash: float = 0.005
    p_send_fail: float = 0.01
    p_send_info: float = 0.004
    p_poll_info: float = 0.002
    max_poll: int = 6
    final_poll: int = 500
    latency_ms: float = 2.0
    nemesis: tuple[str, ...] = ("partition",)
    nemesis_interval_s: float = 2.0
    fault_slowdown: float = 4.0
    fault_unavailability: float = 0.25
    plant: dict[str, int] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)
    workload: str = "queue"  # or "log": per-key send -> offset and read-at-offset (workloads/log.py)


@dataclass
class SynthRun:
    """What `write_run` wrote: the folder, its run id, counts, and what was planted where."""

    path: Path
    run_id: str
    ops: int
    events: int
    planted: dict[str, list[dict[str, Any]]]


class _Entry:
    __slots__ = ("value", "hidden")

    def __init__(self, value: int, hidden: bool = False):
        self.value = value
        self.hidden = hidden


@dataclass
class _Worker:
    wid: int
    process: int
    keys: list[str] = field(default_factory=list)
    pos: dict[str, int] = field(default_factory=dict)
    has_read: set[str] = field(default_factory=set)
    pending: dict[str, Any] | None = None


class _Sim:
    """The simulation of one run; `events()` yields history events in time order."""

    def __init__(self, cfg: SynthConfig):
        self.cfg = cfg
        self.rng = random.Random(cfg.seed)
        self.keys = [f"k{i}" for i in range(cfg.keys)]
        self.logs: dict[str, list[_Entry]] = {k: [] for k in self.keys}
        self.retired: set[str] = set()
        self.next_value = 0
        self.next_process = cfg.concurrency
        self.planted: dict[str, list[dict[str, Any]]] = {}
        self.faults_open = 0
        # Planting schedule: op number -> anomaly types to plant at or after that op.
        self.todo: list[tuple[int, str]] = []
        plantable = PLANTABLE_LOG if cfg.workload == "log" else PLANTABLE
        for kind, n in sorted(cfg.plant.items()):
            if kind not in plantable:
                raise ValueError(f"cannot plant {kind!r} in a {cfg.workload} run (plantable: {', '.join(plantable)})")
            lo, hi = (0.85, 0.95) if kind == "unseen" else (0.1, 0.75)
            for _ in range(n):
                self.todo.append((int(cfg.ops * self.rng.uniform(lo, hi)), kind))
        self.todo.sort()
        self.armed: list[str] = []  # types due now, waiting for a suitable op
        self._now = 0

    # -------------------------------------------------------------- helpers

    def _latency(self) -> int:
        base = self.rng.expovariate(1.0 / self.cfg.latency_ms) * MS + 100_000
        if self.faults_open:
            base *= self.cfg.fault_slowdown
        return int(base)

    def _note(self, kind: str, **what: Any) -> None:
        self.planted.setdefault(kind, []).append(what)
        self.armed.remove(kind)

    def _new_process(self, w: _Worker) -> None:
        w.process = self.next_process
        self.next_process += 1
        w.keys, w.pos, w.has_read = [], {}, set()

    def _readable(self, key: str, start: int, n: int) -> tuple[list[list[int]], int]:
        """Up to n visible records of key from offset `start`; returns them and the next position."""
        log = self.logs[key]
        out: list[list[int]] = []
        o = start
        while o < len(log) and len(out) < n:
            e = log[o]
            if not e.hidden:
                out.append([o, e.value])
            o += 1
        return out, o

    # -------------------------------------------------------------- ops

    def _choose(self, w: _Worker, op_no: int) -> dict[str, Any]:
        r = self.rng.random()
        if not w.keys or r < self.cfg.p_assign:
            n = self.rng.randint(1, min(3, len(self.keys)))
            return {"f": "assign", "value": sorted(self.rng.sample(self.keys, n))}
        if r < self.cfg.p_assign + self.cfg.p_crash:
            return {"f": "crash", "value": None}
        if self.rng.random() < self.cfg.p_send:
            live = [k for k in self.keys if k not in self.retired] or self.keys
            k = self.rng.choice(live)
            v = self.next_value
            self.next_value += 1
            return {"f": "send", "value": [["send", k, v]]}
        return {"f": "poll", "value": [["poll"]]}

    def _complete(self, w: _Worker, op: dict[str, Any]) -> tuple[str, Any]:
        """Apply `op` at its completion instant; returns (type, completion value)."""
        f = op["f"]
        rng = self.rng
        unavailable = self.faults_open and rng.random() < self.cfg.fault_unavailability
        if f == "assign":
            keys = op["value"]
            for k in keys:
                if k not in w.pos:
                    w.pos[k] = 0 if rng.random() < 0.1 else max(0, len(self.logs[k]) - rng.randint(0, 10))
            w.pos = {k: w.pos[k] for k in keys}
            w.has_read = set()  # a new assignment: consecutive-poll checks start afresh
            w.keys = list(keys)
            return "ok", keys
        if f == "crash":
            return "info", None
        if f == "send":
            _, k, v = op["value"][0]
            log = self.logs[k]
            if unavailable or rng.random() < self.cfg.p_send_fail:
                if "G1a" in self.armed and k not in self.retired:
                    log.append(_Entry(v))
                    self._note("G1a", key=k, value=v, offset=len(log) - 1)
                return "fail", op["value"]
            if rng.random() < self.cfg.p_send_info:
                if rng.random() < 0.5:
                    log.append(_Entry(v))
                return "info", op["value"]
            o = len(log)
            log.append(_Entry(v, hidden=k in self.retired))  # a retired key's later records stay unseen too
            if "lost-write" in self.armed and k not in self.retired:
                log[o].hidden = True
                self._note("lost-write", key=k, value=v, offset=o)
            elif "unseen" in self.armed and k not in self.retired and len(self.retired) < len(self.keys) - 1:
                log[o].hidden = True
                self.retired.add(k)
                self._note("unseen", key=k, value=v, offset=o)
            elif "inconsistent-offsets" in self.armed and k not in self.retired:
                log.pop()  # the acknowledged record is truncated away; its offset will be reused
                self._note("inconsistent-offsets", key=k, value=v, offset=o)
            elif "duplicate" in self.armed and k not in self.retired:
                log.append(_Entry(v))
                self._note("duplicate", key=k, value=v, offsets=[o, o + 1])
            return "ok", [["send", k, [o, v]]]
        # poll
        if unavailable:
            return "fail", op["value"]
        if rng.random() < self.cfg.p_poll_info:
            return "info", op["value"]
        got: dict[str, list[list[int]]] = {}
        for k in w.keys:
            start = w.pos[k]
            n = rng.randint(0, self.cfg.max_poll)
            if n == 0:
                continue
            if k in w.has_read and "poll-skip" in self.armed and start + 1 < len(self.logs[k]) and not any(
                    e.hidden for e in self.logs[k][start - 1:start + 2]):
                self._note("poll-skip", key=k, process=w.process, skipped_offset=start)
                start += 1
            elif k in w.has_read and "nonmonotonic-poll" in self.armed and start >= 1 and not any(
                    e.hidden for e in self.logs[k][start - 1:start + 1]):
                self._note("nonmonotonic-poll", key=k, process=w.process, offset=start - 1)
                start -= 1
            msgs, nxt = self._readable(k, start, n)
            if len(msgs) >= 3 and "int-poll-skip" in self.armed and msgs[1][0] == msgs[0][0] + 1 \
                    and msgs[2][0] == msgs[1][0] + 1:
                self._note("int-poll-skip", key=k, process=w.process, skipped_offset=msgs[1][0])
                del msgs[1]
            elif len(msgs) >= 2 and "int-nonmonotonic-poll" in self.armed:
                self._note("int-nonmonotonic-poll", key=k, process=w.process, offset=msgs[0][0])
                msgs.insert(1, list(msgs[0]))
            w.pos[k] = nxt
            if msgs:
                got[k] = msgs
                w.has_read.add(k)
        return "ok", [["poll", got]]

    # -------------------------------------------------------------- the run

    def events(self) -> Iterable[dict[str, Any]]:
        cfg = self.cfg
        rng = self.rng
        workers = [_Worker(i, i) for i in range(cfg.concurrency)]
        heap: list[tuple[int, int, int]] = []  # (time, seq, worker id; -1 = nemesis)
        seq = itertools.count()
        for w in workers:
            heapq.heappush(heap, (rng.randint(0, MS), next(seq), w.wid))
        fault_kinds = list(cfg.nemesis)
        interval = int(cfg.nemesis_interval_s * 1e9)
        if fault_kinds and interval > 0:
            heapq.heappush(heap, (interval, next(seq), -1))
        nemesis_state: dict[str, Any] = {"i": 0, "open": None}
        started = 0
        done = 0
        index = 0
        t = 0
        while heap:
            t, _, wid = heapq.heappop(heap)
            if wid == -1:
                if started >= cfg.ops and nemesis_state["open"] is None:
                    continue
                if nemesis_state["open"] is None:
                    kind = fault_kinds[nemesis_state["i"] % len(fault_kinds)]
                    nemesis_state["i"] += 1
                    nemesis_state["open"] = kind
                    self.faults_open += 1
                    f, val = _fault_start(kind, rng)
                else:
                    kind = nemesis_state["open"]
                    nemesis_state["open"] = None
                    self.faults_open -= 1
                    f, val = _fault_stop(kind)
                yield {"index": index, "time": t, "process": "nemesis", "type": "info", "f": f, "value": val}
                index += 1
                if started < cfg.ops or nemesis_state["open"] is not None:
                    heapq.heappush(heap, (t + interval, next(seq), -1))
                continue
            w = workers[wid]
            if w.pending is None:
                if started >= cfg.ops:
                    continue
                while self.todo and self.todo[0][0] <= started:
                    self.armed.append(self.todo.pop(0)[1])
                op = self._choose(w, started)
                started += 1
                w.pending = op
                op["_t"] = t
                yield {"index": index, "time": t, "process": w.process, "type": "invoke", "f": op["f"],
                       "value": op["value"]}
                index += 1
                heapq.heappush(heap, (t + self._latency(), next(seq), wid))
            else:
                op = w.pending
                w.pending = None
                self._now = t
                typ, val = self._complete(w, op)
                yield {"index": index, "time": t, "process": w.process, "type": typ, "f": op["f"], "value": val}
                index += 1
                done += 1
                if typ == "info":
                    self._new_process(w)
                heapq.heappush(heap, (t + int(rng.expovariate(1.0 / 0.2) * MS), next(seq), wid))
        yield from self._final_phase(t + 10 * MS, index)

    def _final_phase(self, t: int, index: int) -> Iterable[dict[str, Any]]:
        p = self.next_process
        self.next_process += 1
        keys = list(self.keys)
        yield {"index": index, "time": t, "process": p, "type": "invoke", "f": "assign", "value": keys}
        yield {"index": index + 1, "time": t + MS, "process": p, "type": "ok", "f": "assign", "value": keys}
        index += 2
        t += 2 * MS
        pos = dict.fromkeys(keys, 0)
        while True:
            got: dict[str, list[list[int]]] = {}
            for k in keys:
                msgs, nxt = self._readable(k, pos[k], self.cfg.final_poll)
                pos[k] = nxt
                if msgs:
                    got[k] = msgs
            yield {"index": index, "time": t, "process": p, "type": "invoke", "f": "poll", "value": [["poll"]]}
            yield {"index": index + 1, "time": t + MS, "process": p, "type": "ok", "f": "poll",
                   "value": [["poll", got]]}
            index += 2
            t += 2 * MS
            if not got:
                break


class _LogSim(_Sim):
    """The log workload: `send` [k, v] -> [k, [offset, v]]; `read` [k, o] -> [k, [o, v or null]]."""

    def __init__(self, cfg: SynthConfig):
        super().__init__(cfg)
        self.acked: dict[str, dict[int, int]] = {k: {} for k in self.keys}  # offset -> ack time

    def _choose(self, w: _Worker, op_no: int) -> dict[str, Any]:
        k = self.rng.choice(self.keys)
        if self.rng.random() < self.cfg.p_send:
            v = self.next_value
            self.next_value += 1
            return {"f": "send", "value": [k, v]}
        top = max(self.acked[k], default=-1)
        return {"f": "read", "value": [k, max(0, top + 1 - self.rng.randint(0, 4))]}

    def _complete(self, w: _Worker, op: dict[str, Any]) -> tuple[str, Any]:
        rng = self.rng
        unavailable = self.faults_open and rng.random() < self.cfg.fault_unavailability
        k, x = op["value"]
        log = self.logs[k]
        if op["f"] == "send":
            if unavailable or rng.random() < self.cfg.p_send_fail:
                return "fail", None
            if rng.random() < self.cfg.p_send_info:
                if rng.random() < 0.5:
                    log.append(_Entry(x))
                return "info", None
            log.append(_Entry(x))
            o = len(log) - 1
            self.acked[k][o] = self._now
            return "ok", [k, [o, x]]
        if unavailable:
            return "fail", None
        if x < len(log):
            if "nonlinearizable" in self.armed and self.acked[k].get(x, self._now) < op["_t"]:
                self._note("nonlinearizable", key=k, offset=x, value=log[x].value)
                return "ok", [k, [x, None]]  # a stale read: offset x was acknowledged before the read began
            return "ok", [k, [x, log[x].value]]
        return "ok", [k, [x, None]]

    def _final_phase(self, t: int, index: int) -> Iterable[dict[str, Any]]:
        return ()


def _fault_start(kind: str, rng: random.Random) -> tuple[str, Any]:
    if kind == "kill":
        return "kill", {"nodes": [f"n{rng.randint(1, 5)}"]}
    if kind == "pause":
        return "pause", {"nodes": [f"n{rng.randint(1, 5)}"]}
    return f"start-{kind}", {"grudge": "majority", "nodes": ["n1", "n2"]}


def _fault_stop(kind: str) -> tuple[str, Any]:
    if kind == "kill":
        return "start", {"nodes": "all"}
    if kind == "pause":
        return "resume", {"nodes": "all"}
    return f"stop-{kind}", None


# ------------------------------------------------------------------ writing run folders

BASE_TIME = datetime(2026, 1, 1, tzinfo=UTC)


def default_options(cfg: SynthConfig) -> dict[str, Any]:
    """The test options recorded in test.json (RUN_LAYOUT), with `cfg.options` on top."""
    opts: dict[str, Any] = {
        "backend": "local", "nodes": 5, "workload": cfg.workload, "nemesis": list(cfg.nemesis),
        "nemesis_interval": cfg.nemesis_interval_s, "acks": "all", "rf": 3, "min_isr": 2,
        "partitions": cfg.keys, "flush_policy": "default", "safeguards_off": [],
        "time_limit": 60, "rate": 1000, "concurrency": cfg.concurrency,
    }
    opts.update(cfg.options)
    return opts


def write_run(root: str | os.PathLike[str], cfg: SynthConfig, *, name: str = "synth", stamp: int = 0,
              campaign: dict[str, Any] | None = None, torn_tail: bool = False,
              garbage_at: float | None = None, with_results: Callable[[Path], dict[str, Any]] | None = None,
              ) -> SynthRun:
    """Write one run folder `root/<name>/<timestamp>/` and return what was written.

    `stamp` picks the timestamp (BASE_TIME + stamp seconds) so runs of one test differ.
    `torn_tail` ends the history in half a line (a harness killed mid-write);
    `garbage_at` (0..1) puts a non-JSON line at that fraction of the file (a damaged
    history). `with_results(run_dir)` may return a checker result to store as results.json.
    """
    start = BASE_TIME + timedelta(seconds=stamp)
    ts = start.strftime("%Y%m%dT%H%M%S.") + f"{start.microsecond // 1000:03d}"
    run_dir = Path(root) / name / ts
    sim = _LogSim(cfg) if cfg.workload == "log" else _Sim(cfg)  # refuses a bad config before any write
    run_dir.mkdir(parents=True, exist_ok=True)
    hist = run_dir / "history.jsonl"
    events = 0
    ops = 0
    last_t = 0
    buf: list[bytes] = []
    with open(hist, "wb") as f:
        for ev in sim.events():
            buf.append(dumps(ev))
            events += 1
            if ev["type"] == "invoke":
                ops += 1
            last_t = ev["time"]
            if len(buf) >= 4096:
                f.write(b"\n".join(buf) + b"\n")
                buf.clear()
        if buf:
            f.write(b"\n".join(buf) + b"\n")
    if garbage_at is not None:
        _insert_garbage(hist, garbage_at)
    if torn_tail:
        with open(hist, "ab") as f:
            f.write(b'{"index": 999999999, "time": 1, "process": 0, "type": "ok", "f": "po')
    run_id = f"{name}/{ts}"
    end = start + timedelta(microseconds=last_t // 1000)
    test = {
        "name": name, "run_id": run_id, "start": start.isoformat(), "end": end.isoformat(),
        "seed": cfg.seed, "options": default_options(cfg),
        "versions": {"wrack": "0.1.0", "python": "3.11", "confluent_kafka": "2.3.0", "librdkafka": "2.3.0"},
        "git": {"rev": "synthetic", "dirty": False},
    }
    if campaign is not None:
        test["campaign"] = campaign
    (run_dir / "test.json").write_text(json.dumps(test, indent=1))
    if with_results is not None:
        (run_dir / "results.json").write_text(json.dumps(with_results(run_dir), default=str))
    return SynthRun(run_dir, run_id, ops, events, sim.planted)


def _insert_garbage(path: Path, at: float) -> None:
    lines = path.read_bytes().splitlines(keepends=True)
    i = max(1, min(len(lines) - 1, int(len(lines) * at)))
    lines.insert(i, b"this is not json\n")
    path.write_bytes(b"".join(lines))


# ------------------------------------------------------------------ campaigns

MATRIX: dict[str, list[Any]] = {
    "nemesis": [["partition"], ["kill"], ["partition", "kill"]],
    "acks": ["all", "1"],
    "min_isr": [1, 2],
    "flush_policy": ["default", "every-write"],
    "safeguards_off": [[], ["elr"]],
}


def cells(matrix: dict[str, list[Any]] | None = None) -> list[dict[str, Any]]:
    """Every combination of the matrix's values, in a stable order."""
    m = matrix or MATRIX
    names = list(m)
    return [dict(zip(names, combo, strict=True)) for combo in itertools.product(*(m[n] for n in names))]


def unsafe(cell: dict[str, Any]) -> bool:
    """Whether a configuration may lose acknowledged writes (drives `plant_unsafe`)."""
    return cell.get("acks") == "1" or bool(cell.get("safeguards_off")) or cell.get("min_isr", 2) < 2


def write_campaign(root: str | os.PathLike[str], *, runs: int, total_ops: int, seed: int = 0,
                   name: str = "campaign", matrix: dict[str, list[Any]] | None = None,
                   plant: dict[str, int] | None = None, plant_unsafe: float = 0.0,
                   keys: int = 8, concurrency: int = 10, workers: int = 1,
                   **cfg_overrides: Any) -> list[SynthRun]:
    """Write `runs` run folders under `root`, `total_ops` client ops in all, one matrix cell each.

    Runs cycle through the cells of `matrix`; run i is test `<name>-<cell number>` with
    campaign info in test.json. `plant` is planted in every run; with `plant_unsafe` = p, a
    run of an unsafe cell (acks=1, a safeguard off, min ISR 1) gets a lost write with
    probability p, so that analytics have something to find. `workers` > 1 writes runs in
    that many processes.
    """
    cs = cells(matrix)
    rng = random.Random(seed)
    per_run = max(1, total_ops // runs)
    jobs = []
    for i in range(runs):
        cell = cs[i % len(cs)]
        p = dict(plant or {})
        if plant_unsafe and unsafe(cell) and rng.random() < plant_unsafe:
            p["lost-write"] = p.get("lost-write", 0) + 1
        n_ops = per_run + (total_ops - per_run * runs if i == runs - 1 else 0)
        opts = {k: v for k, v in cell.items()}
        cfg = SynthConfig(ops=n_ops, keys=keys, concurrency=concurrency, seed=seed * 100_003 + i,
                          nemesis=tuple(cell.get("nemesis", ("partition",))), plant=p, options=opts,
                          **cfg_overrides)
        camp = {"name": name, "cell": cell, "repeat": i // len(cs)}
        jobs.append((str(root), cfg, f"{name}-c{i % len(cs):02d}", i, camp))
    if workers > 1:
        with mp.get_context("fork").Pool(workers) as pool:
            return pool.starmap(_write_job, jobs)
    return [_write_job(*j) for j in jobs]


def _write_job(root: str, cfg: SynthConfig, name: str, stamp: int, camp: dict[str, Any]) -> SynthRun:
    return write_run(root, cfg, name=name, stamp=stamp, campaign=camp)
