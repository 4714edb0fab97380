"""Helpers shared by the harness tests (paths, the wrack executable, the stand-in broker)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
STANDIN = f"{sys.executable} {ROOT / 'tests' / 'clusters' / 'standin_broker.py'}"


def wrack_bin() -> str:
    p = Path(sys.executable).parent / "wrack"
    return str(p) if p.exists() else shutil.which("wrack") or "wrack"


def broker_runs() -> bool:
    """True once `wrack-broker` is the real broker (not the placeholder that exits 254)."""
    import subprocess

    exe = Path(sys.executable).parent / "wrack-broker"
    try:
        p = subprocess.run([str(exe), "--help"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return False
    return p.returncode == 0
