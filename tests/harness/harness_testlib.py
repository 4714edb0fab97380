"""Helpers shared by the harness tests (paths, the wrack executable and a run of it that
shows where it hung, the stand-in broker, a `wrack test` SIGKILLed mid-run)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
STANDIN = f"{sys.executable} {ROOT / 'tests' / 'clusters' / 'standin_broker.py'}"


def wrack_bin() -> str:
    p = Path(sys.executable).parent / "wrack"
    return str(p) if p.exists() else shutil.which("wrack") or "wrack"


def run_wrack(args: list[str], timeout: float, **kw: object) -> subprocess.CompletedProcess:
    """`wrack ARGS` with its output captured, like `subprocess.run`; one that runs over
    `timeout` s is asked for every thread's stack (SIGUSR1, harness/cli.py `entry`), then
    killed, and the AssertionError shows those stacks: a hang in CI says where it was."""
    proc = subprocess.Popen([wrack_bin(), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            **kw)  # type: ignore[call-overload]
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        exited = proc.poll()
        proc.send_signal(signal.SIGUSR1)
        time.sleep(2)
        proc.kill()
        try:
            out, err = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:  # a process it started holds its output open
            out, err = "", ""
        raise AssertionError(f"wrack {' '.join(args)} ran over {timeout:g} s (exit code then: {exited}); "
                             f"its threads:\n{err[-12000:]}\nstdout: {out[-2000:]}") from None
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def force_down(run_dir: Path) -> None:
    """Take down the local cluster of a run (no-op when it is already gone)."""
    from clusters import local

    local.force_down(json.loads((run_dir / "test.json").read_text())["cluster"]["name"])


@contextlib.contextmanager
def sigkilled_run(results: Path, *args: str, min_history: int, timeout: float) -> Iterator[Path]:
    """Start `wrack test --results RESULTS --quiet ARGS`, SIGKILL it once its history holds
    more than `min_history` bytes (AssertionError if that takes over `timeout` s) and yield
    the run folder; afterwards the run's cluster is taken down."""
    proc = subprocess.Popen([wrack_bin(), "test", "--results", str(results), "--quiet", *args],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    run = None
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            hs = list(results.glob("*/*/history.jsonl"))
            if hs and hs[0].stat().st_size > min_history:
                run = hs[0].parent
                break
            time.sleep(0.1)
        assert run is not None, "the run never got going"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        yield run
    finally:
        if proc.poll() is None:
            proc.kill()
        if run is not None:
            force_down(run)
