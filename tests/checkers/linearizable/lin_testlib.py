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


def stale_read_history(crashed_value: int = 1) -> list[dict]:
    """Key "a": an acknowledged write of 5, overwritten by an acknowledged write of 3, then a
    read of 5; an indeterminate write of `crashed_value` invoked before, one of 4 after;
    key "b": fine. Invalid unless `crashed_value` is 5."""
    evs: list[dict] = []

    def op(p, f, inv, typ, out, t0, t1):
        evs.append({"process": p, "type": "invoke", "f": f, "value": inv, "time": t0})
        if typ is not None:
            evs.append({"process": p, "type": typ, "f": f, "value": out, "time": t1})

    op(0, "write", ["a", 5], "ok", ["a", 5], 0, 10)
    op(1, "write", ["a", crashed_value], "info", ["a", crashed_value], 5, 100)
    op(2, "write", ["b", 7], "ok", ["b", 7], 6, 8)
    op(3, "write", ["a", 3], "ok", ["a", 3], 20, 30)
    op(4, "read", ["a", None], "ok", ["a", crashed_value], 32, 34)
    op(5, "read", ["a", None], "ok", ["a", 5], 40, 50)
    op(6, "read", ["b", None], "ok", ["b", 7], 41, 42)
    op(7, "write", ["a", 4], None, None, 45, None)
    evs.sort(key=lambda e: e["time"])
    for i, e in enumerate(evs):
        e["index"] = i
    return evs
