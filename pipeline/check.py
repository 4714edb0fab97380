"""`wrack pipeline check`: the checkers as distributed Spark jobs over the ingested runs.

Runs without a verdict yet (all with `recheck`, or the named ones) are checked: queue
workloads by `pipeline.queue_checks` (DataFrame joins and windows, one shuffle), `log`
workloads by `pipeline.lin_checks` (per-key linearizability via applyInPandas), every
run's statistics by `pipeline.stats`. Anomaly rows go to the `anomalies` table (source
`pipeline`, this check's `check_id`), each run's result object, in the single-process
checker's form, to `verdicts`. The summary holds the latest verdict of every ingested run.
"""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from contracts.errors import InputError
from pipeline import lin_checks, queue_checks, results, stats, store
from pipeline.schemas import spark_schema, verdict_str

QUEUE_FS = ("send", "poll", "txn")
ROWS_PER_PARTITION = 1_000_000
# Below this many micro-op rows, compiling generated code costs more than it saves.
INTERPRETED_BELOW = 200_000
INTERPRETED = {"spark.sql.codegen.wholeStage": "false", "spark.sql.codegen.factoryMode": "NO_CODEGEN"}
UNSEEN_VALUES_SHOWN = 32  # checkers.queue.analysis.VALUES_SHOWN


@dataclass
class CheckSummary:
    """What a check did, and the latest verdict of every ingested run."""

    checked: list[str] = field(default_factory=list)
    results: dict[str, dict[str, Any]] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    rows: int = 0
    partitions: int = 0
    seconds: float = 0.0
    check_id: str | None = None

    def verdicts(self) -> dict[str, Any]:
        return {rid: r.get("valid") for rid, r in self.results.items()}


def latest_verdicts(out: str) -> dict[str, dict[str, Any]]:
    """run id -> its latest `verdicts` row."""
    best: dict[str, dict[str, Any]] = {}
    for row in store.read_table(out, "verdicts").to_pylist():
        cur = best.get(row["run_id"])
        if cur is None or (row["checked_at"], row["check_id"]) > (cur["checked_at"], cur["check_id"]):
            best[row["run_id"]] = row
    return best


@contextlib.contextmanager
def _sql_conf(spark: Any, conf: dict[str, str]) -> Iterator[None]:
    """Set runtime SQL settings for the `with` block (restored after; ignored where refused)."""
    old: dict[str, str | None] = {}
    for k, v in conf.items():
        try:
            old[k] = spark.conf.get(k, None)
            spark.conf.set(k, v)
        except Exception:  # noqa: BLE001 - e.g. a Connect server that forbids the key: keep its default
            continue
    try:
        yield
    finally:
        for k, v in old.items():
            with contextlib.suppress(Exception):
                if v is None:
                    spark.conf.unset(k)
                else:
                    spark.conf.set(k, v)


def _only(df: DataFrame, ids: list[str], everything: bool) -> DataFrame:
    return df if everything else df.where(F.col("run_id").isin(ids))


def check(spark: Any, out: str, *, run_ids: Iterable[str] | None = None, recheck: bool = False,
          allow: Iterable[str] = (), max_examples: int = 32, time_limit: float | None = None,
          say: Callable[[str], None] | None = None) -> CheckSummary:
    """Check the runs of pipeline directory `out` (see the module docstring)."""
    t_start = time.perf_counter()
    say = say or (lambda _msg: None)
    out = store.prepare(out, create=False)
    runs = {r["run_id"]: r for r in store.read_table(out, "runs").to_pylist()}
    if not runs:
        raise InputError("no ingested runs (run `wrack pipeline ingest` first)", out)
    done = latest_verdicts(out)
    if run_ids is not None:
        wanted = list(dict.fromkeys(run_ids))
        unknown = [r for r in wanted if r not in runs]
        if unknown:
            raise InputError(f"not an ingested run: {unknown[0]}", out)
        todo = wanted
    else:
        todo = sorted(runs) if recheck else sorted(r for r in runs if r not in done)
    summary = CheckSummary()
    if todo:
        small = sum(int(runs[r].get("op_rows") or 0) for r in todo) < INTERPRETED_BELOW
        with _sql_conf(spark, INTERPRETED if small else {}):
            summary = _check_runs(spark, out, runs, todo, list(allow), max_examples, time_limit, say)
    for rid in sorted(runs):
        if rid not in summary.results and rid in done:
            summary.results[rid] = json.loads(done[rid]["result"])
    summary.seconds = time.perf_counter() - t_start
    return summary


