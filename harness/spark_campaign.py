"""`wrack campaign FILE --master URL`: a campaign's runs as Spark tasks.

Every (cell, repeat) is one Spark job of one task, all submitted at once from threads of
the driver, in the file's order; Spark's scheduler decides which executor runs which and
when (FIFO), and retries a task whose executor was lost (`spark.task.maxFailures`, 4 on a
cluster): there is no scheduler of our own. The task (harness/campaign_task.py) runs the
test on its executor's host with that host's backend, as `wrack campaign` does; tests that
share a host do not interfere (each has its own cluster name, namespaces, bridge, subnet,
iptables chains, LazyFS mounts and ports: docs/harness.md, "Campaigns on Spark").

Results land in the one campaign folder: executors that see it (one host, or a shared
path: a token file the driver wrote there tells them) write their run folders into its
runs/ directly; the others return them packed and the driver unpacks them (`ship="driver"`
forces that). As each run comes back the driver writes it into the pipeline's Parquet
tables (`tables`, harness/campaign_tables.py) and prints the progress: cells done,
running and failed, runs done and running. A run whose first attempt died with its
executor is marked `retried` (its attempt number in `attempt`); the lost attempt's
partial run folder, if it reached the campaign folder, moves to `lost/`. results.json,
junit.xml, summary.html and `--baseline` are as for a sequential campaign. `per_host` caps
the tests at once on each host (harness/campaign_task.py, `host_slot`).

After the last run, when the tasks ran on this host (local mode, a master on loopback),
the driver removes what a lost attempt left: its test process (given up to `LEFTOVER_WAIT` s
to finish tearing down after its executor died, then killed) and its cluster.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from contracts import store
from harness import campaign as C
from harness import spark_master
from harness.campaign_task import OWNER_ENV, run_task, unpack
from harness.progress import Progress
from harness.runner import RunOutcome

LEFTOVER_WAIT = 90.0
POLL_S = 3.0


@dataclass(frozen=True)
class Slot:
    """One run of the campaign: the cell's index in the file, the cell, the repeat."""

    index: int
    cell: C.Cell = field(compare=False)
    rep: int = 0

    @property
    def group(self) -> str:
        return f"wrack-run-{self.index}-{self.rep}"


def campaign_conf(master: str) -> dict[str, str]:
    """Spark settings of a campaign's application (over pipeline.session's): small JVMs (a
    task only waits for its test process), no speculation (a cell would run twice), no
    locality wait, retries of a task whose executor was lost."""
    conf = {"spark.app.name": "wrack-campaign", "spark.driver.memory": os.environ.get("WRACK_SPARK_DRIVER_MEMORY", "1g"),
            "spark.executor.memory": "1g", "spark.speculation": "false", "spark.locality.wait": "0s",
            "spark.scheduler.mode": "FIFO", "spark.ui.showConsoleProgress": "false"}
    if not master.startswith("local"):
        conf["spark.task.maxFailures"] = "4"
    return conf


class Board:
    """The campaign's progress: runs done/running, cells done/running/failed; one line per change."""

    def __init__(self, spec: C.CampaignSpec, progress: Progress):
        self.spec, self.progress = spec, progress
        self.done: dict[int, list[dict[str, Any]]] = {}
        self.running: set[Slot] = set()
        self.retried = 0
        self._last = ""
        self._lock = threading.Lock()

    def line(self) -> str:
        n_cells, total = len(self.spec.cells), len(self.spec.cells) * self.spec.repeats
        cells_done = [i for i, rs in self.done.items() if len(rs) == self.spec.repeats]
        failed = sum(not all(C.run_meets(self.spec.cells[i].expect, r) for r in rs) for i, rs in self.done.items())
        runs_done = sum(len(rs) for rs in self.done.values())
        cells_running = len({s.index for s in self.running})
        return (f"campaign {self.spec.name}: cells {len(cells_done)}/{n_cells} done, {cells_running} running, "
                f"{failed} failed; runs {runs_done}/{total} done, {len(self.running)} running"
                + (f", {self.retried} retried" if self.retried else ""))

    def show(self) -> None:
        with self._lock:
            text = self.line()
            if text != self._last:
                self._last = text
                self.progress.message(text)

    def set_running(self, slots: set[Slot]) -> None:
        with self._lock:
            self.running = set(slots)
        self.show()

    def finished(self, slot: Slot, record: dict[str, Any]) -> None:
        with self._lock:
            self.done.setdefault(slot.index, []).append(record)
            self.running.discard(slot)
            self.retried += bool(record.get("retried"))
        where = f"{record.get('host') or '?'}, {record['wall_s']:.0f} s"
        self.progress.message(f"  {slot.cell.label()} #{slot.rep + 1}: {record['verdict']}"
                              f"{' (retried)' if record.get('retried') else ''} ({where})"
                              + (f"; error {record['error']}" if record.get("error") else ""))
        self.show()


