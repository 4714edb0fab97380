"""A stored run as something to run again: its options, its schedule, the commands that replay it.

`load(RUN)` reads a run folder (test.json, results.json, schedule.json) into a `StoredRun`;
InputError (one line) for a folder that is not a run. `options(stored, **changes)` is the
`TestOptions` of the run (every option test.json recorded, the seed included) with changes;
`flags(options_dict, db)` the command-line flags of the options that differ from the defaults
(what the report shows and prints as the commands that reproduce a run).
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import suites
from contracts.errors import InputError
from contracts.options import GeneralOptions, flag_of
from contracts.store import resolve_run
from harness.fingerprint import fingerprint
from harness.options import DEFAULTS, SPEC, TestOptions

# options that say where and under which name a run is stored, not what it tests
NOT_REPRODUCED = ("name", "results", "test_count", "schedule", "seed")


@dataclass
class StoredRun:
    run_dir: Path
    test: dict[str, Any]
    results: dict[str, Any] | None

    @property
    def schedule(self) -> Path | None:
        p = self.run_dir / "schedule.json"
        return p if p.is_file() else None

    @property
    def fingerprint(self) -> dict[str, Any]:
        return fingerprint(self.results)

    @property
    def seed(self) -> int | None:
        seed = self.test.get("seed")
        return seed if isinstance(seed, int) else None


def _read(p: Path) -> dict[str, Any] | None:
    try:
        v = json.loads(p.read_text())
    except (OSError, ValueError):
        return None
    return v if isinstance(v, dict) else None


# options added after runs were stored, as those runs ran (a run without `lulls` had none)
PREDATED: dict[str, Any] = {"lulls": "none"}


def load(arg: str) -> StoredRun:
    """The run folder `arg` names (a run, a latest link or a test folder)."""
    d = resolve_run(arg)
    test = _read(d / "test.json")
    if test is None or not isinstance(test.get("options"), dict):
        raise InputError(f"{arg}: not a run folder (no readable test.json with options)")
    return StoredRun(d, test, _read(d / "results.json"))


def options(stored: StoredRun, **changes: Any) -> Any:
    """The run's `TestOptions` (unknown keys of an older test.json dropped; options it
    predates take the value that was then the behaviour, `PREDATED`) with `changes`."""
    recorded = {k: v for k, v in stored.test["options"].items() if k in SPEC.by_name}
    return TestOptions(**{**PREDATED, **recorded, "test_count": 1, **changes})


def differing(options: Mapping[str, Any], db: str | None = None) -> dict[str, Any]:
    """The options that differ from their defaults and belong to the general group or to `db`'s
    own (another system's options never show), less where the run is stored."""
    db = db or str(options.get("db") or suites.DEFAULT)
    try:
        groups = {GeneralOptions, *suites.option_groups(db)}
    except ValueError:
        groups = {GeneralOptions}
    return {k: v for k, v in options.items() if k in SPEC.by_name and SPEC.group_of(k) in groups
            and k not in NOT_REPRODUCED and v != getattr(DEFAULTS, k)}


def flags(options: Mapping[str, Any], db: str | None = None) -> list[str]:
    """The flags that give `differing(options)`, in the spec's order."""
    out: list[str] = []
    for name, v in differing(options, db).items():
        f = SPEC.by_name[name]
        if f.metadata["invert"] or isinstance(getattr(DEFAULTS, name), bool):
            out.append(flag_of(f))  # a switch: it differs, so it is given
        elif isinstance(v, list):
            out += [flag_of(f), ",".join(str(x) for x in v) or "none"]
        elif v is not None:
            out += [flag_of(f), str(v)]
    return out


def commands(stored: StoredRun) -> dict[str, str]:
    """The shell commands that reproduce a run: rerun it, shrink it (an invalid run), replay its
    schedule, replay the minimal schedule a shrink wrote."""
    run = shlex.quote(str(stored.run_dir))
    out = {"rerun": f"wrack rerun {run} --times 3"}
    if stored.fingerprint["verdict"] == "invalid":  # a valid run has no bug to shrink
        out["shrink"] = f"wrack shrink {run}"
    if stored.schedule is not None:
        opts = flags(stored.test["options"])
        if stored.seed is not None:
            opts += ["--seed", str(stored.seed)]
        out["replay"] = shlex.join(["wrack", "test", *opts, "--schedule", str(stored.schedule)])
    minimal = stored.run_dir / "shrink" / "minimal-schedule.json"
    if minimal.is_file():
        out["minimal"] = shlex.join(["wrack", "test", *flags(stored.test["options"]), "--schedule", str(minimal)])
    return out
