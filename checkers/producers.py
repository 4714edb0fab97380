"""Idempotent producers: the log must hold each producer's records in the order it was handed
them, without gaps.

KIP-98: an idempotent producer numbers the records it sends to each partition (producer id,
epoch, sequence), and the partition's leader appends a batch only if its first sequence
follows the last one it appended for that producer; otherwise it answers
OUT_OF_ORDER_SEQUENCE and the producer sends again, in order. With up to 5 requests in
flight, for one producer instance and one partition, Kafka therefore promises:

- order: the records land at increasing offsets in the order the producer was handed them;
- no gaps: once a record is acknowledged, every record handed to the producer before it for
  that partition was appended before it.

The promise holds as long as the producer keeps its epoch. librdkafka bumps it when
messages time out in the client, and may skip a batch that failed for good; the harness's
idempotent producers do neither (no message timeout, `enable.gapless.guarantee`:
workloads/kafka_io.py), and a fatal error replaces the producer, a new instance with its
own order. Concurrent sends by many processes through one shared producer (the queue
workload's send lanes) are ordered by this promise even though no process waited for another.

Input: send completions carrying `"producer": [[instance, n] or null, ...]` (one per send
micro-op: the n-th record handed to that instance; workloads/queue.py `SendLane`), the
offsets acknowledged sends were given, and the records ok polls returned.

Anomalies (examples as the queue checker's, `{"explanation", "ops", ...}`):
- `producer-reorder`: a producer instance was handed a then b for key k, and b is at a lower
  offset than a (each at its acknowledged offset, else the lowest offset a poll read it at:
  a record written twice, a `duplicate`, counts where it was first written);
- `producer-gap`: a producer instance was handed a then b for key k; b was acknowledged at
  offset o, ok polls read k at o or above, and a was never found at any offset.

`check(events) -> result`: `valid`, `anomaly_types`, `anomalies`, `anomaly_counts`,
`anomaly_keys` ({type: {key: count}}), `anomaly_times` (ns of the completion that showed each type first), and
`producers` {"instances", "records"} counted. A history without producer stamps is valid
with nothing counted (kafka-python, acks other than all, transactions).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

PRODUCER_REORDER = "producer-reorder"
PRODUCER_GAP = "producer-gap"
MAX_EXAMPLES = 32


@dataclass(frozen=True)
class Handed:
    """One record a producer instance was handed: its number, value, the completion that
    reported it (index, time) and the offset its acknowledgement named (ok only; None when
    unknown, e.g. -1 for a batch the leader called a duplicate)."""

    n: int
    value: Any
    index: int
    time: int
    acked: int | None


def check(events: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The producer-order check's result (module docstring)."""
    order = ProducerOrder()
    for ev in events:
        order.feed(ev)
    return order.result()


class ProducerOrder:
    """The check fed one event at a time (e.g. from another checker's pass); it keeps the
    stamped sends and, per record read, only its lowest offset."""

    def __init__(self) -> None:
        self.streams: dict[tuple[str, str], list[Handed]] = defaultdict(list)  # (instance, key) -> records
        self.found_at: dict[tuple[str, Any], int] = {}  # (key, value) -> the lowest offset a poll read it at
        self.read_to: dict[str, int] = {}  # key -> the highest offset an ok poll read

    def feed(self, ev: Mapping[str, Any]) -> None:
        if ev.get("f") == "send" and "producer" in ev and ev.get("type") in ("ok", "info", "fail"):
            _take_sends(ev, self.streams)
        elif ev.get("type") == "ok":
            for key, off, value in _reads(ev):
                if off < self.found_at.get((key, value), off + 1):
                    self.found_at[(key, value)] = off
                if off > self.read_to.get(key, -1):
                    self.read_to[key] = off

    def result(self) -> dict[str, Any]:
        found = _Found()
        for (instance, key), records in self.streams.items():
            records.sort(key=lambda r: r.n)
            _reorders(instance, key, records, self.found_at, found)
            _gaps(instance, key, records, self.found_at, self.read_to.get(key, -1), found)
        result = found.result()
        result["producers"] = {"instances": len({i for i, _ in self.streams}),
                               "records": sum(len(r) for r in self.streams.values())}
        return result


