"""The nodes' event lines (broker/server/eventlog.py), read from a run folder onto the history's clock.

The runner records in test.json as `history_start` when the history opens its wall clock
(unix seconds), its CLOCK_MONOTONIC (`mono_ns`) and the kernel's boot id
(`contracts.history.clock_anchor`). `read_node_events(run_dir, test)` reads `nodes/<node>/*.log`, keeps the
event lines, turns broker ids into node names (each node folder's `server.properties`
has its `node.id`) and puts each event on the history's clock, `time` in ns since the
workload started:

- by the monotonic clock when the node's `clock` event names the same boot id as the
  anchor (the node runs on the harness's kernel: local and docker backends): exact up to
  the logging delay, and immune to clock-skew faults (libfaketime leaves it alone);
- else by the wall clock (`wall`): as good as the clocks' agreement;
- for a run without an anchor (older runs), by the wall clock against test.json's `start`
  plus the setup time (`timings.setup`): approximate.

The returned `NodeEvents.clock` says which was used, for the report to state.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from broker.server.eventlog import MARK, parse_event

ID_FIELDS = ("node", "leader", "prev_leader")
LIST_ID_FIELDS = ("isr", "elr")


@dataclass
class NodeEvents:
    """Event lines of every node on the history's clock, and how they were mapped."""

    events: list[dict[str, Any]] = field(default_factory=list)
    clock: str = "none"  # "monotonic", "wall", "wall (approximate)", "mixed", or "none" (no event lines)
    nodes: dict[int, str] = field(default_factory=dict)  # broker id -> node name


def read_node_events(run_dir: str | Path, test: dict[str, Any] | None) -> NodeEvents:
    """Every node's event lines from `run_dir/nodes` (missing logs: no events)."""
    d = Path(run_dir) / "nodes"
    out = NodeEvents()
    if not d.is_dir():
        return out
    anchor, approx = _anchor(test or {})
    raw: list[tuple[str, dict[str, Any]]] = []
    for node_dir in sorted(p for p in d.iterdir() if p.is_dir()):
        nid = _node_id(node_dir / "server.properties")
        if nid is not None:
            out.nodes[nid] = node_dir.name
        for log in sorted(node_dir.glob("*.log")):
            raw += [(node_dir.name, e) for e in _events_of(log)]
    used: set[str] = set()
    for name, e in raw:
        e = _named(e, out.nodes)
        e["node"] = name  # the folder the line came from
        t, how = _to_history_time(e, anchor)
        if t is None:
            continue
        e["time"] = t
        used.add(how)
        out.events.append(e)
    out.events.sort(key=lambda e: e["time"])
    if used:
        how = used.pop() if len(used) == 1 else "mixed"
        out.clock = f"{how} (approximate)" if approx and how == "wall" else how
    return out


def _events_of(log: Path) -> list[dict[str, Any]]:
    """The event lines of one log file, each with the boot id of the process that wrote it."""
    out = []
    boot = None
    try:
        with open(log, errors="replace") as f:
            for line in f:
                if MARK not in line:
                    continue
                e = parse_event(line)
                if e is None:
                    continue
                if e["event"] == "clock":
                    boot = e.get("boot_id")
                e["_boot"] = boot
                out.append(e)
    except OSError:
        return []
    return out


def _anchor(test: dict[str, Any]) -> tuple[dict[str, Any] | None, bool]:
    """(the history's clock anchor, whether it is approximate)."""
    hs = test.get("history_start")
    if isinstance(hs, dict) and isinstance(hs.get("wall"), (int, float)):
        return hs, False
    try:
        start = dt.datetime.fromisoformat(str(test["start"])).timestamp()
    except (KeyError, ValueError):
        return None, False
    setup = (test.get("timings") or {}).get("setup") or 0.0
    return {"wall": start + float(setup), "mono_ns": None, "boot_id": None}, True


def _to_history_time(e: dict[str, Any], anchor: dict[str, Any] | None) -> tuple[int | None, str]:
    if anchor is None:
        return None, "none"
    boot = e.pop("_boot", None)
    if boot and boot == anchor.get("boot_id") and isinstance(e.get("mono_ns"), int) and anchor.get("mono_ns") is not None:
        return e["mono_ns"] - int(anchor["mono_ns"]), "monotonic"
    if isinstance(e.get("wall"), float):
        return int(round((e["wall"] - float(anchor["wall"])) * 1e9)), "wall"
    return None, "none"


def _named(e: dict[str, Any], names: dict[int, str]) -> dict[str, Any]:
    """Broker ids in an event's fields turned into node names (-1: None)."""
    def name(i: Any) -> Any:
        if isinstance(i, int):
            return None if i < 0 else names.get(i, f"broker {i}")
        return i

    for k in ID_FIELDS:
        if k in e:
            e[k] = name(e[k])
    for k in LIST_ID_FIELDS:
        if isinstance(e.get(k), list):
            e[k] = [name(i) for i in e[k]]
    return e


def _node_id(props: Path) -> int | None:
    try:
        for line in props.read_text(errors="replace").splitlines():
            k, sep, v = line.partition("=")
            if sep and k.strip() in ("node.id", "broker.id"):
                return int(v.strip())
    except (OSError, ValueError):
        return None
    return None
