"""Bind the real `checkers` package before `tests/checkers/` (no __init__.py, on sys.path via
pytest's rootdir insertion) can shadow it as a namespace package."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
if "checkers" in sys.modules and getattr(sys.modules["checkers"], "__file__", None) is None:
    for name in [m for m in sys.modules if m == "checkers" or m.startswith("checkers.")]:
        del sys.modules[name]  # a namespace package made of test folders: forget it

import checkers.linearizable  # noqa: E402,F401 - the real package, now cached in sys.modules
