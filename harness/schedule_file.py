"""The fault schedule a run played, as a file: `schedule.json`, and how `--schedule FILE` plays it.

Every run writes `schedule.json` into its folder (docs/results.md): the fault actions the
nemesis thread played, in order, each with

- `at_s`: when it started, seconds since the workload started;
- `package`: the fault package that made it (`--nemesis` names; a story's package is the story);
- `f`, `value`: the op as scheduled, its targets named as the package names them: a role
  (`{"role": "leader", "topic": T, "partition": P}`, `{"role": "controller"}`), a node spec
  (`"one"`, `"majority"`) or a node name. `wrack test --schedule FILE` plays this, so a role is
  resolved again when it plays (the leader of that partition then);
- `nodes`: the nodes the run's nemesis chose (read from its recorded event), for the reader;
- `ok`: false when the action failed (its `nemesis-error` is in the history).

Beside the actions: `packages` (every package the run prepared: their node-side machinery,
such as LazyFS for power loss, and their final ops at the heal), `db`, `seed` and `options`,
the options that shape a schedule (time limit, nodes, clients, keys). `--schedule FILE` takes
those (and the seed) for every such option the command line leaves at its default, plays the
actions at their `at_s` (an action never starts before the one before it ended, nor after the
time limit) and draws nothing: `wrack shrink` (harness/shrink.py) edits these files.

`load(path, system)` reads and checks a file: one InputError line naming the file and what is
wrong (not JSON, no actions list, an unknown package, fault or role).
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from contracts import store
from contracts.errors import InputError
from nemesis.core import FaultOp
from nemesis.targets import ROLES

FORMAT = 1
# the options a schedule carries (those `wrack shrink` changes), when the system takes them
SHAPING = ("time_limit", "nodes", "concurrency", "nemesis_interval", "topics", "partitions", "in_flight")
# faults the Nemesis itself plays (nemesis/core.py), whatever the packages
BASE_FAULTS = ("start-partition", "stop-partition", "kill", "start", "pause", "resume", "stop", "restart",
               "rolling-restart")


@dataclass(frozen=True)
class PackageOp(FaultOp):
    """A fault op with the package that made it (`package`), so a played schedule names it."""

    package: str = ""


@dataclass
class Action:
    """One fault action of a schedule (module docstring)."""

    at_s: float
    package: str
    f: str
    value: Any = None
    nodes: list[str] = field(default_factory=list)
    ok: bool = True

    def to_dict(self) -> dict[str, Any]:
        return {"at_s": round(self.at_s, 3), "package": self.package, "f": self.f, "value": self.value,
                "nodes": list(self.nodes), "ok": self.ok}


@dataclass
class Schedule:
    """A fault schedule: what a run played, or what `--schedule` plays (module docstring)."""

    actions: list[Action]
    packages: list[str]
    db: str = "wrack"
    seed: int | None = None
    options: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, "db": self.db, "seed": self.seed, "packages": list(self.packages),
                "options": dict(self.options), "actions": [a.to_dict() for a in self.actions]}

    def write(self, path: str | Path) -> Path:
        store.write_json(Path(path), self.to_dict())
        return Path(path)

    def used_packages(self) -> list[str]:
        """The packages whose actions are left (in `packages`' order)."""
        used = {a.package for a in self.actions}
        return [p for p in self.packages if p in used]


def shaping_options(options: Mapping[str, Any], takes: Sequence[str]) -> dict[str, Any]:
    """The options of `SHAPING` that `options` has and the system takes."""
    return {k: options[k] for k in SHAPING if k in options and k in takes}


def nodes_named(value: Any, names: Sequence[str]) -> list[str]:
    """The node names found anywhere in a recorded fault value, in order of appearance."""
    found: list[str] = []
    known = set(names)

    def walk(v: Any) -> None:
        if isinstance(v, str):
            if v in known and v not in found:
                found.append(v)
        elif isinstance(v, Mapping):
            for x in v.values():
                walk(x)
        elif isinstance(v, (list, tuple)):
            for x in v:
                walk(x)

    walk(value)
    return found


class Recorder:
    """The actions the nemesis thread played in a run (`played(op, event)`, from
    `harness.faults.nemesis_client`), in order; `schedule(...)` makes the file's record."""

    def __init__(self, node_names: Sequence[str]):
        self.node_names = list(node_names)
        self.actions: list[Action] = []

    def played(self, op: Mapping[str, Any], event: Mapping[str, Any] | None) -> None:
        value = event.get("value") if isinstance(event, Mapping) else None
        self.actions.append(Action(at_s=int(op.get("time") or 0) / 1e9, package=str(op.get("package") or ""),
                                   f=str(op["f"]), value=op.get("value"),
                                   nodes=nodes_named(value, self.node_names), ok=event is not None))


def replay(actions: Sequence[Action]) -> Iterator[tuple[float, PackageOp]]:
    """(at_s, op) for `harness.faults.ScheduleGenerator`'s absolute mode, in the file's order."""
    for a in actions:
        yield a.at_s, PackageOp(a.f, a.value, a.package)


# ----------------------------------------------------------------- reading a file

def _faults_of(pkg: Any) -> set[str]:
    """The fault ops a package makes: its stop and final ops and its start drawn a few times."""
    fs = {op.f for op in ([pkg.stop] if pkg.stop is not None else []) + list(pkg.final)}
    for i in range(16):
        fs.add(pkg.start(random.Random(i)).f)
    return fs


def _roles_in(value: Any) -> list[str]:
    if isinstance(value, Mapping):
        out = [str(value["role"])] if "role" in value else []
        return out + [r for v in value.values() for r in _roles_in(v)]
    if isinstance(value, (list, tuple)):
        return [r for v in value for r in _roles_in(v)]
    return []


def load(path: str | Path, system: Any) -> Schedule:
    """The schedule in `path` for `system` (a `SystemUnderTest`); InputError, one line naming the
    file, for a file that does not parse or names an unknown package, fault or role."""
    where = str(path)
    try:
        raw = json.loads(Path(path).read_text())
    except OSError as e:
        raise InputError(f"--schedule {where}: cannot read: {e.strerror or e}") from None
    except ValueError as e:
        raise InputError(f"--schedule {where}: not a schedule file (JSON): {e}") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("actions"), list):
        raise InputError(f"--schedule {where}: not a schedule file: no \"actions\" list")
    if raw.get("db", system.name) != system.name:
        raise InputError(f"--schedule {where}: a schedule of --db {raw.get('db')}, not of --db {system.name}")
    table, _mix = system.fault_packages({"t": 1})
    packages = [str(p) for p in raw.get("packages") or []]
    bad = [p for p in packages if p not in table]
    if bad:
        raise InputError(f"--schedule {where}: unknown fault package {bad[0]!r} for --db {system.name}")
    faults: dict[str, set[str]] = {}
    actions = []
    for i, a in enumerate(raw["actions"]):
        actions.append(_action(a, i, where, table, packages, faults))
    options: dict[str, Any] = raw["options"] if isinstance(raw.get("options"), dict) else {}
    seed = raw.get("seed")
    return Schedule(actions, packages, system.name, seed if isinstance(seed, int) else None,
                    {k: v for k, v in options.items() if k in SHAPING})


