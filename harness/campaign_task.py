"""One campaign run as a Spark task: the executor's side of harness/spark_campaign.py.

`run_task(payload)` runs in an executor's Python worker, on whatever host Spark picked:

1. it removes this host's orphaned test clusters first (`clusters.local.sweep_orphans`:
   clusters whose owner process is gone, e.g. a test whose executor was lost);
2. it runs the test in a child process, `python -m harness.campaign_task IN OUT`, in a
   session of its own (the Python daemon's SIGHUP to its group on shutdown does not reach
   it) and with PR_SET_PDEATHSIG = SIGTERM: when the worker dies (executor lost, task
   killed, application stopped) the child gets SIGTERM, which the runner's guard
   (nemesis/guard.py) turns into a heal and the teardown of the cluster. The child runs with
   `WRACK_CLUSTER_OWNER` = the campaign's tag in its environment: its cluster records it as
   owner, so a cluster it could not remove is an orphan the next task on this host (or the
   driver at the end) sweeps, and the driver finds the campaign's test processes by it;
3. it returns a dict: the run's outcome (run folder, verdict fields, exit code, error), the
   seconds the test process took (`wall_s`: the run's own time, not its wait for a slot), the
   task's attempt number (> 0: a retry after a lost executor), the host, and, when this
   host cannot see the campaign folder (`payload["token"]` not readable there), the run
   folder packed as tar.gz bytes for the driver to unpack into the campaign's runs/.

A task first takes one of its host's N test slots (`host_slot`: a flock, shared by every
campaign's tasks on the host) and holds it while its test runs: at most N tests at once on a
host, whatever the executors' cores. N is `per_host`, or by default one test per
`CORES_PER_TEST` of the host's cores (at least one): two tests at once on a 2-core host found
fewer bugs than one (docs/harness.md, "Campaigns on Spark").

Payload (JSON-able): options (TestOptions fields; `results` = the campaign's runs folder),
campaign (test.json's campaign record), cdir, token, tag, ship ("auto" / "driver"), per_host.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import io
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

OWNER_ENV = "WRACK_CLUSTER_OWNER"  # clusters.local.OWNER_ENV (read at cluster creation)
PR_SET_PDEATHSIG = 1
RESULT_KEYS = ("valid", "anomaly_types", "allowed", "first_anomaly_time", "first_bad_anomaly_time")


def sees_campaign(cdir: str, token: str) -> bool:
    """Whether this host sees the campaign folder the driver made (the token file it wrote)."""
    try:
        return (Path(cdir) / ".token").read_text().strip() == token
    except OSError:
        return False


def _sweep() -> list[str]:
    try:
        # lazy: only a host with the local backend (root, iproute2) has clusters to sweep
        from clusters import local

        return local.sweep_orphans() if os.geteuid() == 0 else []
    except Exception:  # noqa: BLE001 - best effort: a host without the local backend has none
        return []


def _die_with_parent(parent: int) -> None:
    """preexec_fn of the child: SIGTERM when the worker that started it dies."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    if os.getppid() != parent:  # the parent died before prctl
        os.kill(os.getpid(), signal.SIGTERM)


SLOTS = Path(os.environ.get("WRACK_SLOT_ROOT", "/run/wrack/campaign-slots"))
# a test of five brokers with its clients and faults keeps about two cores busy; a story's
# timing is tuned to that, and under more load its trigger came late or not at all
CORES_PER_TEST = 2


