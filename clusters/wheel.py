"""Build the project's wheel (`pip wheel --no-deps`) once per process, for remote installs.

The wheel is built from a copy of the source tree (without .git, .venv, build/, results
and caches), so nothing is written into the checkout and a module deleted from the
checkout can never linger in the wheel through a stale `build/` folder. The wheel's
temporary directory is removed when the process exits at the latest (callers that build
uncached, via `build_wheel.__wrapped__()`, may remove `Path(wheel).parent` earlier).
"""

from __future__ import annotations

import atexit
import functools
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_SKIP = shutil.ignore_patterns(".git", ".venv", "build", "dist", "results", "campaign-results", "*.egg-info",
                               "__pycache__", ".pytest_cache", ".ruff_cache", ".hypothesis", "tests", "bench")


@functools.lru_cache(maxsize=1)
def build_wheel() -> str:
    """The path of a freshly built `wrack-*.whl` (in a temp dir removed at process exit)."""
    out = tempfile.mkdtemp(prefix="wrack-wheel-")
    src = tempfile.mkdtemp(prefix="wrack-wheel-src-")
    try:
        tree = Path(src) / "wrack"
        shutil.copytree(ROOT, tree, ignore=_SKIP, symlinks=True)
        base = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", out, str(tree)]
        # without build isolation when the venv can build wheels itself (no registry needed)
        p = subprocess.run([*base, "--no-build-isolation"], capture_output=True, timeout=300)
        if p.returncode != 0:
            p = subprocess.run(base, capture_output=True, timeout=600)
    finally:
        shutil.rmtree(src, ignore_errors=True)
    if p.returncode != 0:
        shutil.rmtree(out, ignore_errors=True)
        raise RuntimeError(f"pip wheel failed: {p.stderr.decode(errors='replace').strip().splitlines()[-1:]}")
    wheels = sorted(Path(out).glob("wrack-*.whl"))
    if not wheels:
        shutil.rmtree(out, ignore_errors=True)
        raise RuntimeError(f"pip wheel produced no wheel in {out}")
    atexit.register(shutil.rmtree, out, True)  # harmless if the caller removed it already
    return str(wheels[-1])
