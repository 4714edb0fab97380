"""Helpers shared by the harness tests (paths, the wrack executable, the stand-in broker,
a `wrack test` SIGKILLed mid-run)."""

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
