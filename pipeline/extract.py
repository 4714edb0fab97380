"""One run folder to table rows: the ops of its history, its faults, its `runs` row.

`read_history` streams history.jsonl into Arrow record batches of the `ops` schema and
collects nemesis fault windows. It never raises on a bad history: it stops at the first
line it cannot use (malformed JSON, a bad field, or an event `contracts.pairing` refuses:
an `ok` without an invoke, a second invoke while one is open, a completion of another `f`)
and reports it in `HistoryStats.damage` with the number of lines it did not ingest. A torn
last line (harness killed mid-write) is damage too.
Operations still open at the end (or at the damage) become indeterminate (`info`).

`runs_row` builds the `runs` row from test.json, results.json and those stats;
`result_anomaly_rows` turns results.json's examples into `anomalies` rows.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from contracts.errors import InputError
from contracts.history import TYPES, fault_windows, loads, validate_event
from contracts.pairing import NEMESIS, Pairing, same_line
from pipeline.schemas import OPS, OPTION_COLUMNS, verdict_str

QUEUE_FS = frozenset(("send", "poll", "txn"))
KEYSET_FS = frozenset(("assign", "subscribe"))
BATCH_ROWS = 262_144


@dataclass
class HistoryStats:
    """What reading one history found."""

    bytes: int = 0
    lines: int = 0
    events: int = 0
    ops: int = 0
    op_rows: int = 0
    nemesis_events: int = 0
    first_time: int | None = None
    last_time: int | None = None
    damage: str | None = None
    dropped_lines: int = 0
    faults: list[dict[str, Any]] = field(default_factory=list)
    times: dict[int, int] = field(default_factory=dict)
    keys: set[str] = field(default_factory=set)


OP_LEVEL = ("process", "f", "type", "index", "time", "ret_index", "ret_time", "error", "raw")
ROW_LEVEL = ("mop_index", "mop", "key", "offset", "value")
SPARSE = ("value_str", "rebalanced")  # mostly null: kept as {row: value} until `batch()`


def string_value_id(v: str) -> int:
    """The int64 a string value is checked as: a negative 62-bit hash (ints stay themselves)."""
    h = int.from_bytes(hashlib.blake2b(v.encode(), digest_size=8).digest(), "big") & ((1 << 62) - 1)
    return -1 - h


class _Cols:
    """Column buffers of the `ops` schema: op-level columns once per op, expanded at `batch()`."""

    def __init__(self, run_id: str, keys: set[str]) -> None:
        self.run_id = run_id
        self.keys = keys  # gets the keys of micro-ops, over every batch
        self._reset()

    def _reset(self) -> None:
        self.ops: dict[str, list[Any]] = {c: [] for c in OP_LEVEL}
        self.rows: dict[str, list[Any]] = {c: [] for c in ROW_LEVEL}
        self.sparse: dict[str, dict[int, Any]] = {c: {} for c in SPARSE}
        self.op_pos: list[int] = []
        self.n = 0

    def batch(self) -> pa.RecordBatch:
        take = pa.array(self.op_pos, type=pa.int32())
        arrays = {"run_id": pa.repeat(pa.scalar(self.run_id, pa.string()), self.n)}
        for c in OP_LEVEL:
            arrays[c] = pa.array(self.ops[c], type=OPS.field(c).type).take(take)
        for c in ROW_LEVEL:
            arrays[c] = pa.array(self.rows[c], type=OPS.field(c).type)
        for c in SPARSE:
            vals: list[Any] = [None] * self.n
            for i, v in self.sparse[c].items():
                vals[i] = v
            arrays[c] = pa.array(vals, type=OPS.field(c).type)
        b = pa.RecordBatch.from_arrays([arrays[c] for c in OPS.names], schema=OPS)
        keyed = pc.and_(pc.is_valid(arrays["mop"]), pc.is_valid(arrays["key"]))
        self.keys.update(pc.unique(pc.filter(arrays["key"], keyed)).to_pylist())
        self._reset()
        return b


def _int_or_none(x: Any) -> int | None:
    return x if type(x) is int else None


def _key(k: Any) -> str | None:
    if k is None:
        return None
    return k if type(k) is str else json.dumps(k)


def _is_mops(val: Any) -> bool:
    """Whether a send/poll/txn value is a list of Kafka micro-ops (else a keyed form)."""
    return type(val) is list and all(type(m) is list for m in val)


def _emit(cols: _Cols, inv: dict[str, Any], comp: dict[str, Any] | None) -> int:
    """Append the rows of one op (`comp` None: still open, `info`); returns how many (at least 1)."""
    f = inv["f"]
    pos = _emit_op(cols.ops, inv, comp)
    raw = None
    val = comp.get("value") if comp is not None else None
    ival = inv.get("value")
    if f in QUEUE_FS and (_is_mops(val) or (val is None and _is_mops(ival))):
        n = _emit_mops(cols, ival if val is None else val, comp)
    elif f in KEYSET_FS and type(val if val is not None else ival) is list:
        n = _emit_keys(cols.rows, f, val if val is not None else ival)
    else:
        raw = json.dumps({"invoke": ival, "value": val}, default=str)
        n = _emit_keyed(cols.rows, f, val, ival)
    if n == 0:
        _row(cols.rows, 0, None, None, None, None)
        n = 1
    cols.ops["raw"].append(raw)
    cols.op_pos.extend([pos] * n)
    cols.n += n
    return n


def _emit_op(ops: dict[str, list[Any]], inv: dict[str, Any], comp: dict[str, Any] | None) -> int:
    """Append the op-level columns of one op but `raw`; returns the op's position."""
    pos = len(ops["index"])
    ops["process"].append(inv["process"])
    ops["f"].append(inv["f"])
    ops["index"].append(inv["index"])
    ops["time"].append(inv["time"])
    if comp is not None:
        ops["type"].append(comp["type"])
        ops["ret_index"].append(comp["index"])
        ops["ret_time"].append(comp["time"])
        err = comp.get("error")
        if err is not None and type(err) is not str:
            err = json.dumps(err, default=str)
        ops["error"].append(err)
    else:
        ops["type"].append("info")
        ops["ret_index"].append(None)
        ops["ret_time"].append(None)
        ops["error"].append(None)
    return pos


