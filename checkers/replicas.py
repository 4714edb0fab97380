"""Replica agreement: replicas of a partition that hold different committed records.

The cluster observer ends a Kafka-wire run's history with one `replica-state` nemesis event
(nemesis/observer.py `compare_replicas`): every replica's log of every partition, read with
Kafka's debugging fetch after the final phase, and for each pair of replicas the first
offset at which both hold a record and the records differ. A replica's high watermark says
which of its records are committed; a committed record is on every in-sync replica and every
later leader has it (seed 003: the leader epoch truncation keeps the logs a prefix of one
another up to the HWM). So a difference below both replicas' high watermarks is a
`replica-divergence`: the replicas disagree on what was committed, whether or not a client
happened to read that offset from both (a follower that kept a record the leader never had,
a truncation that stopped short; Kafka's ReplicaVerificationTool checks the same). Above the
lower HWM a follower's tail may differ until it truncates: not judged.

`divergences(event)` lists them, one per pair of replicas: {"key", "replicas", "offset",
"hwm", "batches": [a's, b's], "time", "explanation"}; `time` is when the later of the two batches was
written (its max timestamp as history time; the event's own time if unknown). `check(events)`
is the checker: `anomaly_keys` names the partitions, so a loss rule that allows committed
loss for some partitions only (a partition over the ELR's bound of lossy shutdowns) allows it
there only. A history without a `replica-state` event (no observer, an older run, a system
whose partitions have one copy) is not judged (`checked: false`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from contracts.history import last_event

REPLICA_DIVERGENCE = "replica-divergence"
REPLICA_STATE = "replica-state"  # nemesis/observer.py's event
SHOWN = 20  # anomalies listed in a result (all are counted)


def last_state(nemesis: Iterable[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The last `replica-state` event of a history's nemesis events, or None."""
    return last_event(nemesis, REPLICA_STATE)


def divergences(event: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The `replica-divergence` anomalies of one `replica-state` event (module docstring)."""
    out = []
    for key, part in sorted((event["value"].get("partitions") or {}).items()):
        replicas = part.get("replicas") or {}
        for d in part.get("differ") or []:
            a, b = d["replicas"]
            if a not in replicas or b not in replicas:
                continue
            hwm = min(replicas[a]["hwm"], replicas[b]["hwm"])
            if d["offset"] < hwm:
                written = d.get("written")
                out.append({"key": key, "replicas": [a, b], "offset": d["offset"], "hwm": hwm,
                            "batches": [d.get("a"), d.get("b")],
                            "time": written if isinstance(written, int) else event.get("time"),
                            "explanation": _sentence(key, a, b, d, hwm)})
    return out


def _sentence(key: str, a: str, b: str, d: Mapping[str, Any], hwm: int) -> str:
    def batch(node: str, x: Any) -> str:
        if not isinstance(x, Mapping):
            return f"{node} has no batch there"
        return f"{node} a batch of {x['base']}-{x['last']} (CRC {x['crc']:#010x}, leader epoch {x['epoch']})"

    x, y = d.get("a"), d.get("b")
    what = "different records"
    if isinstance(x, Mapping) and isinstance(y, Mapping) and (x["base"], x["last"], x["crc"]) == (y["base"], y["last"], y["crc"]):
        what = "the same records under other leader epochs (one kept its copy of a batch a later leader wrote again)"
    return (f"{key}: replicas {a} and {b} hold {what} at offset {d['offset']}, below both their high "
            f"watermarks (the lower is {hwm}): {batch(a, x)}, {batch(b, y)}")


def check(nemesis: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The replica-agreement result of a history's nemesis events (module docstring)."""
    ev = last_state(nemesis)
    if ev is None:
        return {"valid": True, "checked": False, "anomaly_types": [], "anomalies": {}}
    found = divergences(ev)
    parts = ev["value"].get("partitions") or {}
    result: dict[str, Any] = {
        "valid": not found, "checked": True, "partitions": len(parts),
        "replicas_read": sum(len(p.get("replicas") or {}) for p in parts.values()),
        "unread": ev["value"].get("unread") or {}, "read_s": ev["value"].get("read_s"),
        "anomaly_types": [REPLICA_DIVERGENCE] if found else [], "anomalies": {}}
    if found:
        keys: dict[str, int] = {}
        for f in found:
            keys[f["key"]] = keys.get(f["key"], 0) + 1
        result.update(anomalies={REPLICA_DIVERGENCE: found[:SHOWN]}, anomaly_counts={REPLICA_DIVERGENCE: len(found)},
                      anomaly_keys={REPLICA_DIVERGENCE: keys},
                      anomaly_times={REPLICA_DIVERGENCE: min(f["time"] for f in found)})
    return result