def _check_runs(spark: Any, out: str, runs: dict[str, dict[str, Any]], todo: list[str], allow: list[str],
                max_examples: int, time_limit: float | None, say: Callable[[str], None]) -> CheckSummary:
    s = CheckSummary(checked=list(todo))
    cid = datetime.now(UTC).strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:8]
    s.check_id = cid
    everything = len(todo) == len(runs)
    # The one big shuffle: about a million micro-op rows per partition, within the session's bounds.
    rows = sum(int(runs[r].get("op_rows") or 0) for r in todo)
    partitions = max(2, min(int(spark.conf.get("spark.sql.shuffle.partitions")), -(-rows // ROWS_PER_PARTITION)))
    policies = {rid: results.policy_for(runs[rid], allow) for rid in todo}
    allowed = {rid: policies[rid].allowed for rid in todo}
    lin_ids = [r for r in todo if (runs[r].get("workload") or "queue") in lin_checks.MODELS]
    queue_ids = [r for r in todo if r not in set(lin_ids)]
    ops = _only(store.spark_read(spark, out, "ops"), todo, everything)

    def timed(name: str, fn: Callable[[], Any]) -> Any:
        say(f"{name} ...")
        t0 = time.perf_counter()
        try:
            return fn()
        finally:
            s.timings[name] = round(time.perf_counter() - t0, 3)

    allowed_df = spark.createDataFrame([(rid, allowed[rid]) for rid in todo], "run_id string, allowed array<string>")
    keep: list[DataFrame] = []
    strings: dict[str, dict[int, str]] = defaultdict(dict)  # run -> string value id -> the string
    if queue_ids:
        qops = _only(ops, queue_ids, not lin_ids and everything)
        run_keys = {r: runs[r].get("keys") for r in queue_ids}
        keys = spark.createDataFrame(timed("key map", lambda: queue_checks.keymap(run_keys, qops)),
                                     "rid int, rk int, run_id string, key string")
        m = queue_checks.micro_ops(qops, keys, partitions).persist()
        keep.append(m)
        s.partitions = partitions
        s.rows = timed("read and shuffle micro-ops", m.count)

        def stage(name: str, df: DataFrame) -> DataFrame:
            if name == "committed":  # a few rows: a local table, broadcast by every use
                rows = timed(f"stage {name}", df.collect)
                return spark.createDataFrame(rows, df.schema)
            df = df.persist()
            keep.append(df)
            timed(f"stage {name}", df.count)
            return df

        anomalies = queue_checks.queue_anomalies(m, keys, partitions, stage=stage)
        rows = (anomalies.join(F.broadcast(allowed_df), "run_id")
                .withColumn("allowed", F.array_contains("allowed", F.col("type")))
                .withColumn("source", F.lit("pipeline")).withColumn("check_id", F.lit(cid)))
        schema = spark_schema("anomalies")
        rows = rows.select(*[F.col(f.name).cast(f.dataType).alias(f.name) for f in schema.fields])
        timed("queue anomalies", lambda: rows.write.mode("append").parquet(store.table_dir(out, "anomalies")))
        for r in timed("string values", lambda: qops.where(F.col("value_str").isNotNull())
                       .select("run_id", "value", "value_str").distinct().collect()):
            strings[r["run_id"]][r["value"]] = r["value_str"]
    lin: dict[str, dict[str, Any]] = {}
    if lin_ids:
        lops = _only(ops, lin_ids, False)
        workloads = {r: runs[r]["workload"] for r in lin_ids}
        got = timed("linearizability", lambda: lin_checks.lin_results(lops, time_limit, workloads).collect())
        per_run: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for r in got:
            per_run[r["run_id"]].append(r.asDict())
        lin = {rid: lin_checks.merge(per_run.get(rid, []), lin_checks.MODELS[workloads[rid]]) for rid in lin_ids}
        store.write_table(out, "anomalies", [
            {"run_id": rid, "source": "pipeline", "type": t, "allowed": t in allowed[rid],
             "key": str(ex.get("key")), "value": None, "op_index": _lin_op(ex), "time": None,
             "detail": json.dumps(ex, default=str), "check_id": cid}
            for rid, res in lin.items() for t, exs in res["anomalies"].items() for ex in exs])
    counts, examples = timed("collect examples", lambda: _collect(spark, out, cid, max_examples)) \
        if queue_ids else ({}, {})
    op_stats = timed("statistics", lambda: _stats(spark, out, ops, todo, everything))
    for m in keep:
        m.unpersist()
    now = datetime.now(UTC).isoformat(timespec="seconds")
    verdict_rows = []
    for rid in todo:
        st = op_stats.get(rid)
        if rid in lin:
            res = results.lin_result(lin[rid], policies[rid], st)
        else:
            saw = bool(st) and any(f in st["by_f"] for f in QUEUE_FS)
            res = results.queue_result(examples.get(rid, {}), counts.get(rid, {}), policies[rid],
                                       saw_queue_ops=saw, stats=st, strings=strings.get(rid))
        run = runs[rid]
        if run.get("damaged"):
            res["damaged"] = run["damage"]
        res["check_id"] = cid
        s.results[rid] = res
        verdict_rows.append({"run_id": rid, "source": "pipeline", "valid": verdict_str(res["valid"]),
                             "anomaly_types": res["anomaly_types"],
                             "anomaly_counts": dict(res.get("anomaly_counts", {})),
                             "allowed": res["allowed"], "result": json.dumps(res, default=str),
                             "checked_at": now, "check_id": cid})
    store.write_table(out, "verdicts", verdict_rows)
    return s


def _lin_op(ex: dict[str, Any]) -> int | None:
    cf = ex.get("cannot_follow")
    if isinstance(cf, dict):
        return cf.get("ret_index") or cf.get("index")
    return None


def _collect(spark: Any, out: str, cid: str, max_examples: int
             ) -> tuple[dict[str, dict[str, int]], dict[str, dict[str, list[dict[str, Any]]]]]:
    """Counts per (run, type) and the first `max_examples` examples of this check's anomalies."""
    a = store.spark_read(spark, out, "anomalies").where(F.col("check_id") == cid)
    counts: dict[str, dict[str, int]] = defaultdict(dict)
    for r in a.groupBy("run_id", "type").count().collect():
        counts[r["run_id"]][r["type"]] = r["count"]
    examples: dict[str, dict[str, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    w = Window.partitionBy("run_id", "type").orderBy("op_index", "key", "value", "detail")
    first = (a.where(F.col("type") != "unseen").withColumn("n", F.row_number().over(w))
             .where(F.col("n") <= max_examples).select("run_id", "type", "detail", "n").collect())
    for r in sorted(first, key=lambda r: (r["run_id"], r["type"], r["n"])):
        examples[r["run_id"]][r["type"]].append(json.loads(r["detail"]))
    unseen = (a.where(F.col("type") == "unseen")
              .groupBy("run_id", "key")
              .agg(F.count("*").alias("count"),
                   F.slice(F.array_sort(F.collect_list(F.struct("op_index", "value"))), 1,
                           UNSEEN_VALUES_SHOWN).alias("first"),
                   F.first(F.get_json_object("detail", "$._max_read_offset").cast("long")).alias("mr"))
              .withColumn("n", F.row_number().over(Window.partitionBy("run_id").orderBy("key")))
              .where(F.col("n") <= max_examples).collect())
    for r in sorted(unseen, key=lambda r: (r["run_id"], r["n"])):
        examples[r["run_id"]]["unseen"].append({
            "ops": [x["op_index"] for x in r["first"]], "key": r["key"], "count": r["count"],
            "values": [x["value"] for x in r["first"]], "_max_read_offset": r["mr"]})
    return counts, examples


def _stats(spark: Any, out: str, ops: DataFrame, todo: list[str], everything: bool) -> dict[str, dict[str, Any]]:
    ops1 = stats.op_level(ops)
    faults = _only(store.spark_read(spark, out, "faults"), todo, everything)
    return stats.run_stats(ops1, stats.windows(faults))
