"""Faults aimed at Kafka transactions: the coordinator in the middle of a commit or abort,
producer fencing, and the transaction markers held in the network.

`install_txn_faults(nemesis)` registers (the client-path proxy, nemesis/clientpath.py, is
installed too: the coordinator is found by what the clients send through it):

- `start-txn-coordinator` {"fault": "kill" | "pause" | "partition", "wait_s": S,
  "lag_ms": MS} / `stop-txn-coordinator`: the next EndTxn a client sends (within `wait_s`)
  is held by the proxy, which names the node it goes to: the transaction coordinator of
  that transactional id (the leader of its `__transaction_state` partition, which the
  client found with FindCoordinator). The EndTxn is released and `lag_ms` later that node
  is killed (SIGKILL), paused (SIGSTOP) or isolated from every other node, in the middle
  of the commit or abort (its PREPARE record, its markers, its COMPLETE record). Recorded
  with the node, transactional id and commit or abort; when no EndTxn comes (no
  transactions run), recorded as skipped and nothing is done. The stop undoes it (start,
  resume, heal the network); the coordinator that takes over must finish the transaction
  (a transaction left open after the heal stalls read_committed readers at its first
  offset: the `hanging-txn` check, checkers/txnhang.py).
- `fence-producer` (an instant): an InitProducerId for a transactional id a client has used
  (seen by the proxy), sent straight to its coordinator, as a new instance of the
  application would: the client's producer is fenced (its epoch bumped, its open
  transaction aborted); whatever it still sends must be refused (KIP-98). Recorded with
  the id and the producer id and epoch handed out; skipped when no transactional id was seen.
- `start-delay-markers` / `stop-delay-markers`: every node drops, from every other node, the
  TCP segments of connections that carry WriteTxnMarkers (the DB's `frame_head`), so the
  coordinators' markers wait in the network (their retries too) until the stop: the
  transactions' outcomes reach their partitions late (KIP-890's hanging transactions
  started from delayed markers). Skipped (nothing held) when no transactional id was seen.

`txn-coordinator` and `delay-markers` play those faults whole (start, hold `hold_s`, undo) as
one instant op, which skips at once when no transaction runs.

Packages: `txn_coordinator_package`, `delay_markers_package` (instants of tier 0: first in a
rotation round, free when skipped) and `fence_producer_package` (background: beside the
rotation).
"""

from __future__ import annotations

import random
import time
import weakref
from typing import Any

from nemesis.clientpath import install_client_path, played_whole
from nemesis.core import FaultOp, Nemesis
from nemesis.layers import BACKGROUND
from nemesis.schedule import FaultPackage

FAULTS = {"kill": ("kill", FaultOp("start", "all")), "pause": ("pause", FaultOp("resume", "all")),
          "partition": ("start-partition", FaultOp("stop-partition"))}
WAIT_S = 10.0  # how long the coordinator fault waits for a client's EndTxn
HOLD_S = 10.0  # how long a fault played whole (`txn-coordinator`, `delay-markers`) is held
RETRIABLE = {"concurrent_transactions", "coordinator_load_in_progress", "not_coordinator",
             "coordinator_not_available"}
FENCE_TIMEOUT_S = 10.0
MARKERS = "WriteTxnMarkers"


