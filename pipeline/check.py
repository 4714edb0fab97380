"""`wrack pipeline check`: the checkers as distributed Spark jobs over the ingested runs.

Runs without a verdict yet (all with `recheck`, or the named ones) are checked: every run
in a Spark task of its own (`pipeline.run_checks`: its queue anomalies with
`pipeline.queue_checks`, and its statistics, from the run's own `ops` file: no shuffle),
and the keys of `log` and `register` runs by `pipeline.lin_checks` (per-key
linearizability via applyInPandas). Anomaly rows go to the `anomalies` table (source
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

from pyspark.sql import functions as F

from contracts.errors import InputError
from pipeline import lin_checks, results, run_checks, store
from pipeline.schemas import verdict_str

QUEUE_FS = ("send", "poll", "txn")
# Below this many ops rows, compiling generated code (for the linearizability job) costs more than it saves.
INTERPRETED_BELOW = 200_000
INTERPRETED = {"spark.sql.codegen.wholeStage": "false", "spark.sql.codegen.factoryMode": "NO_CODEGEN"}


@dataclass
class CheckSummary:
    """What a check did, and the latest verdict of every ingested run."""

    checked: list[str] = field(default_factory=list)
    results: dict[str, dict[str, Any]] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    rows: int = 0
    partitions: int = 0
    task_seconds: float = 0.0
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
    s = CheckSummary(checked=list(todo), partitions=len(todo))
    cid = datetime.now(UTC).strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:8]
    s.check_id = cid
    s.rows = sum(int(runs[r].get("op_rows") or 0) for r in todo)
    policies = {rid: results.policy_for(runs[rid], allow) for rid in todo}
    allowed = {rid: policies[rid].allowed for rid in todo}
    lin_ids = [r for r in todo if (runs[r].get("workload") or "queue") in lin_checks.MODELS]
    queue_ids = set(todo) - set(lin_ids)

    def timed(name: str, fn: Callable[[], Any]) -> Any:
        say(f"{name} ...")
        t0 = time.perf_counter()
        try:
            return fn()
        finally:
            s.timings[name] = round(time.perf_counter() - t0, 3)

    per_run = timed("runs (queue anomalies, statistics)",
                    lambda: run_checks.check_all(spark, out, runs, todo, queue_ids, max_examples))
    s.task_seconds = round(sum(r["seconds"] for r in per_run.values()), 3)
    rows = [{"run_id": rid, "source": "pipeline", "allowed": a["type"] in allowed[rid], "check_id": cid, **a}
            for rid in sorted(queue_ids) for a in per_run[rid]["anomalies"]]
    lin: dict[str, dict[str, Any]] = {}
    if lin_ids:
        lin = timed("linearizability", lambda: _lin(spark, out, lin_ids, runs, time_limit))
        rows += [{"run_id": rid, "source": "pipeline", "type": t, "allowed": t in allowed[rid],
                  "key": str(ex.get("key")), "value": None, "op_index": _lin_op(ex), "time": None,
                  "detail": json.dumps(ex, default=str), "check_id": cid}
                 for rid, res in lin.items() for t, exs in res["anomalies"].items() for ex in exs]
    timed("write anomalies", lambda: store.write_table(out, "anomalies", rows))
    now = datetime.now(UTC).isoformat(timespec="seconds")
    verdict_rows = []
    for rid in todo:
        got = per_run[rid]
        st = got["stats"]
        if rid in lin:
            res = results.lin_result(lin[rid], policies[rid], st)
        else:
            saw = bool(st) and any(f in st["by_f"] for f in QUEUE_FS)
            strings = {int(k): v for k, v in got["strings"].items()}
            res = results.queue_result(got["examples"], got["counts"], policies[rid],
                                       saw_queue_ops=saw, stats=st, strings=strings)
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


def _lin(spark: Any, out: str, lin_ids: list[str], runs: dict[str, dict[str, Any]],
         time_limit: float | None) -> dict[str, dict[str, Any]]:
    """run id -> the linearizable result object of each run in `lin_ids` (per key on Spark)."""
    lops = store.spark_read(spark, out, "ops").where(F.col("run_id").isin(lin_ids))
    workloads = {r: runs[r]["workload"] for r in lin_ids}
    per_run: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in lin_checks.lin_results(lops, time_limit, workloads).collect():
        per_run[r["run_id"]].append(r.asDict())
    return {rid: lin_checks.merge(per_run.get(rid, []), lin_checks.MODELS[workloads[rid]]) for rid in lin_ids}


def _lin_op(ex: dict[str, Any]) -> int | None:
    cf = ex.get("cannot_follow")
    if isinstance(cf, dict):
        return cf.get("ret_index") or cf.get("index")
    return None
