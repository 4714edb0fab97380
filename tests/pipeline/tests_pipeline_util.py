"""Helpers of the pipeline tests: the wrack CLI, Spark daemons.

Spark daemons (a standalone master and worker, a Spark Connect server) are started from
the pyspark installation (`spark-class`, `spark-submit`), bound to 127.0.0.1, in their
own process group, and killed with everything they started when the context exits.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

VENV_BIN = Path(sys.executable).parent


def run_wrack(args: list[str], *, cwd: Path, timeout: float = 600, env: dict[str, str] | None = None
              ) -> subprocess.CompletedProcess[str]:
    e = {k: v for k, v in os.environ.items() if k not in ("SPARK_MASTER", "SPARK_REMOTE")}
    e.update(env or {})
    return subprocess.run([str(VENV_BIN / "wrack"), *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env=e)


def spark_home() -> str:
    from pyspark.find_spark_home import _find_spark_home

    return _find_spark_home()


def daemon_env(tmp: Path) -> dict[str, str]:
    return {**os.environ, "SPARK_HOME": spark_home(), "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_LOG_DIR": str(tmp / "logs"), "SPARK_WORKER_DIR": str(tmp / "work"),
            "SPARK_LOCAL_DIRS": str(tmp / "local"), "PYSPARK_PYTHON": sys.executable,
            "PYTHONWARNINGS": "ignore::FutureWarning"}


@contextlib.contextmanager
def daemon(cmd: list[str], env: dict[str, str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """Run `cmd` in its own process group; on exit kill the group (TERM, then KILL)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "wb") as out:
        p = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        yield p
    finally:
        for sig, wait in ((signal.SIGTERM, 20), (signal.SIGKILL, 10)):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, sig)
            try:
                p.wait(wait)
                break
            except subprocess.TimeoutExpired:
                continue
        _reap_group(p.pid)


def _reap_group(pgid: int) -> None:
    """Wait until no process of the group is left (executors, Python workers)."""
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)
            time.sleep(0.2)
            continue
        return


def wait_for(what: str, probe: Callable[[], Any], timeout: float, log: Path | None = None) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError, ValueError):
            got = probe()
            if got:
                return got
        time.sleep(0.5)
    tail = log.read_text(errors="replace")[-3000:] if log and log.exists() else ""
    raise AssertionError(f"timed out waiting for {what}\n{tail}")


def master_state(webui_port: int) -> dict[str, Any]:
    with urllib.request.urlopen(f"http://127.0.0.1:{webui_port}/json/", timeout=5) as r:
        return json.loads(r.read())
