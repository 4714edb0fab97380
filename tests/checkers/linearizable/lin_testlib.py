"""Test helpers for the linearizability checker: run `wrack` as a subprocess."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path


def wrack_bin() -> str:
    """The `wrack` console script of this environment."""
    p = Path(sys.executable).parent / "wrack"
    return str(p) if p.exists() else shutil.which("wrack") or "wrack"


def wrack(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run `wrack ARGS...`, capturing text output."""
    return subprocess.run([wrack_bin(), *args], capture_output=True, text=True, timeout=timeout)


def check(*args: str) -> subprocess.CompletedProcess:
    """`wrack check --checker linearizable ARGS...`."""
    return wrack("check", "--checker", "linearizable", *args)
