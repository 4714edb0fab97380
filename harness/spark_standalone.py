"""A standalone Spark cluster on this host, for the tests and the benchmarks: one master and N
workers started from the .venv's pyspark (`spark-class`), on 127.0.0.1.

`standalone(workers=2, cores=1)` is a context manager yielding a `Standalone` (its `url`,
`spark://127.0.0.1:PORT`); each daemon runs in a process group of its own (the worker's
executors and their Python workers in it), logs, work and scratch folders go to one
temporary folder, and on the way out every group is killed (TERM, then KILL) and the
folder removed. `kill_worker(i)` SIGKILLs worker i's whole group at once, as a lost host
would be: its executor and Python workers die with it.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.netutil import free_port


def spark_home() -> str:
    """The pyspark installation's folder (it holds bin/spark-class)."""
    # lazy: pyspark only for a Spark cluster
    from pyspark.find_spark_home import _find_spark_home

    return str(_find_spark_home())


@dataclass
class Standalone:
    """A running standalone cluster (see the module docstring)."""

    url: str
    ui_port: int
    folder: Path
    env: dict[str, str]
    master: subprocess.Popen[bytes] | None = None
    workers: list[subprocess.Popen[bytes] | None] = field(default_factory=list)

    def state(self) -> dict[str, Any]:
        """The master's state (its web UI's /json/)."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=5) as r:
            return dict(json.loads(r.read()))

    def alive_workers(self) -> int:
        return int(_status(self).get("aliveworkers", 0))

    def kill_worker(self, i: int) -> None:
        """SIGKILL worker i's process group (the worker, its executor, their Python workers)."""
        p = self.workers[i]
        if p is not None:
            _kill_group(p, signal.SIGKILL)
            self.workers[i] = None

    def _start(self, name: str, cmd: list[str]) -> subprocess.Popen[bytes]:
        with open(self.folder / f"{name}.log", "wb") as log:
            return subprocess.Popen(cmd, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True)


def _kill_group(p: subprocess.Popen[bytes], sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(p.pid, sig)
    with contextlib.suppress(subprocess.TimeoutExpired):
        p.wait(20)
    deadline = time.monotonic() + 15  # the rest of the group (executors, Python workers)
    while time.monotonic() < deadline:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            return
        time.sleep(0.2)


def _wait(what: str, probe: Any, timeout: float, log: Path) -> None:
    deadline = time.monotonic() + timeout
    while not probe():
        if time.monotonic() > deadline:
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise RuntimeError(f"timed out after {timeout:g} s waiting for {what}\n{tail}")
        time.sleep(0.5)


@contextlib.contextmanager
def standalone(workers: int = 2, cores: int = 1, memory: str = "2g", port: int | None = None,
               timeout: float = 180.0) -> Iterator[Standalone]:
    """Start a master and `workers` workers of `cores` cores each (module docstring)."""
    folder = Path(tempfile.mkdtemp(prefix="wrack-spark-"))
    home = spark_home()
    env = {**os.environ, "SPARK_HOME": home, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable,
           "SPARK_LOG_DIR": str(folder / "logs"), "SPARK_WORKER_DIR": str(folder / "work"),
           "SPARK_LOCAL_DIRS": str(folder / "local"), "PYTHONWARNINGS": "ignore::FutureWarning"}
    port = port or free_port()
    sc = Standalone(f"spark://127.0.0.1:{port}", free_port(), folder, env)
    klass = os.path.join(home, "bin", "spark-class")
    try:
        sc.master = sc._start("master", [klass, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                         "--port", str(port), "--webui-port", str(sc.ui_port)])
        _wait("the master", lambda: _status(sc).get("status") == "ALIVE", timeout, folder / "master.log")
        for i in range(workers):
            sc.workers.append(sc._start(f"worker{i}", [
                klass, "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--cores", str(cores),
                "--memory", memory, "--webui-port", "0", "--work-dir", str(folder / f"work{i}"), sc.url]))
        _wait(f"{workers} workers", lambda: sc.alive_workers() >= workers, timeout, folder / "worker0.log")
        yield sc
    finally:
        for p in [*sc.workers, sc.master]:
            if p is not None:
                _kill_group(p, signal.SIGTERM)
        shutil.rmtree(folder, ignore_errors=True)


def _status(sc: Standalone) -> dict[str, Any]:
    """The master's state, {} while it does not answer."""
    try:
        return sc.state()
    except (OSError, ValueError):
        return {}