def _take_sends(ev: Mapping[str, Any], streams: dict[tuple[str, str], list[Handed]]) -> None:
    stamps = ev["producer"] or []
    for mop, stamp in zip(ev.get("value") or [], stamps, strict=False):
        if stamp is None or not mop or mop[0] != "send":
            continue
        key, got = mop[1], mop[2]
        acked = got[0] if ev["type"] == "ok" and isinstance(got, list) and isinstance(got[0], int) else None
        acked = acked if acked is None or acked >= 0 else None  # -1: acknowledged at an unknown offset
        value = got[1] if isinstance(got, list) else got
        streams[(str(stamp[0]), key)].append(Handed(int(stamp[1]), value, ev.get("index", -1),
                                                    ev.get("time", 0), acked))


def _reads(ev: Mapping[str, Any]) -> Iterator[tuple[str, int, Any]]:
    """(key, offset, value) of every record an ok poll or txn completion returned."""
    if ev.get("f") not in ("poll", "txn"):
        return
    for mop in ev.get("value") or []:
        if mop and mop[0] == "poll" and len(mop) > 1 and isinstance(mop[1], dict):
            for key, records in mop[1].items():
                for off, value in records:
                    yield key, off, value


def _position(r: Handed, key: str, found_at: Mapping[tuple[str, Any], int]) -> int | None:
    return r.acked if r.acked is not None else found_at.get((key, r.value))


def _reorders(instance: str, key: str, records: list[Handed], found_at: Mapping[tuple[str, Any], int],
              found: _Found) -> None:
    """Each record found below an earlier-handed one of the same instance (the highest so far)."""
    top: tuple[int, Handed] | None = None
    for r in records:
        pos = _position(r, key, found_at)
        if pos is None:
            continue
        if top is not None and pos < top[0]:
            a = top[1]
            found.add(PRODUCER_REORDER, key, max(a.time, r.time), {
                "explanation": f"producer {instance} was handed {a.value!r} (its record {a.n}) before "
                               f"{r.value!r} (record {r.n}) for {key}, but {r.value!r} is at offset {pos}, "
                               f"below {a.value!r} at {top[0]}",
                "ops": [a.index, r.index], "key": key, "producer": instance,
                "earlier": {"value": a.value, "n": a.n, "offset": top[0]},
                "later": {"value": r.value, "n": r.n, "offset": pos}})
        elif top is None or pos > top[0]:
            top = (pos, r)


def _gaps(instance: str, key: str, records: list[Handed], found_at: Mapping[tuple[str, Any], int],
          read_to: int, found: _Found) -> None:
    """Each record never found although a later-handed one was acknowledged at an offset the
    polls read up to (reported once, with the first such acknowledgement)."""
    missing: list[Handed] = []
    for r in records:
        if r.acked is not None and r.acked <= read_to:
            for a in missing:
                found.add(PRODUCER_GAP, key, r.time, {
                    "explanation": f"producer {instance} was handed {a.value!r} (its record {a.n}) before "
                                   f"{r.value!r} (record {r.n}) for {key}; {r.value!r} was acknowledged at "
                                   f"offset {r.acked} and polls read {key} up to {read_to}, but "
                                   f"{a.value!r} is nowhere",
                    "ops": [a.index, r.index], "key": key, "producer": instance,
                    "missing": {"value": a.value, "n": a.n}, "acknowledged": {"value": r.value, "n": r.n,
                                                                              "offset": r.acked}})
            missing = []
        if _position(r, key, found_at) is None:
            missing.append(r)


class _Found:
    """Anomalies by type: counts, the keys, the first time, at most MAX_EXAMPLES examples."""

    def __init__(self) -> None:
        self.examples: dict[str, list[dict[str, Any]]] = defaultdict(list)
        self.counts: dict[str, int] = defaultdict(int)
        self.keys: dict[str, dict[str, int]] = defaultdict(dict)
        self.times: dict[str, int] = {}

    def add(self, kind: str, key: str, time: int, example: dict[str, Any]) -> None:
        self.counts[kind] += 1
        self.keys[kind][key] = self.keys[kind].get(key, 0) + 1
        self.times[kind] = min(time, self.times.get(kind, time))
        if len(self.examples[kind]) < MAX_EXAMPLES:
            self.examples[kind].append({**example, "time": time})

    def result(self) -> dict[str, Any]:
        kinds = sorted(self.counts)
        return {"valid": not kinds, "anomaly_types": kinds, "anomalies": dict(self.examples),
                "anomaly_counts": dict(self.counts), "anomaly_keys": {k: dict(v) for k, v in self.keys.items()},
                "anomaly_times": dict(self.times)}
