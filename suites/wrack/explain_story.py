"""The cluster's story behind the explanations (suites/wrack/explain.py): the records of one
anomalous offset and its acknowledgement, and what the nodes' event lines, the faults and the
observed cluster states say about each partition over time (`Story`)."""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field
from typing import Any

DOWN_FAULTS = ("kill", "power-loss", "pause", "restart", "remove-node")
LEADER_EVENTS = ("became-leader", "became-follower", "replica-opened")


@dataclass
class Target:
    """One anomalous offset (or, while its offset is unknown, one value) of a key."""

    key: str
    offset: int | None
    value: Any = None
    kinds: list[str] = field(default_factory=list)
    ops: list[int] = field(default_factory=list)
    send_op: int | None = None


@dataclass
class Ack:
    """A send micro-op's completion: who was told which offset, when."""

    op: int
    process: Any
    time: int
    type: str
    key: str
    offset: int | None
    value: Any


# ------------------------------------------------------------------------- the cluster's story
class Story:
    """What the node events, faults and cluster states say about each partition over time."""

    def __init__(self, node_events: list[dict[str, Any]], faults: list[dict[str, Any]],
                 states: list[tuple[int, dict[str, Any]]]):
        self.events = sorted(node_events, key=lambda e: e.get("time", 0))
        self.by_tp: dict[Any, list[dict[str, Any]]] = {}
        for e in self.events:
            self.by_tp.setdefault(e.get("tp"), []).append(e)
        self.faults = faults
        self.states = states
        self.state_times = [t for t, _ in states]
        self.down: dict[str, list[int]] = {}  # node -> times its process stopped (or froze) or restarted
        for f in faults:
            if f.get("f") in DOWN_FAULTS:
                for n in nodes_of(f.get("value")):
                    self.down.setdefault(n, []).append(f["time"])
        for e in self.events:
            if e["event"] == "clock":
                self.down.setdefault(e["node"], []).append(e["time"])
        for v in self.down.values():
            v.sort()

    def of(self, tp: str, kinds: tuple[str, ...]) -> list[dict[str, Any]]:
        return [e for e in self.by_tp.get(tp, ()) if e["event"] in kinds]

    def leaders_at(self, tp: str, t: int) -> list[dict[str, Any]]:
        """The `became-leader` events of nodes that believed they led `tp` at time t."""
        last: dict[str, dict[str, Any]] = {}
        for e in self.of(tp, LEADER_EVENTS):
            if e["time"] > t:
                break
            last[e["node"]] = e
        out = []
        for node, e in last.items():
            if e["event"] == "became-leader" and not any(e["time"] < d <= t for d in self.down.get(node, ())):
                out.append(e)
        return out

    def state_at(self, tp: str, t: int) -> dict[str, Any] | None:
        """The partition in the last observed cluster state at or before t."""
        i = bisect_right(self.state_times, t)
        if i == 0:
            return None
        p = (self.states[i - 1][1].get("partitions") or {}).get(tp)
        return p if isinstance(p, dict) else None

    def isr_at(self, tp: str, t: int) -> list[str] | None:
        changes = [e for e in self.of(tp, ("partition-change", "became-leader")) if e["time"] <= t and "isr" in e]
        if changes:
            return list(changes[-1].get("isr") or [])
        st = self.state_at(tp, t)
        return list(st.get("isr") or []) if st else None

    def elections(self, tp: str, after: int) -> list[dict[str, Any]]:
        """Leader changes of tp after `after`: {time, node, epoch, from_offset, election, isr}."""
        out: dict[Any, dict[str, Any]] = {}
        for e in self.of(tp, ("partition-change",)):
            if e["time"] > after and e.get("election") not in ("none", "initial", None):
                out[e.get("epoch")] = {"time": e["time"], "node": e.get("leader"), "epoch": e.get("epoch"),
                                       "from_offset": None, "election": e.get("election"), "isr": e.get("isr")}
        for e in self.of(tp, ("became-leader",)):
            if e["time"] > after:
                el = out.setdefault(e.get("epoch"), {"time": e["time"], "node": e["node"], "epoch": e.get("epoch"),
                                                     "election": None, "isr": e.get("isr")})
                el["from_offset"] = e.get("from_offset")
                el["time"] = min(el["time"], e["time"])
        if not self.events:  # no node events: leader changes in the observed metadata
            prev = (self.state_at(tp, after) or {}).get("leader")
            for t, st in self.states:
                p = (st.get("partitions") or {}).get(tp) or {}
                if t > after and p.get("leader") != prev:
                    prev = p.get("leader")
                    out[("cs", t)] = {"time": t, "node": prev, "epoch": None, "from_offset": None,
                                      "election": "leaderless" if prev is None else None, "isr": p.get("isr")}
        return sorted(out.values(), key=lambda x: x["time"])


def nodes_of(value: Any) -> list[str]:
    if isinstance(value, dict):
        value = value.get("nodes")
    if isinstance(value, str):
        return [value]
    return [n for n in value if isinstance(n, str)] if isinstance(value, list) else []


def election_dict(e: dict[str, Any] | None) -> dict[str, Any] | None:
    return None if e is None else {**e, "time": seconds(e["time"])}


def names_text(nodes: list[Any] | None) -> str:
    return "[" + ", ".join(str(n) for n in nodes or []) + "]"


def seconds(ns: int) -> float:
    return round(ns / 1e9, 3)