def _running_slots(sc: Any, pending: set[Slot], stages: dict[Slot, list[int]]) -> set[Slot]:
    """The slots whose task is running now (from Spark's status tracker)."""
    st = sc.statusTracker()
    for s in pending:
        if s not in stages:
            ids = [sid for j in st.getJobIdsForGroup(s.group) for sid in (st.getJobInfo(j).stageIds if st.getJobInfo(j)
                                                                            else [])]
            if ids:
                stages[s] = ids
    active = set(st.getActiveStageIds())
    out = set()
    for s in pending:
        for sid in stages.get(s, []):
            info = st.getStageInfo(sid) if sid in active else None
            if info is not None and info.numActiveTasks > 0:
                out.add(s)
    return out


def _submit(sc: Any, slot: Slot, payload: dict[str, Any], after: Slot | None) -> tuple[dict[str, Any], float]:
    """Run one slot as a Spark job of one task, once the job of the slot `after` it is
    submitted (so Spark's FIFO sees the file's order); (the task's answer, wall seconds)."""
    deadline = time.monotonic() + 10
    while after is not None and not sc.statusTracker().getJobIdsForGroup(after.group) \
            and time.monotonic() < deadline:
        time.sleep(0.02)
    sc.setJobGroup(slot.group, f"{slot.cell.label()} #{slot.rep + 1}", interruptOnCancel=True)
    t0 = time.monotonic()
    try:
        got = sc.parallelize([payload], 1).map(run_task).collect()[0]
    except Exception as e:  # noqa: BLE001 - the job failed for good (every attempt): a crashed run
        msg = next((ln.strip() for ln in str(e).splitlines() if ln.strip()), type(e).__name__)
        got = {"run_dir": None, "results": None, "exit_code": 255, "error": f"spark: {msg[:300]}", "attempt": None}
    return got, round(time.monotonic() - t0, 3)


def _record(got: dict[str, Any], slot: Slot, opened: C.Opened, wall: float) -> dict[str, Any]:
    """The run's entry in results.json (a run folder shipped back is unpacked first)."""
    run_dir = got.get("run_dir")
    if run_dir and got.get("archive") is not None:
        dest = opened.runs_root / got["run_rel"]
        while dest.exists():
            dest = dest.with_name(dest.name + "-1")
        unpack(got["archive"], dest)
        run_dir = str(dest)
    if run_dir:
        out = RunOutcome(Path(run_dir), got.get("results"), got.get("exit_code", 255), got.get("error"))
        rec = C.run_record(out, opened, slot.rep, wall)
    else:
        rec = {"repeat": slot.rep, "run_id": None, "path": None, "valid": None, "verdict": "crashed",
               "anomaly_types": [], "allowed": [], "first_anomaly_time": None,
               "first_bad_anomaly_time": None, "wall_s": wall,
               "exit_code": got.get("exit_code"), "error": got.get("error"), "seed": None}
    attempt = got.get("attempt")
    rec.update(host=got.get("host"), attempt=attempt, retried=bool(attempt))
    if got.get("slot_wait_s"):
        rec["slot_wait_s"] = got["slot_wait_s"]
    return rec


def run_spark_campaign(spec: C.CampaignSpec, *, master: str, root: str | os.PathLike[str] | None = None,
                       overrides: Mapping[str, Any] | None = None, baseline: Mapping[str, Any] | None = None,
                       tables: Any = None, progress: Progress | None = None,
                       timeout: float = spark_master.DEFAULT_TIMEOUT, ship: str = "auto",
                       per_host: int | None = None, on_run: Callable[[C.Cell, int, dict[str, Any]], None] | None = None
                       ) -> tuple[Path, dict[str, Any]]:
    """Run the campaign on Spark (module docstring); (campaign folder, results)."""
    # lazy: pyspark (pipeline.session) costs ~0.3 s; only `--master` campaigns start Spark
    from pipeline.session import session

    progress = progress or Progress(enabled=False)
    master = spark_master.parse(master)
    C.check_cells(spec, overrides)
    spark_master.probe(master, timeout)
    tag = f"campaign-{secrets.token_hex(6)}"
    with session(master, progress=False, conf=campaign_conf(master)) as spark:
        sc = spark.sparkContext
        n = spark_master.wait_for_executors(sc, master, timeout)
        opened = C.open_campaign(spec, root, overrides, extra={"master": master})
        token = secrets.token_hex(16)
        (opened.cdir / ".token").write_text(token)
        progress.message(f"campaign {spec.name}: {len(spec.cells) * spec.repeats} runs on {master} "
                         f"({n} executor(s) now); folder {opened.cdir}")
        slots = [Slot(i, c, r) for i, c in enumerate(spec.cells) for r in range(spec.repeats)]
        board = Board(spec, progress)
        common = {"cdir": str(opened.cdir), "token": token, "tag": tag, "ship": ship, "per_host": per_host}
        by_slot = _run_slots(sc, spec, slots, opened, common, overrides or {}, board, tables, on_run)
    leftovers = _sweep_leftovers(tag) if spark_master.is_local_host(master) else []
    lost = _file_lost_attempts(opened, by_slot)
    cells_out = [C.cell_record(c, [by_slot[Slot(i, c, r)] for r in range(spec.repeats)])
                 for i, c in enumerate(spec.cells)]
    extra = {"master": master, "lost_attempts": lost, "leftovers_removed": leftovers}
    if tables is not None and tables.errors:
        extra["table_errors"] = tables.errors
    (opened.cdir / ".token").unlink(missing_ok=True)
    return opened.cdir, C.finish_campaign(spec, opened, cells_out, baseline, extra=extra)


