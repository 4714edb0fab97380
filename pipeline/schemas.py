"""The pipeline's tables: explicit Arrow schemas (the one definition) and their Spark forms.

A pipeline directory holds one Parquet dataset per table (`DIR/<table>/*.parquet`):

- `runs`: one row per ingested run: every known test option as a typed column (the
  full option map stays in `options_json`), the harness's verdict and anomaly counts from
  results.json, durations, versions, the keys its Kafka micro-ops touch, and how the
  history was read (`damaged`, `damage`, `dropped_lines`). A run is ingested iff it has a row here (written last: the commit).
  A campaign's run carries its campaign, cell (options as JSON), repeat, the cell's `expect`,
  `campaign_run` (the campaign folder's timestamp: one execution of the campaign) and
  `campaign_retried` (a retry after its first attempt's executor was lost).
- `ops`: one row per micro-op of each client operation (an invoke paired with its
  completion): a send, one message a poll returned, one key of an assign/subscribe.
  Operations without micro-ops (crash, empty or failed polls, register ops) get one row
  with null `mop`. `index`/`time` are the invoke's, `ret_index`/`ret_time` the
  completion's (null when it never completed; then `type` is `info`); `op` =
  ret_index, else index, names the op as the checkers do. A string value is checked as
  `value` = a negative 62-bit hash and kept in `value_str`; `rebalanced` marks polled
  records of keys in the completion's rebalance-log. `raw` keeps the invoke and completion
  values as JSON for ops that are not Kafka queue micro-op lists (register and log
  workloads), whose key/offset/value are still pulled out of keyed forms.
- `faults`: one row per nemesis fault window (start event to stop event; `stop` null if
  never healed in the history).
- `anomalies`: one row per reported anomaly. `source` is `results.json` (the harness's
  checker, at ingest) or `pipeline` (`wrack pipeline check`). `detail` is the example
  object as JSON, in the single-process checker's form; `check_id` names the check that
  wrote a `pipeline` row (only the run's latest check counts).
- `verdicts`: one row per run checked by `wrack pipeline check`: the result object of
  docs/ARCHITECTURE.md (as JSON in `result`) and its main fields as columns. A re-check appends a
  new row; the latest `checked_at` per run is the verdict.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

TABLES = ("runs", "ops", "faults", "anomalies", "verdicts")

# Options that RUN_LAYOUT names, with their column types. Anything else stays in options_json.
OPTION_COLUMNS: dict[str, pa.DataType] = {
    "backend": pa.string(),
    "nodes": pa.int32(),
    "workload": pa.string(),
    "nemesis": pa.list_(pa.string()),
    "nemesis_interval": pa.float64(),
    "acks": pa.string(),
    "rf": pa.int32(),
    "min_isr": pa.int32(),
    "partitions": pa.int32(),
    "flush_policy": pa.string(),
    "safeguards_off": pa.list_(pa.string()),
    "time_limit": pa.float64(),
    "rate": pa.float64(),
    "concurrency": pa.int32(),
}

RUNS = pa.schema([
    pa.field("run_id", pa.string(), nullable=False),
    pa.field("name", pa.string()),
    pa.field("path", pa.string()),
    pa.field("start", pa.string()),
    pa.field("end", pa.string()),
    pa.field("duration_s", pa.float64()),
    pa.field("seed", pa.int64()),
    *[pa.field(k, t) for k, t in OPTION_COLUMNS.items()],
    pa.field("options_json", pa.string()),
    pa.field("config", pa.string()),
    pa.field("wrack_version", pa.string()),
    pa.field("python_version", pa.string()),
    pa.field("confluent_kafka_version", pa.string()),
    pa.field("librdkafka_version", pa.string()),
    pa.field("git_rev", pa.string()),
    pa.field("git_dirty", pa.bool_()),
    pa.field("campaign", pa.string()),
    pa.field("campaign_cell", pa.string()),
    pa.field("campaign_repeat", pa.int32()),
    pa.field("campaign_expect", pa.string()),
    pa.field("campaign_run", pa.string()),
    pa.field("campaign_retried", pa.bool_()),
    pa.field("has_results", pa.bool_()),
    pa.field("valid", pa.string()),
    pa.field("anomaly_types", pa.list_(pa.string())),
    pa.field("anomaly_counts", pa.map_(pa.string(), pa.int64())),
    pa.field("allowed", pa.list_(pa.string())),
    pa.field("history_bytes", pa.int64()),
    pa.field("events", pa.int64()),
    pa.field("ops", pa.int64()),
    pa.field("op_rows", pa.int64()),
    pa.field("keys", pa.list_(pa.string())),
    pa.field("nemesis_events", pa.int64()),
    pa.field("history_span_s", pa.float64()),
    pa.field("damaged", pa.bool_()),
    pa.field("damage", pa.string()),
    pa.field("dropped_lines", pa.int64()),
    pa.field("ingested_at", pa.string()),
])

OPS = pa.schema([
    pa.field("run_id", pa.string(), nullable=False),
    pa.field("process", pa.int64(), nullable=False),
    pa.field("f", pa.string(), nullable=False),
    pa.field("type", pa.string(), nullable=False),
    pa.field("index", pa.int64(), nullable=False),
    pa.field("time", pa.int64(), nullable=False),
    pa.field("ret_index", pa.int64()),
    pa.field("ret_time", pa.int64()),
    pa.field("mop_index", pa.int32(), nullable=False),
    pa.field("mop", pa.string()),
    pa.field("key", pa.string()),
    pa.field("offset", pa.int64()),
    pa.field("value", pa.int64()),
    pa.field("value_str", pa.string()),
    pa.field("rebalanced", pa.bool_()),
    pa.field("error", pa.string()),
    pa.field("raw", pa.string()),
])

FAULTS = pa.schema([
    pa.field("run_id", pa.string(), nullable=False),
    pa.field("kind", pa.string(), nullable=False),
    pa.field("f_start", pa.string()),
    pa.field("f_stop", pa.string()),
    pa.field("start", pa.int64(), nullable=False),
    pa.field("stop", pa.int64()),
    pa.field("start_index", pa.int64()),
    pa.field("stop_index", pa.int64()),
    pa.field("value", pa.string()),
])

ANOMALIES = pa.schema([
    pa.field("run_id", pa.string(), nullable=False),
    pa.field("source", pa.string(), nullable=False),
    pa.field("type", pa.string(), nullable=False),
    pa.field("allowed", pa.bool_()),
    pa.field("key", pa.string()),
    pa.field("value", pa.int64()),
    pa.field("op_index", pa.int64()),
    pa.field("time", pa.int64()),
    pa.field("detail", pa.string()),
    pa.field("check_id", pa.string()),
])

VERDICTS = pa.schema([
    pa.field("run_id", pa.string(), nullable=False),
    pa.field("source", pa.string(), nullable=False),
    pa.field("valid", pa.string(), nullable=False),
    pa.field("anomaly_types", pa.list_(pa.string())),
    pa.field("anomaly_counts", pa.map_(pa.string(), pa.int64())),
    pa.field("allowed", pa.list_(pa.string())),
    pa.field("result", pa.string()),
    pa.field("checked_at", pa.string()),
    pa.field("check_id", pa.string(), nullable=False),
])

ARROW: dict[str, pa.Schema] = {"runs": RUNS, "ops": OPS, "faults": FAULTS, "anomalies": ANOMALIES,
                               "verdicts": VERDICTS}


def spark_schema(table: str) -> Any:
    """The Spark StructType of `table` (derived from its Arrow schema)."""
    # lazy: pyspark.sql takes ~0.12 s; the Arrow-only users of this module (ingest, store) do without
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(ARROW[table])


def empty(table: str) -> pa.Table:
    """An empty Arrow table of `table`'s schema."""
    return ARROW[table].empty_table()


def verdict_str(valid: Any) -> str | None:
    """docs/ARCHITECTURE.md's `valid` (true, false, "unknown") as the string stored in tables."""
    if valid is True:
        return "true"
    if valid is False:
        return "false"
    if valid is None:
        return None
    return "unknown"