def _row(rows: dict[str, list[Any]], mop_index: int, mop: str | None, key: str | None, offset: int | None,
         value: int | None) -> None:
    """Append one row's row-level cells."""
    rows["mop_index"].append(mop_index)
    rows["mop"].append(mop)
    rows["key"].append(key)
    rows["offset"].append(offset)
    rows["value"].append(value)


def _value_id(cols: _Cols, v: Any, row: int) -> int | None:
    """The `value` cell of a value that is not an int: a string's id (the string goes to
    `value_str` of row `row`), else null."""
    if type(v) is str:
        cols.sparse["value_str"][row] = v
        return string_value_id(v)
    return None


def _emit_mops(cols: _Cols, mops: list[Any], comp: dict[str, Any] | None) -> int:
    """Rows of a list of Kafka micro-ops: one per send, one per record polled; returns how many."""
    rebalanced = None
    if comp is not None and ("rebalance-log" in comp or "rebalance_log" in comp):
        rebalanced = _rebalanced_keys(comp.get("rebalance-log", comp.get("rebalance_log")))
    base = cols.n
    n = 0
    for m in mops:
        if not m:
            continue
        if m[0] == "send" and len(m) >= 3:
            v = m[2]
            off = None
            if type(v) is list and len(v) == 2:
                off = v[0] if type(v[0]) is int else None
                v = v[1]
            _row(cols.rows, n, "send", _key(m[1]), off, v if type(v) is int else _value_id(cols, v, base + n))
            n += 1
        elif m[0] == "poll" and len(m) >= 2 and type(m[1]) is dict:
            n = _emit_polled(cols, m[1], n, rebalanced)
    return n


def _emit_polled(cols: _Cols, reads: dict[Any, Any], n: int, rebalanced: set[str] | None) -> int:
    """Rows of the records of one poll micro-op, from row `n` of its op; returns the next row."""
    rows = cols.rows
    r_mi, r_mop, r_key, r_off, r_val = (rows["mop_index"].append, rows["mop"].append, rows["key"].append,
                                        rows["offset"].append, rows["value"].append)
    base = cols.n
    for k, msgs in reads.items():
        if type(msgs) is not list:
            continue
        ks = k if type(k) is str else _key(k)
        reb = rebalanced is not None and ks in rebalanced
        for pair in msgs:
            if type(pair) is list and len(pair) == 2:
                o, v = pair
                r_mi(n)
                r_mop("poll")
                r_key(ks)
                r_off(o if type(o) is int else None)
                r_val(v if type(v) is int else _value_id(cols, v, base + n))
                if reb:
                    cols.sparse["rebalanced"][base + n] = True
                n += 1
    return n


