"""Hanging transactions: a transaction never completed or aborted after the heal.

The cluster observer ends a run's history with one `txn-state` nemesis event
(nemesis/observer.py `settle_transactions`): each partition's last stable offset (LSO:
what read_committed consumers may read up to, the first offset of its oldest open
transaction) and high watermark (HWM), asked of its leader after the final phase, once they
met or after it waited for them (longer than the clients' transaction timeout, after which
the coordinator must abort what they left open). A partition whose LSO is still below its
HWM holds a transaction nobody will finish: read_committed consumers are stalled at the LSO
for good (KIP-890's hanging transactions). `hanging(events)` lists them, one
`hanging-txn` anomaly per partition: {"key", "lso", "hwm", "waited_s"}. No policy allows
one. A history without a `txn-state` event (no observer, an older run) has none.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from contracts.history import last_event

HANGING_TXN = "hanging-txn"
TXN_STATE = "txn-state"  # nemesis/observer.py's event


def hanging(nemesis: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The `hanging-txn` anomalies of a history's nemesis events (module docstring): from
    its last `txn-state` event, the partitions whose LSO stayed below their HWM."""
    last = last_event(nemesis, TXN_STATE)
    if last is None:
        return []
    v = last["value"]
    parts = v.get("partitions") or {}
    return [{"key": k, "lso": parts[k]["lso"], "hwm": parts[k]["hwm"], "waited_s": v.get("waited_s"),
             "time": last.get("time")}
            for k in sorted(v.get("open") or []) if k in parts]