def _run_slots(sc: Any, spec: C.CampaignSpec, slots: list[Slot], opened: C.Opened, common: dict[str, Any],
               overrides: Mapping[str, Any], board: Board, tables: Any,
               on_run: Callable[[C.Cell, int, dict[str, Any]], None] | None) -> dict[Slot, dict[str, Any]]:
    """Submit every slot, record each as it comes back; {slot: its run's record}."""
    def payload(s: Slot) -> dict[str, Any]:
        o = C.cell_test_options(spec, s.cell, opened.runs_root, overrides)
        return {"options": o.to_dict(), "campaign": C.campaign_record(spec, s.cell, s.rep, opened), **common}

    out: dict[Slot, dict[str, Any]] = {}
    pool = ThreadPoolExecutor(max_workers=min(len(slots), 256), thread_name_prefix="campaign-run")
    try:
        with _watching(sc, board, slots, out):
            futures: dict[Future[Any], Slot] = {
                pool.submit(_submit, sc, s, payload(s), slots[i - 1] if i else None): s for i, s in enumerate(slots)}
            for fut in as_completed(futures):
                s = futures[fut]
                got, wall = fut.result()
                rec = out[s] = _record(got, s, opened, got.get("wall_s") or wall)
                if tables is not None and rec["path"]:
                    tables.add(opened.cdir / rec["path"])
                board.finished(s, rec)
                if on_run is not None:
                    on_run(s.cell, s.rep, rec)
    except BaseException:
        sc.cancelAllJobs()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    return out


@contextlib.contextmanager
def _watching(sc: Any, board: Board, slots: list[Slot], out: Mapping[Slot, Any]) -> Iterator[None]:
    """While inside: every POLL_S s, the board's running slots from Spark's status tracker
    (the slots not yet in `out` whose task is active)."""
    stop = threading.Event()
    stages: dict[Slot, list[int]] = {}

    def monitor() -> None:
        while not stop.wait(POLL_S):
            try:
                board.set_running(_running_slots(sc, {s for s in slots if s not in out}, stages))
            except Exception:  # noqa: BLE001 - progress only; the context may be stopping
                continue

    threading.Thread(target=monitor, name="campaign-progress", daemon=True).start()
    try:
        yield
    finally:
        stop.set()


def _tests_of(tag: str) -> list[int]:
    """This host's test processes of the campaign (`WRACK_CLUSTER_OWNER=tag` in their environment)."""
    needle = f"{OWNER_ENV}={tag}".encode()
    pids = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/environ", "rb") as f:
                    if needle in f.read().split(b"\0"):
                        pids.append(int(d))
            except OSError:
                continue
    return pids


def _sweep_leftovers(tag: str) -> list[str]:
    """What the campaign (`tag`) left on this host after its last run: tests of lost attempts
    still tearing down or checking get `LEFTOVER_WAIT` s to end, then are killed; then their
    clusters are removed. Returns the clusters removed."""
    try:
        # lazy: the local backend only where the tasks ran on this host
        from clusters import local

        if os.geteuid() != 0:
            return []
        deadline = time.monotonic() + LEFTOVER_WAIT
        while (_tests_of(tag) or any(alive for _n, _p, alive in local.owned(tag))) and time.monotonic() < deadline:
            time.sleep(1)
        for pid in _tests_of(tag) + [p for _n, p, alive in local.owned(tag) if alive]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.5)
        return local.sweep_orphans(tag)
    except Exception:  # noqa: BLE001 - best effort: the campaign's results stand
        return []


def _file_lost_attempts(opened: C.Opened, by_slot: Mapping[Slot, dict[str, Any]]) -> list[str]:
    """Run folders in runs/ that no result names (attempts that died with their executor):
    moved to lost/, so the campaign's runs are exactly its results'; their paths there."""
    kept = {str((opened.cdir / r["path"]).resolve()) for r in by_slot.values() if r.get("path")}
    lost = []
    for run in store.find_runs([opened.runs_root]) if opened.runs_root.is_dir() else []:
        if str(Path(run).resolve()) in kept:
            continue
        dest = opened.cdir / "lost" / Path(run).resolve().relative_to(opened.runs_root.resolve())
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(run), str(dest))
        lost.append(os.path.relpath(dest, opened.cdir))
    return lost