def _emit_keys(rows: dict[str, list[Any]], f: str, keys: list[Any]) -> int:
    """Rows of an assign/subscribe op: one per key; returns how many."""
    for n, k in enumerate(keys):
        _row(rows, n, f, _key(k), None, None)
    return len(keys)


def _emit_keyed(rows: dict[str, list[Any]], f: str, val: Any, ival: Any) -> int:
    """The row of an op of a keyed form ([key, v], [key, [offset, v]], [key, offset]) with its
    key, offset and value pulled out; returns 1, or 0 for any other value."""
    keyed = val if type(val) is list and len(val) == 2 else ival
    if not (type(keyed) is list and len(keyed) == 2 and type(keyed[0]) in (str, int)):
        return 0
    x = keyed[1]
    off = v = None
    if type(x) is list and len(x) == 2:
        off, v = _int_or_none(x[0]), _int_or_none(x[1])
    elif f == "read" and type(x) is int:
        off = x
    elif type(x) is int:
        v = x
    _row(rows, 0, None, _key(keyed[0]), off, v)
    return 1


def _rebalanced_keys(log: Any) -> set[str]:
    out: set[str] = set()
    if type(log) is list:
        for entry in log:
            if type(entry) is dict and type(entry.get("keys")) is list:
                out.update(_key(k) or "" for k in entry["keys"])
    return out


def read_history(path: str, run_id: str, stats: HistoryStats, batch_rows: int = BATCH_ROWS,
                 times_of: set[int] | None = None) -> Iterator[pa.RecordBatch]:
    """Stream the `ops` rows of a history file as record batches, filling `stats` as it goes.

    `times_of`: event indices whose times to record in `stats.times`.
    """
    cols = _Cols(run_id, stats.keys)
    pairing = Pairing(path, same_line)  # positions are file lines
    nemesis: list[dict[str, Any]] = []
    try:
        stats.bytes = os.path.getsize(path)
        f = open(path, "rb")  # noqa: SIM115 - closed in finally
    except OSError as e:
        stats.damage = f"history.jsonl: cannot read ({e.strerror})"
        return
    try:
        lineno = 0
        pos = 0
        events = 0
        ops_n = 0
        op_rows = 0
        first_t = last_t = None
        lines = iter(f)
        for raw in lines:
            lineno += 1
            try:
                try:
                    ev = loads(raw)
                except ValueError as e:
                    if not raw.strip():
                        continue
                    raise InputError(f"malformed JSON ({str(e).splitlines()[0][:60]})") from None
                if type(ev) is not dict:
                    raise InputError("not a JSON object")
                p = ev.get("process")
                # Fast path for well-formed events; anything else gets the canonical check.
                if not (type(ev.get("index")) is int and type(ev.get("time")) is int
                        and ev.get("type") in TYPES and type(ev.get("f")) is str
                        and (type(p) is int or p == NEMESIS)):
                    validate_event(ev, pos=pos)
                if p == NEMESIS:
                    nemesis.append(ev)
                    stats.nemesis_events += 1
                elif ev["type"] == "invoke":
                    pairing.invoke(ev, lineno)
                else:
                    op_rows += _emit(cols, pairing.complete(ev, lineno)[0], ev)
                    ops_n += 1
            except InputError as e:
                rest = sum(1 for _ in lines)
                torn = rest == 0 and not raw.endswith(b"\n")
                what = "torn last line" if torn else "damaged line"
                stats.damage = f"history.jsonl:{lineno}: {what}: {e.message}; ingested up to line {lineno - 1}"
                stats.dropped_lines = 1 + rest
                break
            pos += 1
            events += 1
            last_t = ev["time"]
            if times_of and ev["index"] in times_of:
                stats.times[ev["index"]] = last_t
            if first_t is None:
                first_t = last_t
            if cols.n >= batch_rows:
                yield cols.batch()
        stats.events, stats.ops, stats.op_rows = events, ops_n, op_rows
        stats.first_time, stats.last_time = first_t, last_t
        stats.lines = lineno
    finally:
        f.close()
    for inv, _line in pairing.never_completed():
        stats.op_rows += _emit(cols, inv, None)
        stats.ops += 1
    if cols.n:
        yield cols.batch()
    stats.faults.extend(fault_rows(run_id, nemesis))