class TxnFaults:
    """The ops of one Nemesis (module docstring)."""

    def __init__(self, nem: Nemesis):
        self.nem = nem
        self.proxy = install_client_path(nem).proxy
        self.undo: FaultOp | None = None
        self.markers_held = False

    def coordinator(self, value: Any) -> dict[str, Any]:
        v = dict(value or {})
        fault = v.get("fault", "kill")
        if fault not in FAULTS:
            raise ValueError(f"txn-coordinator: fault {fault!r} is not one of {', '.join(FAULTS)}")
        wait_s = float(v.get("wait_s", WAIT_S))
        if not self.proxy.txn_ids:
            return {"fault": fault, "skipped": "no transactional id seen: no transactions run"}
        held = self.proxy.hold("EndTxn")
        if not held.caught.wait(wait_s):
            self.proxy.unhold(held)
            return {"fault": fault, "skipped": f"no EndTxn in {wait_s:g} s"}
        node = held.node
        self.proxy.unhold(held)
        time.sleep(max(0.0, float(v.get("lag_ms", 0))) / 1000)
        f, undo = FAULTS[fault]
        self.nem.invoke(FaultOp(f, {"isolate": [node]} if fault == "partition" else [node]))
        self.undo = undo
        return {"fault": fault, "node": node, **held.info, "lag_ms": v.get("lag_ms", 0)}

    def coordinator_played(self, value: Any) -> dict[str, Any]:
        """`txn-coordinator` (an instant op, played whole): `start-txn-coordinator`'s fault,
        held `hold_s`, then undone; a skipped one returns at once."""
        return played_whole(self.coordinator, self.end_coordinator, value, HOLD_S)

    def end_coordinator(self, _value: Any = None) -> dict[str, Any]:
        undo, self.undo = self.undo, None
        if undo is not None:
            self.nem.invoke(undo)
        return {"undone": undo.f if undo is not None else None}

    def forget(self) -> None:
        """After a heal: nothing is left to undo."""
        self.undo, self.markers_held = None, False

    def fence(self, _value: Any = None) -> dict[str, Any]:
        ids = sorted(self.proxy.txn_ids)
        if not ids:
            return {"skipped": "no transactional id seen"}
        tid = ids[self.nem.rng.randrange(len(ids))]
        return {"transactional_id": tid, **self._init_producer_id(tid)}

    def _init_producer_id(self, tid: str) -> dict[str, Any]:
        """InitProducerId for `tid` at its coordinator (retried while the coordinator answers
        that it is busy), straight to the brokers, not through the proxy."""
        # lazy: broker.wire imports kio (~0.25 s), only this fault needs it
        from broker.wire import kafka as k
        from broker.wire.client import RawClient

        deadline = time.monotonic() + FENCE_TIMEOUT_S
        last = "no broker answered"
        while time.monotonic() < deadline:
            for node in self.nem.cluster.nodes:
                if node.name in self.nem.killed | self.nem.paused | self.nem.removed:
                    continue
                host, _, port = self.nem.db.client_address(node).rpartition(":")  # type: ignore[union-attr]
                try:
                    with RawClient(host, int(port), timeout=3) as c:
                        fc = c.call(k.FIND_COORDINATOR, 1, {"key": tid, "key_type": 1})
                    if fc.error_code.value != 0:
                        last = fc.error_code.name
                        continue
                    with RawClient(fc.host, int(fc.port), timeout=3) as c:
                        r = c.call(k.INIT_PRODUCER_ID, 3, {"transactional_id": tid, "transaction_timeout": 10000,
                                                           "producer_id": -1, "producer_epoch": -1})
                except OSError as e:
                    last = f"{node.name}: {e}"
                    continue
                if r.error_code.value == 0:
                    return {"producer_id": int(r.producer_id), "producer_epoch": int(r.producer_epoch),
                            "coordinator": f"{fc.host}:{fc.port}"}
                last = r.error_code.name
                if last not in RETRIABLE:
                    raise RuntimeError(f"fence-producer {tid}: InitProducerId answered {last}")
            time.sleep(0.2)
        raise RuntimeError(f"fence-producer {tid}: {last} for {FENCE_TIMEOUT_S:g} s")

    def delay_markers(self, _value: Any = None) -> dict[str, Any]:
        if not self.proxy.txn_ids:
            return {"skipped": "no transactional id seen: no transactions run"}
        names = [n.name for n in self.nem.cluster.nodes]
        grudge = {n: [m for m in names if m != n] for n in names}
        self.nem.invoke(FaultOp("start-partition", {"drop": grudge, "frame": MARKERS}))
        self.markers_held = True
        return {"frame": MARKERS, "nodes": names}

    def markers_played(self, value: Any) -> dict[str, Any]:
        """`delay-markers` (an instant op, played whole): the markers held `hold_s`, then let go."""
        return played_whole(self.delay_markers, self.end_marker_delay, value, HOLD_S)

    def end_marker_delay(self, _value: Any = None) -> dict[str, Any]:
        if not self.markers_held:
            return {"healed": None}
        self.markers_held = False
        self.nem.invoke(FaultOp("stop-partition"))
        return {"healed": "markers"}


_INSTALLED: weakref.WeakKeyDictionary[Nemesis, TxnFaults] = weakref.WeakKeyDictionary()


def install_txn_faults(nem: Nemesis) -> TxnFaults:
    """Register the transaction faults on `nem` (module docstring); once per Nemesis."""
    tf = _INSTALLED.get(nem)
    if tf is not None:
        return tf
    tf = _INSTALLED[nem] = TxnFaults(nem)
    nem.register("start-txn-coordinator", tf.coordinator)
    nem.register("stop-txn-coordinator", tf.end_coordinator)
    nem.register("fence-producer", tf.fence)
    nem.register("start-delay-markers", tf.delay_markers)
    nem.register("stop-delay-markers", tf.end_marker_delay)
    nem.register("txn-coordinator", tf.coordinator_played)
    nem.register("delay-markers", tf.markers_played)
    nem.register_heal("txn-faults", tf.forget)
    return tf


def txn_coordinator_package() -> FaultPackage:
    """`txn-coordinator` played whole (kill, pause or isolate, drawn; 0-400 ms after the
    EndTxn is let through; held 5-15 s): an instant that skips at once without
    transactions, so it goes first in a rotation round (tier 0) at no cost to runs without them."""
    faults = sorted(FAULTS)

    def start(rng: random.Random) -> FaultOp:
        return FaultOp("txn-coordinator", {"fault": faults[rng.randrange(len(faults))],
                                           "lag_ms": rng.randrange(0, 400), "hold_s": round(rng.uniform(5, 15), 1)})

    return FaultPackage("txn-coordinator", start, None, [FaultOp("stop-txn-coordinator")], "#C97B63",
                        install_txn_faults, tier=0)


def delay_markers_package() -> FaultPackage:
    """`delay-markers` played whole (held 5-15 s), tier 0 as `txn_coordinator_package`."""
    return FaultPackage("delay-markers", lambda rng: FaultOp("delay-markers", {"hold_s": round(rng.uniform(5, 15), 1)}),
                        None, [FaultOp("stop-delay-markers")], "#B5A06A", install_txn_faults, tier=0)


def fence_producer_package() -> FaultPackage:
    """`fence-producer` now and then, beside the rotation (an instant: background)."""
    return FaultPackage("fence-producer", lambda rng: FaultOp("fence-producer"), None, [], "#8E7CC3",
                        install_txn_faults, tier=BACKGROUND)
