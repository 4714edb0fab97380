"""Build the project's wheel (`pip wheel --no-deps`) once per process, for remote installs."""

from __future__ import annotations

import functools
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@functools.lru_cache(maxsize=1)
def build_wheel() -> str:
    """The path of a freshly built `wrack-*.whl` (in a temp dir that lives as long as the process)."""
    out = tempfile.mkdtemp(prefix="wrack-wheel-")
    base = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", out, str(ROOT)]
    # without build isolation when the venv can build wheels itself (no registry needed)
    p = subprocess.run([*base, "--no-build-isolation"], capture_output=True, timeout=300)
    if p.returncode != 0:
        p = subprocess.run(base, capture_output=True, timeout=600)
    if p.returncode != 0:
        raise RuntimeError(f"pip wheel failed: {p.stderr.decode(errors='replace').strip().splitlines()[-1:]}")
    wheels = sorted(Path(out).glob("wrack-*.whl"))
    if not wheels:
        raise RuntimeError(f"pip wheel produced no wheel in {out}")
    return str(wheels[-1])