def fault_rows(run_id: str, nemesis: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The `faults` table's rows of one run: its fault windows (`contracts.history.fault_windows`)."""
    return [{"run_id": run_id, "kind": w.kind, "f_start": w.start_event.get("f"),
             "f_stop": w.stop_event.get("f") if w.stop_event else None, "start": int(w.start),
             "stop": int(w.stop) if w.stop is not None else None, "start_index": w.start_event.get("index"),
             "stop_index": w.stop_event.get("index") if w.stop_event else None,
             "value": json.dumps(w.start_event.get("value"), default=str)}
            for w in fault_windows(nemesis)]


# ------------------------------------------------------------------ runs rows


def _coerce(value: Any, typ: pa.DataType) -> Any:
    """An option value in its column's type, or None when it does not fit."""
    if value is None:
        return None
    try:
        if pa.types.is_list(typ):
            if isinstance(value, str):
                return [s for s in (x.strip() for x in value.split(",")) if s]
            if isinstance(value, list | tuple):
                return [str(x) for x in value]
            return [str(value)]
        if pa.types.is_integer(typ):
            if isinstance(value, list | tuple):
                return len(value)
            if isinstance(value, bool):
                return None
            return int(value)
        if pa.types.is_floating(typ):
            return float(value)
        if pa.types.is_string(typ):
            return value if isinstance(value, str) else json.dumps(value)
    except (TypeError, ValueError):
        return None
    return None


def config_label(row: dict[str, Any]) -> str:
    """A configuration cell: nemesis x acks x min ISR x flush policy x safeguards."""
    nem = "+".join(sorted(row.get("nemesis") or [])) or "none"
    off = sorted(row.get("safeguards_off") or [])
    sg = "on" if not off else "off:" + ",".join(off)
    return (f"nemesis={nem} acks={row.get('acks')} min_isr={row.get('min_isr')} "
            f"flush={row.get('flush_policy')} safeguards={sg}")


def _iso_seconds(a: Any, b: Any) -> float | None:
    try:
        return (datetime.fromisoformat(b) - datetime.fromisoformat(a)).total_seconds()
    except (TypeError, ValueError):
        return None


def runs_row(run_id: str, path: str, test: Any, results: Any, stats: HistoryStats) -> dict[str, Any]:
    """The `runs` row of one run (test/results: parsed JSON, None if absent, `_error` if damaged)."""
    damage = [d for d in (stats.damage,) if d]
    if isinstance(test, dict) and "_error" in test:
        damage.append(test["_error"])
        test = None
    if isinstance(results, dict) and "_error" in results:
        damage.append(results["_error"])
        results = None
    test = test if isinstance(test, dict) else {}
    results = results if isinstance(results, dict) else None
    opts = test.get("options") if isinstance(test.get("options"), dict) else {}
    versions = test.get("versions") if isinstance(test.get("versions"), dict) else {}
    git = test.get("git") if isinstance(test.get("git"), dict) else {}
    camp = test.get("campaign") if isinstance(test.get("campaign"), dict) else None
    row: dict[str, Any] = {
        "run_id": run_id, "name": test.get("name") or run_id.split("/")[0], "path": path,
        "start": test.get("start"), "end": test.get("end"),
        "duration_s": _iso_seconds(test.get("start"), test.get("end")),
        "seed": _coerce(test.get("seed"), pa.int64()),
    }
    for k, t in OPTION_COLUMNS.items():
        row[k] = _coerce(opts.get(k), t)
    row["options_json"] = json.dumps(opts, sort_keys=True, default=str)
    row["config"] = config_label(row)
    row.update({
        "wrack_version": _coerce(versions.get("wrack"), pa.string()),
        "python_version": _coerce(versions.get("python"), pa.string()),
        "confluent_kafka_version": _coerce(versions.get("confluent_kafka"), pa.string()),
        "librdkafka_version": _coerce(versions.get("librdkafka"), pa.string()),
        "git_rev": _coerce(git.get("rev"), pa.string()),
        "git_dirty": git.get("dirty") if isinstance(git.get("dirty"), bool) else None,
        "campaign": _coerce(camp.get("name"), pa.string()) if camp else None,
        "campaign_cell": json.dumps(camp.get("cell"), sort_keys=True, default=str) if camp else None,
        "campaign_repeat": _coerce(camp.get("repeat"), pa.int32()) if camp else None,
        "campaign_expect": _coerce(camp.get("expect"), pa.string()) if camp else None,
        "campaign_run": _coerce(camp.get("run"), pa.string()) if camp else None,
        "campaign_retried": bool(camp.get("attempt")) if camp else None,
        "has_results": results is not None,
        "valid": verdict_str(results.get("valid")) if results is not None else None,
        "anomaly_types": [str(t) for t in results.get("anomaly_types") or []] if results else None,
        "anomaly_counts": _counts(results) if results else None,
        "allowed": [str(t) for t in results.get("allowed") or []] if results else None,
        "history_bytes": stats.bytes, "events": stats.events, "ops": stats.ops, "op_rows": stats.op_rows,
        "keys": sorted(stats.keys),
        "nemesis_events": stats.nemesis_events,
        "history_span_s": ((stats.last_time - stats.first_time) / 1e9
                           if stats.first_time is not None and stats.last_time is not None else None),
        "damaged": bool(damage), "damage": "; ".join(damage) or None, "dropped_lines": stats.dropped_lines,
        "ingested_at": datetime.now(UTC).isoformat(timespec="seconds"),
    })
    return row


def _counts(results: dict[str, Any]) -> dict[str, int]:
    counts = results.get("anomaly_counts")
    if isinstance(counts, dict):
        return {str(k): int(v) for k, v in counts.items() if isinstance(v, int) and not isinstance(v, bool)}
    anomalies = results.get("anomalies")
    if isinstance(anomalies, dict):
        return {str(k): len(v) if isinstance(v, list) else 1 for k, v in anomalies.items()}
    return {}


def result_anomaly_rows(run_id: str, results: Any, source: str = "results.json",
                        op_time: Callable[[int], int | None] | None = None) -> list[dict[str, Any]]:
    """`anomalies` rows from a checker result's `anomalies` map (examples as JSON)."""
    if not isinstance(results, dict) or not isinstance(results.get("anomalies"), dict):
        return []
    allowed = set(results.get("allowed") or [])
    out = []
    for typ, examples in results["anomalies"].items():
        for ex in examples if isinstance(examples, list) else [examples]:
            d = ex if isinstance(ex, dict) else {}
            idx = example_op_index(d)
            out.append({
                "run_id": run_id, "source": source, "type": str(typ), "allowed": typ in allowed,
                "key": _key(d.get("key")), "value": _int_or_none(d.get("value")), "op_index": idx,
                "time": witnessed_time(d, op_time) if op_time and idx is not None else _int_or_none(d.get("time")),
                "detail": json.dumps(ex, default=str),
            })
    return out


_OP_FIELDS = ("op", "index", "writer", "reader", "ops", "indices")


def _op_ref(v: Any) -> int | None:
    if isinstance(v, int) and not isinstance(v, bool):
        return v
    if isinstance(v, dict) and isinstance(v.get("index"), int):
        return v["index"]
    return None


def example_op_indices(ex: dict[str, Any]) -> list[int]:
    """The indices of every op an anomaly example names, in the order it names them."""
    out = []
    for k in _OP_FIELDS:
        v = ex.get(k)
        for x in v if isinstance(v, list) else [v]:
            if (i := _op_ref(x)) is not None:
                out.append(i)
    return out


def example_op_index(ex: dict[str, Any]) -> int | None:
    """The index of the op an anomaly example is about (first of the ops it names)."""
    ops = example_op_indices(ex)
    return ops[0] if ops else None


def witnessed_time(ex: dict[str, Any], op_time: Callable[[int], int | None]) -> int | None:
    """When the history witnessed an anomaly example: the time of the last of the ops it
    names (as the queue checker's `first_anomaly_time`); None if none has a time."""
    times = [t for i in example_op_indices(ex) if (t := op_time(i)) is not None]
    return max(times) if times else None
