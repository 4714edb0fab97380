"""The cluster-state observer: what the cluster said about its leaders and ISRs, in the history.

`ClusterObserver(metadata, addresses, sink)` polls `metadata` (a `nemesis.targets`
MetadataSource, e.g. its own `KafkaMetadata` with a short timeout) every `interval` s on a
daemon thread, and appends to `sink` (the HistoryWriter) one event whenever the observed
state differs from the last one appended:

    {"process": "nemesis", "type": "info", "f": "cluster-state",
     "value": {"controller": "n1" | null,
               "partitions": {"queue0-0": {"leader": "n2" | null, "isr": ["n1", "n2", "n3"],
                                           "replicas": ["n1", "n2", "n3"]}, ...}}}

Node names are the cluster's (broker ids are mapped by address, as `nemesis.targets` does;
an id once seen keeps its name, so a fenced broker that the metadata no longer lists is still
named; an id never seen is `broker:<id>`); keys are the workloads' `topic-partition`
(`workloads.base.key_of`); internal topics (`__*`) are left out. A leader or controller of -1
is null; ISR and replica lists are in the metadata's order. The controller is the metadata
source's (the runner's `KafkaMetadata(active_controller=db.active_controller)` names the
DB's active controller: a KRaft-style Metadata answer names the answering broker).

What it sees is one broker's metadata cache (librdkafka asks a broker it is connected to): a
broker cut off from the controller answers from a stale cache, so an observation may lag
the controller by the time the partition lasts.

After the final phase `wait_whole` also records, once, each partition's last stable offset
against its high watermark (`txn-state`, `settle_transactions`): a transaction never
completed or aborted keeps them apart; then every replica's log of every partition, compared
(`replica-state`, `compare_replicas`): replicas that hold different records below both
their high watermarks disagree on what was committed (checkers/replicas.py).

Contracts: the observer never blocks its caller (one daemon thread; a poll that fails or
times out is counted and skipped, nothing is appended for it); `stop()` is idempotent and
returns within about the metadata timeout. Consumers of the history treat these events as
observations, not faults: `contracts.history.fault_windows` skips them (no start-/stop- name),
the checkers keep nemesis events apart from client ops, and the wrack suite's loss rules
(suites/wrack/lossy.py) read them to tell when a replica was back in the ISR.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from nemesis.core import EventSink
from nemesis.replicalogs import BatchId, ReplicaLog, first_difference, read_replica
from nemesis.targets import Metadata, MetadataSource, node_offset

CLUSTER_STATE = "cluster-state"
TXN_STATE = "txn-state"
REPLICA_STATE = "replica-state"
TXN_SETTLE_S = 30.0  # transactions open after the final phase: the clients' timeout (10 s), then their abort


@dataclass
class ObserverStats:
    """How the polling went: polls made, polls that failed, events appended, the last error."""

    polls: int = 0
    failed: int = 0
    events: int = 0
    last_error: str | None = None
    whole_after_s: float | None = None  # `wait_whole`'s wait; None: not whole within its limit (or not asked)

    def to_dict(self) -> dict[str, Any]:
        return {"polls": self.polls, "failed": self.failed, "events": self.events, "last_error": self.last_error,
                "whole_after_s": self.whole_after_s}


def _name(ids: dict[int, str], broker_id: int) -> str:
    return ids.get(broker_id, f"broker:{broker_id}")


def _batch(b: BatchId | None) -> dict[str, int] | None:
    return None if b is None else b.to_dict()


def is_whole(value: Mapping[str, Any] | None) -> bool:
    """Whether an observed state (`state_of`) has a leader for every partition and every
    replica in its ISR."""
    return value is not None and all(p["leader"] is not None and set(p["isr"]) >= set(p["replicas"])
                                     for p in value["partitions"].values())


def state_of(md: Metadata, ids: dict[int, str]) -> dict[str, Any]:
    """The event value for `md`; `ids` (broker id -> node name) is used and not changed."""
    parts = {}
    for (topic, p), info in sorted(md.partitions.items()):
        if topic.startswith("__"):
            continue
        parts[f"{topic}-{p}"] = {"leader": None if info.leader < 0 else _name(ids, info.leader),
                                 "isr": [_name(ids, b) for b in info.isrs],
                                 "replicas": [_name(ids, b) for b in info.replicas]}
    ctrl = None if md.controller_id is None or md.controller_id < 0 else _name(ids, md.controller_id)
    return {"controller": ctrl, "partitions": parts}


class ClusterObserver:
    """See the module docstring. `addresses`: node name -> address (the brokers' hosts);
    `offsets` and `replica_log` read a node's offsets and a replica's log after the final
    phase (`nemesis.targets.node_offset`, `nemesis.replicalogs.read_replica`)."""

    def __init__(self, metadata: MetadataSource, addresses: Mapping[str, str], sink: EventSink,
                 interval: float = 0.5, *, offsets: Callable[..., int] = node_offset,
                 replica_log: Callable[[str, str, int], ReplicaLog] = read_replica):
        self.metadata = metadata
        self.by_address = {a: n for n, a in addresses.items()}
        self.sink = sink
        self.interval = interval
        self.stats = ObserverStats()
        self.ids: dict[int, str] = {}
        self._last: dict[str, Any] | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.txn_settle_s = TXN_SETTLE_S
        self.offsets, self.replica_log = offsets, replica_log  # the reads of the nodes after the final phase

    def poll(self) -> dict[str, Any] | None:
        """One poll: the event appended, or None (unchanged, or the metadata call failed)."""
        self.stats.polls += 1
        try:
            md = self.metadata()
        except Exception as e:  # noqa: BLE001 - brokers being down is what faults do
            self.stats.failed += 1
            self.stats.last_error = f"{type(e).__name__}: {e}"[:200]
            return None
        for bid, host in md.brokers.items():
            if host in self.by_address:
                self.ids[bid] = self.by_address[host]
        value = state_of(md, self.ids)
        if value == self._last or self._stop.is_set():
            return None
        try:
            ev = self.sink.append({"process": "nemesis", "type": "info", "f": CLUSTER_STATE, "value": value})
        except ValueError as e:  # the history was closed under a late poll: nothing more to record
            self.stats.last_error = f"append: {e}"
            return None
        self._last = value
        self.stats.events += 1
        return ev

    def wait_whole(self, timeout: float) -> float | None:
        """Wait until the last observed state `is_whole` (the observer thread polls on) or
        `timeout` s pass: the seconds waited, or None; kept in the stats. The runner calls it
        after the final phase, so the history ends with the recovered cluster (a replica that
        never rejoins its ISR shows in the last state). None at once when nothing was ever
        observed (no broker answered in the whole run: the noop workload's runs). Then it
        waits for the partitions' transactions to settle (`settle_transactions`, at most
        `txn_settle_s`), so the history also ends with each partition's last stable offset."""
        if self._last is None:
            return None
        t0, answered = time.monotonic(), self.stats.polls - self.stats.failed
        while True:
            waited = round(time.monotonic() - t0, 2)
            # an answer since the wait began: the last state could date from before it
            if self.stats.polls - self.stats.failed > answered and is_whole(self._last):
                self.stats.whole_after_s = waited
                break
            if waited >= timeout:
                self.stats.whole_after_s = None
                break
            time.sleep(min(self.interval, 0.1))
        self.settle_transactions(self.txn_settle_s)
        self.compare_replicas()
        return self.stats.whole_after_s

    def settle_transactions(self, timeout: float) -> dict[str, Any] | None:
        """Wait until every observed partition's last stable offset (what read_committed
        consumers may read to) reaches its high watermark, both asked of its leader, or
        `timeout` s pass; append one `txn-state` event: {"partitions": {key: {"lso", "hwm"}},
        "open": [keys whose LSO stayed below the HWM], "waited_s"}. A transaction that is never
        completed or aborted holds its partition's LSO for good (checkers/txnhang.py). Nothing
        is appended when no partition answered."""
        t0 = time.monotonic()
        while True:
            offsets = self._stable_offsets()
            open_keys = sorted(k for k, o in offsets.items() if o["lso"] < o["hwm"])
            waited = round(time.monotonic() - t0, 2)
            if not open_keys or waited >= timeout:
                break
            time.sleep(0.5)
        if not offsets:
            return None
        value = {"partitions": offsets, "open": open_keys, "waited_s": waited}
        try:
            return self.sink.append({"process": "nemesis", "type": "info", "f": TXN_STATE, "value": value})
        except ValueError:  # the history was closed
            return None

    def compare_replicas(self) -> dict[str, Any] | None:
        """Read every replica's log of every partition (`nemesis.replicalogs`, Kafka's
        debugging fetch) and append one `replica-state` event: {"partitions": {key:
        {"replicas": {node: {"hwm", "log_start", "log_end", "batches"}}, "differ": [{"replicas":
        [a, b], "offset", "a": batch, "b": batch, "written"}]}}, "unread": {key: {node:
        error}}, "read_s"}: for each pair of replicas the first offset at which their logs
        differ (`first_difference`), with the two batches there and `written`, the history
        time of the later one's max timestamp (when both records existed). Nothing is appended
        when no partition's metadata came."""
        t0 = time.monotonic()
        try:
            md = self.metadata()
        except Exception:  # noqa: BLE001 - no answer: nothing to compare
            return None
        parts: dict[str, Any] = {}
        unread: dict[str, dict[str, str]] = {}
        for (topic, p), info in sorted(md.partitions.items()):
            if topic.startswith("__") or len(info.replicas) < 2:  # one copy: nothing to compare it with
                continue
            key = f"{topic}-{p}"
            logs: dict[str, ReplicaLog] = {}
            for bid in info.replicas:
                host, node = md.brokers.get(bid), _name(self.ids, bid)
                try:
                    if host is None:
                        raise OSError("not among the brokers the metadata lists")
                    logs[node] = self.replica_log(host, topic, p)
                except Exception as e:  # noqa: BLE001 - a replica that does not answer is noted, not compared
                    unread.setdefault(key, {})[node] = f"{type(e).__name__}: {e}"[:200]
            parts[key] = {"replicas": {n: log.summary() for n, log in logs.items()},
                          "differ": self._differences(logs)}
        value = {"partitions": parts, "unread": unread, "read_s": round(time.monotonic() - t0, 2)}
        try:
            return self.sink.append({"process": "nemesis", "type": "info", "f": REPLICA_STATE, "value": value})
        except ValueError:  # the history was closed
            return None

    def _differences(self, logs: Mapping[str, ReplicaLog]) -> list[dict[str, Any]]:
        names = sorted(logs)
        out = []
        for i, a in enumerate(names):
            for b in names[i + 1:]:
                d = first_difference(logs[a], logs[b])
                if d is not None:
                    offset, x, y = d
                    out.append({"replicas": [a, b], "offset": offset, "a": _batch(x), "b": _batch(y),
                                "written": self._history_time(max(z.max_ts for z in (x, y) if z is not None))})
        return out

    def _history_time(self, wall_ms: int) -> int | None:
        """A wall-clock time (ms) as history time (ns since the history began), if the sink
        knows when that was (a HistoryWriter's `start_ns`)."""
        start = getattr(self.sink, "start_ns", None)
        if not isinstance(start, int):
            return None
        wall_start_ns = time.time_ns() - (time.monotonic_ns() - start)
        return max(0, wall_ms * 1_000_000 - wall_start_ns)

    def _stable_offsets(self) -> dict[str, dict[str, int]]:
        """key -> {"lso", "hwm"} from each partition's leader (partitions that do not answer
        are left out)."""
        try:
            md = self.metadata()
        except Exception:  # noqa: BLE001 - no answer: nothing to say
            return {}
        out = {}
        for (topic, p), info in sorted(md.partitions.items()):
            host = md.brokers.get(info.leader)
            if topic.startswith("__") or host is None:
                continue
            try:
                hwm = self.offsets(host, topic, p)
                lso = self.offsets(host, topic, p, committed=True)
            except Exception:  # noqa: BLE001 - a leader that does not answer now
                continue
            out[f"{topic}-{p}"] = {"lso": lso, "hwm": hwm}
        return out

    def _run(self) -> None:
        while not self._stop.is_set():
            self.poll()
            self._stop.wait(self.interval)

    def start(self) -> ClusterObserver:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="cluster-observer", daemon=True)
            self._thread.start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Stop polling and wait (at most `timeout` s) for the thread to end."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
