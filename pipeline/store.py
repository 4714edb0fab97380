"""The pipeline directory: one flat Parquet dataset per table, read and written safely.

`DIR/<table>/*.parquet` (schemas in pipeline.schemas). Files are written under a
dot-name and renamed into place, so readers (Spark ignores `.`/`_` names) never see a
half-written file. Small tables are written by the driver with pyarrow; `ops` files are
written by the ingest tasks, one per run (`run-<hash of run id>.parquet`), and
`anomalies` rows of a check by Spark itself. `report/` holds the analytics output.
"""

from __future__ import annotations

import hashlib
import os
import uuid
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from contracts.errors import InputError
from pipeline.schemas import ARROW, TABLES, spark_schema


def table_dir(out: str, table: str) -> str:
    return os.path.join(out, table)


def prepare(out: str, *, create: bool) -> str:
    """Check (and with `create`, make) a pipeline directory; returns its absolute path."""
    out = os.path.abspath(out)
    if os.path.exists(out) and not os.path.isdir(out):
        raise InputError("not a directory", out)
    if not create:
        if not os.path.isdir(table_dir(out, "runs")):
            raise InputError("not a pipeline directory (no runs/ table; run `wrack pipeline ingest` first)", out)
        return out
    if os.path.isdir(out) and os.listdir(out) and not os.path.isdir(table_dir(out, "runs")):
        raise InputError("exists and is not a pipeline directory (no runs/ table)", out)
    for t in TABLES:
        os.makedirs(table_dir(out, t), exist_ok=True)
    return out


def parquet_files(out: str, table: str) -> list[str]:
    d = table_dir(out, table)
    try:
        names = sorted(os.listdir(d))
    except FileNotFoundError:
        return []
    return [os.path.join(d, n) for n in names if n.endswith(".parquet") and not n.startswith((".", "_"))]


def ops_file(out: str, run_id: str) -> str:
    h = hashlib.sha1(run_id.encode()).hexdigest()[:20]
    return os.path.join(table_dir(out, "ops"), f"run-{h}.parquet")


def write_table(out: str, table: str, data: pa.Table | list[dict[str, Any]], name: str | None = None) -> str | None:
    """Write rows (or an Arrow table) of `table` as one new Parquet file; None when empty."""
    schema = ARROW[table]
    t = data if isinstance(data, pa.Table) else pa.Table.from_pylist(data, schema=schema)
    if t.num_rows == 0:
        return None
    t = t.select(schema.names).cast(schema)
    name = name or f"part-{uuid.uuid4().hex}.parquet"
    path = os.path.join(table_dir(out, table), name)
    tmp = os.path.join(table_dir(out, table), f".tmp-{name}")
    pq.write_table(t, tmp)
    os.replace(tmp, path)
    return path


def read_table(out: str, table: str, columns: list[str] | None = None) -> pa.Table:
    """A small table read whole on the driver (runs, faults, verdicts): never `ops`."""
    files = parquet_files(out, table)
    schema = ARROW[table]
    if not files:
        t = schema.empty_table()
        return t.select(columns) if columns else t
    parts = [pq.read_table(f, columns=columns, schema=schema) for f in files]
    return pa.concat_tables(parts)


def ingested_run_ids(out: str) -> set[str]:
    return set(read_table(out, "runs", ["run_id"]).column("run_id").to_pylist())


def spark_read(spark: Any, out: str, table: str) -> Any:
    """`table` as a Spark DataFrame with its explicit schema (empty if no file yet)."""
    files = parquet_files(out, table)
    schema = spark_schema(table)
    if not files:
        return spark.createDataFrame([], schema)
    return spark.read.schema(schema).parquet(table_dir(out, table))
