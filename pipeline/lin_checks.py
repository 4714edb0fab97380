"""Per-key linearizability on Spark: `applyInPandas` over (run, key) calling checkers.linearizable.

For runs of the workloads checked for linearizability (`MODELS`: the broker's `log`
workload, per-key `send` -> offset and `read` at an offset, workloads/log.py; etcd's
`register`, per-key read / write / compare-and-set, suites/etcd/register.py), every (run, key)
group of `ops` rows is rebuilt into its events (the `raw` column keeps the invoke and
completion values) and checked by `checkers.linearizable.check_events(events, model)`
with the run's model on an executor: keys are independent
(P-compositionality), so the fan-out is exact. `merge` folds the per-key results of a
run into the linearizable checker's result object: invalid if any key is, else unknown
if any key hit the time limit, else valid. Unlike the single-process checker, which
stops at the first failing key, every failing key is reported.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from typing import Any

import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from checkers.linearizable import check_events
from contracts.errors import InputError
from pipeline.schemas import verdict_str

RESULT_SCHEMA = "run_id string, key string, valid string, ops long, result string, seconds double"
MODELS = {"log": "log", "register": "cas-register"}  # workload -> the linearizable checker's model
FUNCTIONS = {"log": ("send", "read"), "register": ("read", "write", "cas")}  # the ops each model checks


def events_of(rows: pd.DataFrame) -> list[dict[str, Any]]:
    """The history events of some `ops` rows (one row per op, with `raw`), in index order."""
    evs: list[dict[str, Any]] = []
    for r in rows.to_dict("records"):
        raw = json.loads(r["raw"]) if isinstance(r["raw"], str) else {}
        p = int(r["process"])
        evs.append({"index": int(r["index"]), "time": int(r["time"]), "process": p, "type": "invoke",
                    "f": r["f"], "value": raw.get("invoke")})
        if not pd.isna(r["ret_index"]):
            c = {"index": int(r["ret_index"]), "time": int(r["ret_time"]), "process": p, "type": r["type"],
                 "f": r["f"], "value": raw.get("value")}
            if isinstance(r["error"], str):
                c["error"] = r["error"]
            evs.append(c)
    evs.sort(key=lambda e: e["index"])
    return evs


def check_group(time_limit: float | None, pdf: pd.DataFrame, model: str = "log") -> pd.DataFrame:
    """applyInPandas body: one (run, key) group of ops rows to one result row."""
    t0 = time.perf_counter()
    run_id, key = pdf["run_id"].iloc[0], pdf["key"].iloc[0]
    try:
        res = check_events(events_of(pdf), model, time_limit=time_limit)
    except InputError as e:
        res = {"valid": "unknown", "anomaly_types": [], "anomalies": {}, "error": f"bad input: {e}"}
    return pd.DataFrame([{"run_id": run_id, "key": key, "valid": verdict_str(res.get("valid")),
                          "ops": int(res.get("ops") or 0), "result": json.dumps(res, default=str),
                          "seconds": time.perf_counter() - t0}])


def lin_results(ops: DataFrame, time_limit: float | None, workloads: dict[str, str] | None = None) -> DataFrame:
    """One row per (run, key) of the ops in `ops` of runs whose workload (`workloads`: run id ->
    workload, default `log`) has a model in `MODELS`: the key's linearizability."""
    workloads = dict(workloads or {})
    cols = ["run_id", "key", "process", "f", "type", "index", "time", "ret_index", "ret_time", "error", "raw"]
    fs = sorted({f for w in {*workloads.values(), "log"} for f in FUNCTIONS[w]})
    rows = ops.where(F.col("mop").isNull() & F.col("key").isNotNull() & F.col("f").isin(*fs)).select(*cols)

    def body(pdf: pd.DataFrame) -> pd.DataFrame:
        workload = workloads.get(pdf["run_id"].iloc[0], "log")
        return check_group(time_limit, pdf[pdf["f"].isin(FUNCTIONS[workload])], MODELS[workload])

    return rows.groupBy("run_id", "key").applyInPandas(body, RESULT_SCHEMA)


def merge(rows: Iterable[dict[str, Any]], model: str = "log") -> dict[str, Any]:
    """The per-key results of one run as one linearizable result object."""
    rows = sorted(rows, key=lambda r: r["key"])
    results = [json.loads(r["result"]) for r in rows]
    valids = [r["valid"] for r in rows]
    if "false" in valids:
        valid: Any = False
    elif any(v != "true" for v in valids):
        valid = "unknown"
    else:
        valid = True
    out: dict[str, Any] = {"valid": valid, "checker": "linearizable", "model": model,
                           "ops": sum(int(r.get("ops") or 0) for r in results), "partitions": len(rows),
                           "configs": sum(int(r.get("configs") or 0) for r in results),
                           "anomaly_types": [], "anomalies": {},
                           "seconds": round(sum(r["seconds"] for r in rows), 3)}
    bad = [ex for r in results if r.get("valid") is False for ex in r.get("anomalies", {}).get("nonlinearizable", [])]
    if bad:
        out["anomaly_types"] = ["nonlinearizable"]
        out["anomalies"] = {"nonlinearizable": bad}
    if valid == "unknown":
        out["undecided"] = [r["key"] for r in rows if r["valid"] != "true"][:100]
        reasons = sorted({str(x.get("reason") or x.get("error")) for x in results if x.get("valid") not in (True, False)})
        out["reason"] = "; ".join(reasons)
    return out
