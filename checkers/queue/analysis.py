"""From a finished `QueuePass` to anomalies, the verdict and the result object.

`finish(qp, ...)` resolves what the streaming pass could only note as candidates (a gap
is a skip only if the final version order knows an offset inside it; an indeterminate
send's offset may only be known from polls), classifies every anomaly of
`checkers.queue.ANOMALY_TYPES`, writes one sentence per example, and applies the policy.
The definitions live in the `checkers.queue` docstring and docs/checkers-queue.md.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from typing import Any

from checkers.optable import FAIL, INFO, OK, OpTable
from checkers.queue.core import QueuePass
from checkers.queue.cycles import find_cycles
from checkers.queue.policy import type_order
from checkers.stats import summarize
from contracts.history import fault_windows

SKIPPED_SHOWN = 10
VALUES_SHOWN = 32


class Found:
    """Anomalies found: every one counted (also per key: the partition its example names, "?"
    for none), the first `cap` of each type kept as examples."""

    def __init__(self, cap: int):
        self.cap = cap
        self.examples: dict[str, list[dict[str, Any]]] = {}
        self.counts: dict[str, int] = {}
        self.keys: dict[str, dict[str, int]] = {}

    def add(self, kind: str, example: dict[str, Any], count: int = 1) -> None:
        self.counts[kind] = self.counts.get(kind, 0) + count
        per_key = self.keys.setdefault(kind, {})
        key = str(example.get("key", "?"))
        per_key[key] = per_key.get(key, 0) + count
        lst = self.examples.setdefault(kind, [])
        if len(lst) < self.cap:
            lst.append(example)


@dataclass
class QueueAnalysis:
    """A checked queue history: the result object plus the series plots are drawn from."""

    result: dict[str, Any]
    table: OpTable
    nemesis: list[dict[str, Any]]
    ack_t: dict[str, dict[Any, int]] = field(default_factory=dict)
    read_t: dict[str, dict[Any, int]] = field(default_factory=dict)
    last_time: int = 0

    def unseen_series(self) -> tuple[list[int], list[int]]:
        """(times, counts): acknowledged sends not yet returned by any ok poll, over time.

        A send counts from its ack until the completion of the first ok poll that
        returned it (never, if none did).
        """
        deltas: dict[int, int] = {}
        for k, acks in self.ack_t.items():
            reads = self.read_t.get(k, {})
            for v, a in acks.items():
                r = reads.get(v)
                if r is not None and r <= a:
                    continue
                deltas[a] = deltas.get(a, 0) + 1
                if r is not None:
                    deltas[r] = deltas.get(r, 0) - 1
        times = sorted(deltas)
        counts: list[int] = []
        c = 0
        for t in times:
            c += deltas[t]
            counts.append(c)
        return times, counts

    def lag_points(self) -> tuple[list[int], list[int], list[str]]:
        """(ack times, lags, keys): realtime lag of every acknowledged send that was read."""
        ts: list[int] = []
        lags: list[int] = []
        keys: list[str] = []
        for k, acks in self.ack_t.items():
            reads = self.read_t.get(k, {})
            for v, a in acks.items():
                r = reads.get(v)
                if r is not None:
                    ts.append(a)
                    lags.append(r - a if r > a else 0)
                    keys.append(k)
        return ts, lags, keys


def finish(qp: QueuePass, *, ww_deps: bool, timed_out: bool = False, stats: bool = True) -> QueueAnalysis:
    """Classify the anomalies of a finished pass and build the raw result object: `valid` false
    for any anomaly, else "unknown" when the history was not checkable (`complete` false: the
    time limit, or no send, poll or txn op), else true. What a run may lose is applied by the
    one verdict (checkers/verdict.py)."""
    found = Found(qp.max_examples)
    committed = _committed_info_ops(qp)
    if not timed_out:
        for idx, k, v, o in qp.info_sends:
            if o is not None and idx in committed:
                qp.observe(k, o, v, idx)
    order = _Orders(qp)
    _inconsistent_offsets(qp, found)
    _duplicates(qp, found)
    _poll_order(qp, order, found)
    _send_order(qp, order, committed, found)
    _precommitted(qp, found)
    if not timed_out:
        lost = _lost_writes(qp, committed, found)
        _unseen(qp, lost, found)
        _g1a_garbage(qp, found)
        if qp.graph_ops:
            find_cycles(qp, committed, ww_deps, found)
    complete = not timed_out and bool({"send", "poll", "txn"} & set(qp.table.f_names))
    types = sorted(found.counts, key=type_order)
    valid: Any = False if types else True if complete else "unknown"
    result: dict[str, Any] = {
        "valid": valid,
        "complete": complete,
        "anomaly_types": types,
        "anomalies": {t: found.examples[t] for t in types},
        "anomaly_counts": {t: found.counts[t] for t in types},
        "anomaly_keys": {t: dict(sorted(found.keys[t].items())) for t in types},
        "ww_deps": ww_deps,
    }
    result["anomaly_times"] = first_anomaly_times(result["anomalies"], qp.table)
    result["first_anomaly_time"] = min(result["anomaly_times"].values(), default=None)
    if timed_out:
        result["reason"] = ("time limit reached before the whole history was read: only anomalies "
                            "a prefix proves are listed")
    elif not complete:
        result["reason"] = "no send, poll or txn op in the history: nothing to check"
    an = QueueAnalysis(result=result, table=qp.table, nemesis=qp.nemesis, ack_t=qp.ack_t,
                       read_t=qp.read_t, last_time=qp.last_time)
    lag = _lag_summary(qp)
    result["worst_realtime_lag"] = lag.pop("worst")
    result["checked"] = {
        "events": qp.events, "ops": len(qp.table), "keys": len(set(qp.writer) | set(qp.read_t)),
        "sends_acked": sum(len(a) for a in qp.ack_t.values()),
        "values_read": sum(len(r) for r in qp.read_t.values()),
    }
    if stats:
        s = summarize(qp.table, fault_windows(qp.nemesis), last_time=qp.last_time)
        s["realtime_lag"] = lag
        result["stats"] = s
    return an


def first_anomaly_times(anomalies: dict[str, list[dict[str, Any]]], table: OpTable) -> dict[str, int]:
    """When the history first witnessed each anomaly type: an example is witnessed once the
    last of the ops it cites (`ops`) has happened (a lost write at the read that skipped it,
    not at its send), each op at the time of the event that names it (its completion; its
    invoke if it never completed); a type's time is its earliest example's. History time, ns
    since the workload started; types without a timed example are left out. Only the
    examples kept (`max_examples` per type) are looked at."""
    # lazy: numpy takes ~60 ms; `wrack` imports this module at every start (cmd_check's POLICIES)
    import numpy as np

    cited_ops = [i for exs in anomalies.values() for ex in exs for i in ex.get("ops", ())]
    if not cited_ops:
        return {}
    cols = table.columns()
    cited = np.isin(cols["index"], cited_ops)
    at = dict(zip(cols["index"][cited].tolist(), np.where(cols["done"], cols["t1"], cols["t0"])[cited].tolist(),
                  strict=True))
    out: dict[str, int] = {}
    for t, exs in anomalies.items():
        witnessed = [max(at[i] for i in ex["ops"] if i in at) for ex in exs if any(i in at for i in ex.get("ops", ()))]
        if witnessed:
            out[t] = int(min(witnessed))
    return out


def _committed_info_ops(qp: QueuePass) -> set[int]:
    """Indeterminate send/txn ops proven committed: some value they sent was read by an ok poll."""
    out: set[int] = set()
    read_t = qp.read_t
    for idx, k, v, _o in qp.info_sends:
        r = read_t.get(k)
        if r is not None and v in r:
            out.add(idx)
    return out


class _Orders:
    """The final version order per key: sorted known offsets, for gaps and ranks."""

    def __init__(self, qp: QueuePass):
        self.qp = qp
        self._sorted: dict[str, list[int]] = {}

    def offsets(self, k: str) -> list[int]:
        s = self._sorted.get(k)
        if s is None:
            s = self._sorted[k] = sorted(self.qp.off2val.get(k, ()))
        return s

    def between(self, k: str, lo: int, hi: int) -> list[int]:
        """Known offsets strictly between lo and hi."""
        s = self.offsets(k)
        return s[bisect_right(s, lo):bisect_left(s, hi)]

    def delta(self, k: str, o1: int, o2: int) -> int:
        """Index distance from o1 to o2 in the dense version order (o2 after o1: positive)."""
        s = self.offsets(k)
        return bisect_left(s, o2) - bisect_left(s, o1)

    def values(self, k: str, offsets: list[int]) -> list[Any]:
        ov = self.qp.off2val.get(k, {})
        return [ov[o] for o in offsets[:SKIPPED_SHOWN]]


def _who(qp: QueuePass, idx: int) -> str:
    p = qp.op_process.get(idx)
    return f"op {idx}" if p is None else f"op {idx} (process {p})"


def _inconsistent_offsets(qp: QueuePass, found: Found) -> None:
    for (k, o), vals in qp.conflicts.items():
        parts = ", ".join(f"{v!r} (op {op})" for v, op in vals.items())
        found.add("inconsistent-offsets", {
            "explanation": f"offset {o} of key {k} was seen holding {len(vals)} different values: {parts}",
            "ops": sorted(set(vals.values())), "key": k, "offset": o, "values": list(vals)})


def _duplicates(qp: QueuePass, found: Found) -> None:
    for (k, v), offs in qp.dups.items():
        parts = ", ".join(f"{o} (op {op})" for o, op in sorted(offs.items()))
        found.add("duplicate", {
            "explanation": f"value {v!r} of key {k} appears at {len(offs)} offsets: {parts}",
            "ops": sorted(set(offs.values())), "key": k, "value": v, "offsets": sorted(offs)})


def _poll_order(qp: QueuePass, order: _Orders, found: Found) -> None:
    for k, o1, o2, i1, i2, p in qp.nm_poll:
        found.add("nonmonotonic-poll", {
            "explanation": (f"process {p} read key {k} up to offset {o1} (op {i1}), then its next poll "
                            f"(op {i2}) started at offset {o2}, going back, with no assign or subscribe "
                            f"in between"),
            "ops": [i1, i2], "key": k, "process": p, "offsets": [o1, o2], "delta": order.delta(k, o1, o2)})
    for k, o1, o2, i1, i2, p in qp.poll_skip_c:
        gap = order.between(k, o1, o2)
        if gap:
            found.add("poll-skip", {
                "explanation": (f"process {p} read key {k} up to offset {o1} (op {i1}), then its next poll "
                                f"(op {i2}) started at offset {o2}, skipping {len(gap)} record(s) other ops "
                                f"show exist (offsets {_span(gap)})"),
                "ops": [i1, i2], "key": k, "process": p, "offsets": [o1, o2], "delta": len(gap) + 1,
                "skipped": order.values(k, gap)})
    for k, o1, o2, i in qp.int_nm_poll:
        found.add("int-nonmonotonic-poll", {
            "explanation": (f"{_who(qp, i)} polled key {k} at offset {o1} and then at offset {o2}, "
                            f"going back (or repeating) within one op"),
            "ops": [i], "key": k, "offsets": [o1, o2], "delta": order.delta(k, o1, o2)})
    for k, o1, o2, i in qp.int_poll_skip_c:
        gap = order.between(k, o1, o2)
        if gap:
            found.add("int-poll-skip", {
                "explanation": (f"{_who(qp, i)} polled key {k} at offset {o1} and next at offset {o2}, "
                                f"skipping {len(gap)} record(s) other ops show exist (offsets {_span(gap)})"),
                "ops": [i], "key": k, "offsets": [o1, o2], "delta": len(gap) + 1,
                "skipped": order.values(k, gap)})


def _span(offsets: list[int]) -> str:
    if len(offsets) == 1:
        return str(offsets[0])
    return f"{offsets[0]}..{offsets[-1]}"


def _send_offset(qp: QueuePass, k: str, o: int | None, v: Any, committed: set[int], idx: int) -> int | None:
    """Where a send landed: its own acknowledged offset, else where the history shows its value."""
    w = qp.writer.get(k, {}).get(v)
    if w is not None and (w & 3) == INFO and o is not None and idx not in committed:
        o = None  # an uncommitted indeterminate send's offset proves nothing
    if o is not None:
        return o
    return qp.val2off.get(k, {}).get(v)


def _send_order(qp: QueuePass, order: _Orders, committed: set[int], found: Found) -> None:
    for k, o1, v1, i1, o2, v2, i2, p in qp.send_pairs:
        a = _send_offset(qp, k, o1, v1, committed, i1)
        b = _send_offset(qp, k, o2, v2, committed, i2)
        if a is None or b is None or b > a:
            continue
        found.add("nonmonotonic-send", {
            "explanation": (f"process {p} sent {v1!r} to key {k}, landing at offset {a} (op {i1}), then "
                            f"sent {v2!r} (op {i2}), which landed at offset {b}, not after it"),
            "ops": [i1, i2], "key": k, "process": p, "values": [v1, v2], "offsets": [a, b],
            "delta": order.delta(k, a, b)})
    for idx, k, sends in qp.int_sends:
        offs = [_send_offset(qp, k, o, v, committed, idx) for o, v in sends]
        for j in range(1, len(sends)):
            a, b = offs[j - 1], offs[j]
            if a is None or b is None:
                continue
            v1, v2 = sends[j - 1][1], sends[j][1]
            if b <= a:
                found.add("int-nonmonotonic-send", {
                    "explanation": (f"{_who(qp, idx)} sent {v1!r} then {v2!r} to key {k}, but they landed "
                                    f"at offsets {a} and {b}, out of order"),
                    "ops": [idx], "key": k, "values": [v1, v2], "offsets": [a, b],
                    "delta": order.delta(k, a, b)})
            elif b > a + 1:
                gap = order.between(k, a, b)
                if gap:
                    found.add("int-send-skip", {
                        "explanation": (f"{_who(qp, idx)} sent {v1!r} then {v2!r} to key {k}, landing at "
                                        f"offsets {a} and {b} with {len(gap)} other record(s) between them"),
                        "ops": [idx], "key": k, "values": [v1, v2], "offsets": [a, b],
                        "delta": len(gap) + 1, "skipped": order.values(k, gap)})


def _precommitted(qp: QueuePass, found: Found) -> None:
    for idx, k, v in qp.precommitted:
        found.add("precommitted-read", {
            "explanation": (f"txn {_who(qp, idx)} polled {v!r} from key {k}, a value it sent itself: "
                            f"consumers must never see records of a transaction before it commits"),
            "ops": [idx], "key": k, "value": v})


def _lost_writes(qp: QueuePass, committed: set[int], found: Found) -> set[tuple[str, Any]]:
    lost: set[tuple[str, Any]] = set()
    for k, vo in qp.val2off.items():
        mr = qp.max_read.get(k)
        if mr is None:
            continue
        bound, bound_op = mr
        reads = qp.read_t.get(k, {})
        w = qp.writer.get(k, {})
        dups = qp.dups
        for v, o in vo.items():
            if o > bound or v in reads:
                continue
            if (k, v) in dups:  # a value seen at several offsets must be read by its last one
                o = max(dups[(k, v)])
                if o > bound:
                    continue
            code = w.get(v)
            if code is None:
                continue
            st, op = code & 3, code >> 2
            if st == FAIL or (st == INFO and op not in committed):
                continue
            lost.add((k, v))
            how = "acknowledged" if st == OK else "indeterminate but proven committed"
            found.add("lost-write", {
                "explanation": (f"{_who(qp, op)} sent {v!r} to key {k} ({how}, offset {o}), but no poll "
                                f"ever returned it, although op {bound_op} read key {k} up to offset {bound}"),
                "ops": [op, bound_op], "key": k, "value": v, "offset": o, "max_read_offset": bound})
    return lost


def _unseen(qp: QueuePass, lost: set[tuple[str, Any]], found: Found) -> None:
    for k in sorted(qp.ack_t):
        reads = qp.read_t.get(k, {})
        w = qp.writer[k]
        vals = [v for v in qp.ack_t[k] if v not in reads and (k, v) not in lost]
        if not vals:
            continue
        ops = [w[v] >> 2 for v in vals]
        mr = qp.max_read.get(k)
        upto = f"its highest offset read was {mr[0]}" if mr else "no poll ever returned any record of it"
        found.add("unseen", {
            "explanation": (f"{len(vals)} acknowledged send(s) to key {k} were never returned by any poll "
                            f"by the end of the history ({upto}); e.g. {vals[0]!r} sent by op {ops[0]}"),
            "ops": ops[:VALUES_SHOWN], "key": k, "count": len(vals), "values": vals[:VALUES_SHOWN]},
            count=len(vals))


def _g1a_garbage(qp: QueuePass, found: Found) -> None:
    for k, vals in qp.failed.items():
        reads = qp.read_t.get(k)
        if not reads:
            continue
        for v in vals:
            if v in reads:
                wop = qp.writer[k][v] >> 2
                rop = qp.read_op[k][v]
                found.add("G1a", {
                    "explanation": (f"op {rop} polled {v!r} from key {k}, but the send of it ({_who(qp, wop)}) "
                                    f"definitely failed: an aborted read"),
                    "ops": [wop, rop], "key": k, "value": v})
    for k, reads in qp.read_t.items():
        w = qp.writer.get(k, {})
        for v in reads:
            if v not in w:
                rop = qp.read_op[k][v]
                found.add("garbage-read", {
                    "explanation": f"op {rop} polled {v!r} from key {k}, a value no op ever sent",
                    "ops": [rop], "key": k, "value": v})


def _lag_summary(qp: QueuePass) -> dict[str, Any]:
    """Realtime lag per key: ack of a send to the completion of the first ok poll returning it."""
    per_key: dict[str, Any] = {}
    worst: dict[str, Any] = {"key": None, "value": None, "ack_time": 0, "lag": 0}
    for k in sorted(qp.ack_t):
        acks = qp.ack_t[k]
        reads = qp.read_t.get(k, {})
        lags = []
        never = 0
        for v, a in acks.items():
            r = reads.get(v)
            if r is None:
                never += 1
                continue
            lag = r - a if r > a else 0
            lags.append(lag)
            if lag > worst["lag"]:
                worst = {"key": k, "value": v, "ack_time": a, "lag": lag}
        if not lags and not never:
            continue
        lags.sort()
        n = len(lags)
        per_key[k] = {
            "read": n, "never_read": never,
            "p50_ns": lags[n // 2] if n else None,
            "p95_ns": lags[min(n - 1, (n * 95) // 100)] if n else None,
            "max_ns": lags[-1] if n else None,
        }
    return {"by_key": per_key, "worst": worst}
