"""The check of one run inside one Spark task: its queue anomalies and statistics, from its `ops` file.

Runs are independent and ingest wrote each run's micro-op rows to a file of its own
(`store.ops_file`), so `check_all` maps one task over each run (`pipeline.tasks.one_each`,
biggest first): the task reads that file with pyarrow, and the whole run stays in the
task. No row is shuffled and Spark compiles no code for it: a run is numpy columns
(`pipeline.queue_checks`). The driver gets back, per run, a small JSON object
(`check_run`'s): the anomaly rows, counts and examples per type, the string values the
examples name, and the statistics.

Statistics are `checkers.stats.summarize`'s over the run's op table (one row per op:
the rows at micro-op position 0) and its fault windows (the `faults` table).
"""

from __future__ import annotations

import json
import os
import time
from collections import defaultdict
from collections.abc import Iterator
from functools import partial
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from checkers.optable import OpTable
from checkers.stats import summarize
from contracts.history import FaultWindow
from pipeline import store
from pipeline.queue_checks import queue_anomalies
from pipeline.queue_frame import COLUMNS, Anomaly, Micro, micro_ops
from pipeline.tasks import one_each

RESULT_SCHEMA = "run_id string, result string"
UNSEEN_VALUES_SHOWN = 32  # checkers.queue.analysis.VALUES_SHOWN


def run_stats(table: pa.Table, windows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """checkers.stats.summarize's dict for one run's ops rows and fault windows (None: no op)."""
    cols = ["process", "f", "type", "index", "time", "ret_index", "ret_time"]
    ops = table.select(cols).filter(pc.equal(table["mop_index"], 0))
    if not ops.num_rows:
        return None
    tab = OpTable()
    f_enc = pc.dictionary_encode(ops["f"]).combine_chunks()
    for name in f_enc.dictionary.to_pylist():
        tab.f_code(name)
    types = {"ok": 0, "info": 1, "fail": 2}
    t_enc = pc.dictionary_encode(ops["type"]).combine_chunks()
    tcode = np.array([types.get(n, 1) for n in t_enc.dictionary.to_pylist()], np.float64)
    cols = [ops["process"].to_numpy().astype(np.float64), f_enc.indices.to_numpy().astype(np.float64),
            tcode[t_enc.indices.to_numpy()], ops["time"].to_numpy().astype(np.float64),
            pc.cast(ops["ret_time"], pa.float64()).to_numpy(zero_copy_only=False),
            pc.coalesce(ops["ret_index"], ops["index"]).to_numpy().astype(np.float64)]
    tab.data.frombytes(np.ascontiguousarray(np.column_stack(cols)).tobytes())
    wins = [FaultWindow(w["kind"], w["start"], w["stop"], {}) for w in sorted(windows, key=lambda w: w["start"])]
    return summarize(tab, wins)


def named_rows(m: Micro, found: list[Anomaly]) -> list[dict[str, Any]]:
    """Anomaly rows in the `anomalies` table's form (without run, source, policy and check id):
    the key by name, also first in the example; the completion time of `op_index`."""
    ops, first = np.unique(m.op, return_index=True)
    times = m.ret_time[first]
    out = []
    for a in found:
        i = int(np.searchsorted(ops, a.op_index))
        t = int(times[i]) if i < len(ops) and ops[i] == a.op_index else None
        key = m.keys[a.rk]
        out.append({"type": a.type, "key": key, "value": a.value, "op_index": a.op_index, "time": t,
                    "detail": json.dumps({"key": key, **a.detail}, separators=(",", ":"))})
    return out


def collect(rows: list[dict[str, Any]], max_examples: int
            ) -> tuple[dict[str, int], dict[str, list[dict[str, Any]]]]:
    """Counts per type, and the first `max_examples` examples per type (by op, key, value);
    unseen sends grouped per key as the checker reports them (the first keys)."""
    counts: dict[str, int] = defaultdict(int)
    by_type: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        counts[r["type"]] += 1
        by_type[r["type"]].append(r)
    examples: dict[str, list[dict[str, Any]]] = {}
    for t, rs in by_type.items():
        if t == "unseen":
            examples[t] = _unseen(rs)[:max_examples]
            continue
        rs.sort(key=lambda r: (r["op_index"], r["key"], r["value"] is not None, r["value"] or 0, r["detail"]))
        examples[t] = [json.loads(r["detail"]) for r in rs[:max_examples]]
    return dict(counts), examples


def _unseen(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    per_key: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        per_key[r["key"]].append(r)
    out = []
    for key in sorted(per_key):
        rs = sorted(per_key[key], key=lambda r: (r["op_index"], r["value"]))
        shown = rs[:UNSEEN_VALUES_SHOWN]
        mr = json.loads(rs[0]["detail"]).get("_max_read_offset")
        out.append({"ops": [r["op_index"] for r in shown], "key": key, "count": len(rs),
                    "values": [r["value"] for r in shown], "_max_read_offset": mr})
    return out


def _strings(table: pa.Table, examples: dict[str, list[dict[str, Any]]]) -> dict[str, str]:
    """String value id -> the string, for the ids the examples may name (all string values of the run)."""
    if not examples:
        return {}
    t = table.filter(pc.is_valid(table["value_str"])).select(["value", "value_str"])
    return {str(v): s for v, s in zip(t["value"].to_pylist(), t["value_str"].to_pylist(), strict=True)}


def check_run(ops_path: str, queue: bool, windows: list[dict[str, Any]], max_examples: int) -> dict[str, Any]:
    """The check of one run (see the module docstring): JSON-ready."""
    t0 = time.perf_counter()
    res: dict[str, Any] = {"stats": None, "anomalies": [], "counts": {}, "examples": {}, "strings": {}}
    if os.path.exists(ops_path):
        table = pq.read_table(ops_path, columns=[*COLUMNS, "value_str"])
        res["stats"] = run_stats(table, windows)
        if queue:
            m = micro_ops(table)
            res["anomalies"] = named_rows(m, queue_anomalies(m))
            res["counts"], res["examples"] = collect(res["anomalies"], max_examples)
            res["strings"] = _strings(table, res["examples"])
    res["seconds"] = round(time.perf_counter() - t0, 4)
    return res


def _check_batches(max_examples: int, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """mapInArrow body: (run_id, ops_path, queue, windows) rows in, one result row per run out."""
    for b in batches:
        for r in b.to_pylist():
            res = check_run(r["ops_path"], r["queue"], json.loads(r["windows"]), max_examples)
            yield pa.RecordBatch.from_pylist([{"run_id": r["run_id"], "result": json.dumps(res)}])


def check_all(spark: Any, out: str, runs: dict[str, dict[str, Any]], todo: list[str], queue: set[str],
              max_examples: int) -> dict[str, dict[str, Any]]:
    """run id -> `check_run`'s result, for the runs `todo` (one Spark task each; `queue`: the
    runs whose queue anomalies are wanted, the others get their statistics only)."""
    windows: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for w in store.read_table(out, "faults", ["run_id", "kind", "start", "stop"]).to_pylist():
        windows[w["run_id"]].append({"kind": w["kind"], "start": w["start"], "stop": w["stop"]})
    order = sorted(todo, key=lambda r: -int(runs[r].get("op_rows") or 0))
    df = one_each(spark, [(r, store.ops_file(out, r), r in queue, json.dumps(windows.get(r, [])))
                          for r in order], "run_id string, ops_path string, queue boolean, windows string")
    got = df.mapInArrow(partial(_check_batches, max_examples), RESULT_SCHEMA).collect()
    return {r["run_id"]: json.loads(r["result"]) for r in got}
