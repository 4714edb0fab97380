"""Shared fixtures: paths to the shared data and the project's executables."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("WRACK_SHARED", ROOT.parent / "shared"))
VENV_BIN = Path(sys.executable).parent


def wrack_bin() -> str:
    """The `wrack` console script of this environment."""
    p = VENV_BIN / "wrack"
    return str(p) if p.exists() else shutil.which("wrack") or "wrack"


@pytest.fixture(scope="session")
def shared() -> Path:
    if not SHARED.is_dir():
        pytest.skip(f"shared data not found at {SHARED}")
    return SHARED


def is_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0
