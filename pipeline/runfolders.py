"""Finding run folders (RUN_LAYOUT) and reading their small JSON files.

A directory is a run folder iff it holds test.json or history.jsonl. `find_runs` walks the
given paths (run folders, test folders, results/ roots, campaign folders) with
`contracts.store.find_runs` (recursively, not into `latest` links or dot-folders, each
folder once) and returns each run once by run id. A run's id is test.json's `run_id`,
else `<parent folder>/<folder>` as the harness names it.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

from contracts.errors import InputError
from contracts.store import find_runs as walk
from contracts.store import run_id


@dataclass(frozen=True)
class RunFolder:
    """One run folder: where it is and its id."""

    path: str
    run_id: str


def find_runs(paths: list[str]) -> list[RunFolder]:
    """Every run folder under `paths` (contracts.store's walk), once per run id, sorted by it.

    A path that does not exist or is not a directory raises InputError.
    """
    for p in paths:
        if not os.path.exists(p):
            raise InputError("no such file or directory", p)
        if not os.path.isdir(p):
            raise InputError("not a directory (expected a run folder or a folder of runs)", p)
    by_id: dict[str, RunFolder] = {}
    for d in walk(paths):
        rid = run_id_of(str(d))
        by_id.setdefault(rid, RunFolder(os.path.abspath(d), rid))
    return [by_id[k] for k in sorted(by_id)]


def run_id_of(run_dir: str) -> str:
    test = read_json(os.path.join(run_dir, "test.json"))
    if isinstance(test, dict) and isinstance(test.get("run_id"), str) and test["run_id"]:
        return test["run_id"]

    return run_id(run_dir)


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
