"""`wrack pipeline ingest`: run folders into the pipeline's Parquet tables, incrementally.

The run folders found under the given paths that are not in `runs` yet are ingested by
one Spark job: a DataFrame of (run id, folder) rows, one partition per run (largest
histories first), `mapInArrow` over it. Each task streams its history into the run's
`ops` file (written by the task, renamed into place) and returns the run's `runs` row,
fault windows and results.json anomalies as JSON; the driver writes those small tables,
`runs` last. A run is ingested iff it has a `runs` row, so an interrupted ingest is
simply resumed by the next one (a half-written `ops` file is overwritten).

Executors must see the run folders and DIR at the same paths (one machine, or a shared
filesystem), as for any file-based Spark job.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from contracts.errors import InputError
from pipeline import store
from pipeline.extract import HistoryStats, example_op_indices, read_history, result_anomaly_rows, runs_row
from pipeline.runfolders import find_runs, read_json
from pipeline.schemas import OPS
from pipeline.tasks import one_each

RESULT_SCHEMA = "run_id string, run string, faults string, anomalies string, seconds double"


@dataclass
class IngestSummary:
    """What an ingest did."""

    found: int = 0
    skipped: int = 0
    ingested: int = 0
    ops: int = 0
    op_rows: int = 0
    damaged: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0
    task_seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {"found": self.found, "skipped": self.skipped, "ingested": self.ingested, "ops": self.ops,
                "op_rows": self.op_rows, "damaged": self.damaged, "seconds": round(self.seconds, 3),
                "task_seconds": round(self.task_seconds, 3)}


def ingest_run(run_id: str, path: str, ops_path: str) -> dict[str, Any]:
    """Ingest one run folder: writes its ops file, returns its runs/faults/anomalies rows."""
    t0 = time.perf_counter()
    test = read_json(os.path.join(path, "test.json"))
    results = read_json(os.path.join(path, "results.json"))
    want: set[int] = set()
    if isinstance(results, dict) and isinstance(results.get("anomalies"), dict):
        for exs in results["anomalies"].values():
            for ex in exs if isinstance(exs, list) else [exs]:
                if isinstance(ex, dict):
                    want.update(example_op_indices(ex))
    stats = HistoryStats()
    hist = os.path.join(path, "history.jsonl")
    tmp = os.path.join(os.path.dirname(ops_path), "." + os.path.basename(ops_path) + ".tmp")
    if os.path.exists(hist):
        writer = None
        try:
            for batch in read_history(hist, run_id, stats, times_of=want):
                if writer is None:
                    writer = pq.ParquetWriter(tmp, OPS, compression="snappy")
                writer.write_batch(batch)
        finally:
            if writer is not None:
                writer.close()
        if writer is not None:
            os.replace(tmp, ops_path)
    else:
        stats.damage = "history.jsonl: missing"
    row = runs_row(run_id, path, test, results, stats)
    anomalies = result_anomaly_rows(run_id, results, op_time=stats.times.get)
    return {"run": row, "faults": stats.faults, "anomalies": anomalies, "seconds": time.perf_counter() - t0}


def _ingest_batches(ops_dir_out: str, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """mapInArrow body: (run_id, path) rows in, one result row per run out."""
    for b in batches:
        for rid, path in zip(b.column("run_id").to_pylist(), b.column("path").to_pylist(), strict=True):
            r = ingest_run(rid, path, store.ops_file(ops_dir_out, rid))
            yield pa.RecordBatch.from_pylist([{
                "run_id": rid, "run": json.dumps(r["run"], default=str), "faults": json.dumps(r["faults"]),
                "anomalies": json.dumps(r["anomalies"]), "seconds": r["seconds"]}])


def ingest(spark: Any, paths: list[str], out: str) -> IngestSummary:
    """Ingest every not-yet-ingested run folder under `paths` into the pipeline directory `out`."""
    t0 = time.perf_counter()
    runs = find_runs(paths)
    if not runs:
        raise InputError("no run folders found (a run folder holds test.json or history.jsonl)", paths[0])
    out = store.prepare(out, create=True)
    done = store.ingested_run_ids(out)
    todo = [r for r in runs if r.run_id not in done]
    summary = IngestSummary(found=len(runs), skipped=len(runs) - len(todo))
    if todo:
        todo.sort(key=lambda r: -_size(os.path.join(r.path, "history.jsonl")))
        df = one_each(spark, [(r.run_id, r.path) for r in todo], "run_id string, path string")
        body = partial(_ingest_batches, out)
        results = df.mapInArrow(body, RESULT_SCHEMA).collect()
        rows = [json.loads(r["run"]) for r in results]
        faults = [f for r in results for f in json.loads(r["faults"])]
        anomalies = [a for r in results for a in json.loads(r["anomalies"])]
        store.write_table(out, "faults", faults)
        store.write_table(out, "anomalies", anomalies)
        store.write_table(out, "runs", rows)  # the commit: these runs are now ingested
        summary.ingested = len(rows)
        summary.ops = sum(r["ops"] for r in rows)
        summary.op_rows = sum(r["op_rows"] for r in rows)
        summary.damaged = [{"run_id": r["run_id"], "damage": r["damage"], "dropped_lines": r["dropped_lines"]}
                           for r in rows if r["damaged"]]
        summary.task_seconds = sum(r["seconds"] for r in results)
    summary.seconds = time.perf_counter() - t0
    return summary


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0