def default_cap(cores: int | None = None) -> int:
    """Tests at once on a host of `cores` cores (this host's by default) without a `per_host`."""
    return max(1, (cores or len(os.sched_getaffinity(0))) // CORES_PER_TEST)


@contextlib.contextmanager
def host_slot(cap: int | None) -> Iterator[float]:
    """With a cap, hold one of this host's `cap` test slots (flock on SLOTS/slot-I.lock, shared
    by every campaign on the host) for the `with` block, waiting for one to be free; yields
    the seconds waited. Without one, nothing is held (a task always has one: `default_cap`)."""
    if not cap:
        yield 0.0
        return
    SLOTS.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    while True:
        for i in range(cap):
            f = open(SLOTS / f"slot-{i}.lock", "a")  # noqa: SIM115 - held until the block ends
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                f.close()
                continue
            try:
                yield round(time.monotonic() - t0, 3)
            finally:
                f.close()
            return
        time.sleep(0.5)


def run_task(payload: dict[str, Any]) -> dict[str, Any]:
    """The Spark task (see the module docstring)."""
    # lazy: pyspark is imported by the worker already; this module is imported by the driver too
    from pyspark import TaskContext

    ctx = TaskContext.get()
    attempt = ctx.attemptNumber() if ctx is not None else 0
    swept = _sweep()
    shared = payload.get("ship") != "driver" and sees_campaign(payload["cdir"], payload["token"])
    # the slot first: a task killed while it waits (the campaign interrupted) leaves no folder
    with host_slot(payload.get("per_host") or default_cap()) as waited:
        return _in_slot(payload, attempt, swept, shared, waited)


def _in_slot(payload: dict[str, Any], attempt: int, swept: list[str], shared: bool, waited: float
             ) -> dict[str, Any]:
    """The task's test, once it holds one of the host's test slots."""
    work = Path(tempfile.mkdtemp(prefix="wrack-task-"))
    try:
        options = dict(payload["options"])
        if not shared:
            options["results"] = str(work / "runs")
        inp, outp = work / "in.json", work / "out.json"
        campaign = {**payload["campaign"], "attempt": attempt}
        inp.write_text(json.dumps({"options": options, "campaign": campaign, "tag": payload["tag"]}))
        code, wall = _run_child(work, payload)
        out: dict[str, Any] = json.loads(outp.read_text()) if outp.exists() else {
            "run_dir": None, "results": None, "exit_code": code,
            "error": f"test process exited {code}: {_tail(work / 'child.log')}"}
        out.update(attempt=attempt, host=socket.gethostname(), swept=swept, shared=shared, wall_s=wall,
                   slot_wait_s=waited)
        if not shared and out.get("run_dir"):
            run_dir = Path(out["run_dir"])
            out["run_rel"] = os.path.relpath(run_dir, options["results"])
            out["archive"] = pack(run_dir)
        return out
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _run_child(work: Path, payload: dict[str, Any]) -> tuple[int, float]:
    """The test process on `work`'s in.json and out.json: (its exit code, its seconds)."""
    parent = os.getpid()
    with open(work / "child.log", "wb") as log:
        p = subprocess.Popen([sys.executable, "-m", "harness.campaign_task", str(work / "in.json"),
                              str(work / "out.json")],
                             stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                             start_new_session=True, preexec_fn=lambda: _die_with_parent(parent),
                             env={**os.environ, "PYTHONWARNINGS": "ignore", OWNER_ENV: payload["tag"]})
        t0 = time.monotonic()
        code = p.wait()
        return code, round(time.monotonic() - t0, 3)


def _tail(path: Path, n: int = 400) -> str:
    try:
        return " ".join(path.read_text(errors="replace")[-n:].split())
    except OSError:
        return ""


def pack(run_dir: Path) -> bytes:
    """A run folder as tar.gz bytes (its entries relative to the folder)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        tar.add(str(run_dir), arcname=".")
    return buf.getvalue()


def unpack(data: bytes, dest: Path) -> None:
    """Unpack a `pack`ed run folder into `dest` (made; entries outside it refused)."""
    dest.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        tar.extractall(dest, filter="data")


def _child(inp: str, outp: str) -> int:
    """The test process: run one test, write its outcome as JSON to `outp`."""
    # lazy: the task's module is imported by every executor's worker; the runner only here
    from harness.progress import Progress
    from harness.runner import TestOptions, run_test

    def interrupted(_sig: int, _frame: Any) -> None:
        raise KeyboardInterrupt("SIGTERM")

    signal.signal(signal.SIGTERM, interrupted)  # the guard takes over while a cluster is up
    signal.signal(signal.SIGHUP, interrupted)
    parent = os.getppid()
    payload = json.loads(Path(inp).read_text())
    out: dict[str, Any]
    try:
        o = TestOptions(**payload["options"])
        r = run_test(o, Progress(enabled=False), campaign=payload["campaign"])
        res = None if r.results is None else {k: r.results.get(k) for k in RESULT_KEYS}
        out = {"run_dir": str(r.run_dir), "results": res, "exit_code": r.exit_code, "error": r.error}
    except KeyboardInterrupt:
        out = {"run_dir": None, "results": None, "exit_code": 130, "error": "interrupted"}
    except Exception as e:  # noqa: BLE001 - the driver records it as a crashed run
        out = {"run_dir": None, "results": None, "exit_code": 255, "error": f"{type(e).__name__}: {e}"}
    if os.getppid() != parent:  # the task is gone: nobody reads the outcome; leave nothing behind
        shutil.rmtree(Path(inp).parent, ignore_errors=True)  # (a run in a shared campaign folder stays)
        return 0
    tmp = outp + ".tmp"
    with open(tmp, "w") as f:
        json.dump(out, f, default=str)
    os.replace(tmp, outp)
    return 0


if __name__ == "__main__":
    with contextlib.suppress(BrokenPipeError):
        sys.exit(_child(sys.argv[1], sys.argv[2]))
