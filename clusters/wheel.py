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
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                    "-w", out, str(ROOT)], check=True, capture_output=True, timeout=300)
    wheels = sorted(Path(out).glob("wrack-*.whl"))
    if not wheels:
        raise RuntimeError(f"pip wheel produced no wheel in {out}")
    return str(wheels[-1])