def _action(a: Any, i: int, where: str, table: Mapping[str, Any], packages: list[str],
            faults: dict[str, set[str]]) -> Action:
    """Action `i` of a file, checked (see `load`)."""
    at = f"--schedule {where}: action {i}"
    if not isinstance(a, dict) or not isinstance(a.get("f"), str):
        raise InputError(f"{at}: not an object with a fault name \"f\"")
    pkg = str(a.get("package") or "")
    if pkg not in table:
        raise InputError(f"{at}: unknown fault package {pkg!r}")
    if pkg not in packages:
        packages.append(pkg)
    if pkg not in faults:
        faults[pkg] = _faults_of(table[pkg]()) | set(BASE_FAULTS)
    if a["f"] not in faults[pkg]:
        raise InputError(f"{at}: unknown fault {a['f']!r} for package {pkg} (it plays: "
                         f"{', '.join(sorted(faults[pkg]))})")
    for role in _roles_in(a.get("value")):
        if role not in ROLES:
            raise InputError(f"{at}: unknown role {role!r} (known: {', '.join(ROLES)})")
    try:
        at_s = float(a.get("at_s", 0.0))
    except (TypeError, ValueError):
        raise InputError(f"{at}: at_s {a.get('at_s')!r} is not a number") from None
    nodes: list[Any] = a["nodes"] if isinstance(a.get("nodes"), list) else []
    return Action(at_s, pkg, a["f"], a.get("value"), [str(n) for n in nodes], a.get("ok") is not False)
