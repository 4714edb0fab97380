"""Finding run folders (RUN_LAYOUT) and reading their small JSON files.

A directory is a run folder iff it holds test.json or history.jsonl. `find_runs` walks the
given paths (run folders, test folders, results/ roots, campaign folders) recursively,
following symlinked directories except those named `latest`, and returns each run once
(by real path and by run id). A run's id is test.json's `run_id`, else
`<parent folder>/<folder>` as the harness names it.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.errors import InputError

RUN_MARKERS = ("test.json", "history.jsonl")


@dataclass(frozen=True)
class RunFolder:
    """One run folder: where it is and its id."""

    path: str
    run_id: str


def is_run_folder(path: str | os.PathLike[str]) -> bool:
    return any(os.path.isfile(os.path.join(path, m)) for m in RUN_MARKERS)


def find_runs(paths: list[str]) -> list[RunFolder]:
    """Every run folder under `paths`, sorted by run id; bad paths raise InputError."""
    seen_real: set[str] = set()
    by_id: dict[str, RunFolder] = {}
    for p in paths:
        if not os.path.exists(p):
            raise InputError("no such file or directory", p)
        if not os.path.isdir(p):
            raise InputError("not a directory (expected a run folder or a folder of runs)", p)
        for d in _walk(p):
            real = os.path.realpath(d)
            if real in seen_real:
                continue
            seen_real.add(real)
            rid = run_id_of(d)
            by_id.setdefault(rid, RunFolder(os.path.abspath(d), rid))
    return [by_id[k] for k in sorted(by_id)]


def _walk(root: str) -> list[str]:
    out: list[str] = []
    stack = [root]
    visited: set[str] = set()
    while stack:
        d = stack.pop()
        real = os.path.realpath(d)
        if real in visited:
            continue
        visited.add(real)
        if is_run_folder(d):
            out.append(d)
            continue  # a run folder's own subfolders (nodes/, plots/) hold no runs
        try:
            entries = sorted(os.scandir(d), key=lambda e: e.name)
        except OSError:
            continue
        for e in entries:
            if e.name == "latest" and e.is_symlink():
                continue
            if e.is_dir(follow_symlinks=True):
                stack.append(e.path)
    return out


def run_id_of(run_dir: str) -> str:
    test = read_json(os.path.join(run_dir, "test.json"))
    if isinstance(test, dict) and isinstance(test.get("run_id"), str) and test["run_id"]:
        return test["run_id"]
    p = Path(os.path.abspath(run_dir))
    return f"{p.parent.name}/{p.name}"


def read_json(path: str) -> Any:
    """A JSON file's content, None if absent; `_error` key on a damaged file."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return None
    except OSError as e:
        return {"_error": f"{os.path.basename(path)}: cannot read ({e.strerror})"}
    try:
        return json.loads(data)
    except ValueError as e:
        return {"_error": f"{os.path.basename(path)}: malformed JSON ({str(e).splitlines()[0][:80]})"}
