"""Cross-run analytics of a pipeline directory (`wrack pipeline report`), as one JSON-ready dict.

- `by_config`: per configuration cell (nemesis x acks x min ISR x flush policy x
  safeguards): runs, verdicts, the anomaly rate (share of runs with any anomaly), the
  invalid rate, runs per anomaly type, and time-to-first-anomaly (seconds from the start
  of the history to the completion of the earliest op an anomaly names) over the runs
  that had one. `by_dimension` gives the same rates per single dimension.
- `faults`: availability (ok / all client ops but crash) and latency quantiles of ok
  ops (p50, p95, p99, max; ms) inside vs outside fault windows, overall, per op kind,
  per configuration and per fault kind (membership as in `pipeline.stats`).
- `regressions` (with a baseline pipeline directory): cells whose runs were all valid in
  the baseline and now include an invalid or unknown run, each such run, and cells whose
  anomaly rate rose.

A run's verdict and anomalies are those of its latest `wrack pipeline check` if it was
checked, else those of its results.json (`verdict_source` says which).
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from pipeline import stats, store
from pipeline.check import latest_verdicts

DIMENSIONS = ("nemesis", "acks", "min_isr", "flush_policy", "safeguards")
QUANTILES = (0.5, 0.95, 0.99)


def run_table(out: str) -> list[dict[str, Any]]:
    """One dict per run: config, dimensions, verdict (latest check, else results.json), types."""
    verdicts = latest_verdicts(out)
    rows = []
    for r in store.read_table(out, "runs").to_pylist():
        v = verdicts.get(r["run_id"])
        if v is not None:
            valid, types, source, cid = v["valid"], list(v["anomaly_types"] or []), "pipeline", v["check_id"]
        elif r["has_results"]:
            valid, types, source, cid = r["valid"], list(r["anomaly_types"] or []), "results.json", None
        else:
            valid, types, source, cid = None, [], None, None
        rows.append({
            "run_id": r["run_id"], "config": r["config"], "campaign": r["campaign"],
            "campaign_cell": r["campaign_cell"],
            "nemesis": "+".join(sorted(r["nemesis"] or [])) or "none", "acks": r["acks"],
            "min_isr": r["min_isr"], "flush_policy": r["flush_policy"],
            "safeguards": "on" if not r["safeguards_off"] else "off:" + ",".join(sorted(r["safeguards_off"])),
            "workload": r["workload"], "valid": valid, "anomaly_types": types, "verdict_source": source,
            "check_id": cid, "ops": r["ops"], "damaged": r["damaged"], "duration_s": r["duration_s"],
        })
    return rows


def first_anomaly_times(spark: Any, out: str, runs: list[dict[str, Any]]) -> dict[str, float]:
    """run id -> seconds to its first anomaly (counted anomalies with a time only)."""
    a = store.spark_read(spark, out, "anomalies").where(F.col("time").isNotNull())
    sel = spark.createDataFrame([(r["run_id"], r["verdict_source"], r["check_id"]) for r in runs],
                                "run_id string, source string, check_id string")
    match = (a.join(F.broadcast(sel), "run_id")
             .where((a.source == sel.source)
                    & ((sel.check_id.isNull() & a.check_id.isNull()) | (a.check_id == sel.check_id))))
    first = match.groupBy("run_id").agg(F.min("time").alias("t")).collect()
    return {r["run_id"]: max(0, r["t"]) / 1e9 for r in first}  # history times are ns since the start


def _rates(group: list[dict[str, Any]], ttfa: dict[str, float]) -> dict[str, Any]:
    n = len(group)
    checked = [r for r in group if r["valid"] is not None]
    with_anoms = [r for r in checked if r["anomaly_types"]]
    types: dict[str, int] = defaultdict(int)
    for r in with_anoms:
        for t in r["anomaly_types"]:
            types[t] += 1
    times = sorted(ttfa[r["run_id"]] for r in with_anoms if r["run_id"] in ttfa)
    return {
        "runs": n, "checked": len(checked),
        "valid": sum(r["valid"] == "true" for r in group), "invalid": sum(r["valid"] == "false" for r in group),
        "unknown": sum(r["valid"] == "unknown" for r in group), "unchecked": n - len(checked),
        "anomaly_rate": round(len(with_anoms) / len(checked), 4) if checked else None,
        "invalid_rate": round(sum(r["valid"] == "false" for r in checked) / len(checked), 4) if checked else None,
        "runs_by_type": dict(sorted(types.items())),
        "time_to_first_anomaly_s": {
            "runs": len(times), "min": round(times[0], 3) if times else None,
            "median": round(times[len(times) // 2], 3) if times else None,
            "max": round(times[-1], 3) if times else None, "all": [round(t, 3) for t in times]},
    }


def by_config(runs: list[dict[str, Any]], ttfa: dict[str, float]) -> list[dict[str, Any]]:
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in runs:
        groups[r["config"]].append(r)
    out = []
    for cfg in sorted(groups):
        g = groups[cfg]
        out.append({"config": cfg, **{d: g[0][d] for d in DIMENSIONS}, **_rates(g, ttfa)})
    return out


def by_dimension(runs: list[dict[str, Any]], ttfa: dict[str, float]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for d in DIMENSIONS:
        groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for r in runs:
            groups[str(r[d])].append(r)
        out[d] = [{"value": k, **{x: y for x, y in _rates(g, ttfa).items() if x != "time_to_first_anomaly_s"}}
                  for k, g in sorted(groups.items())]
    return out


def fault_stats(spark: Any, out: str, runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Availability and latency quantiles inside vs outside fault windows."""
    ops1 = stats.op_level(store.spark_read(spark, out, "ops")).where(
        ~F.col("f").isin(*stats.IGNORED_FOR_AVAILABILITY))
    faults = store.spark_read(spark, out, "faults")
    wins = stats.windows(faults)
    cfg = spark.createDataFrame([(r["run_id"], r["config"]) for r in runs], "run_id string, config string")
    marked = stats.with_inside(ops1, wins).join(F.broadcast(cfg), "run_id")
    by_kind = stats.in_windows(ops1, wins).select("run_id", "op", "f", "type", "latency", "w_kind")

    def agg(df: DataFrame, keys: list[str]) -> list[dict[str, Any]]:
        okc = (F.col("type") == "ok").cast("long")
        lat = F.when(F.col("type") == "ok", F.col("latency"))
        rows = df.groupBy(*keys).agg(
            F.count("*").alias("ops"), F.sum(okc).alias("ok"),
            F.percentile_approx(lat, list(QUANTILES), 1000).alias("q"), F.max(lat).alias("max")).collect()
        res = []
        for r in rows:
            q = r["q"] or [None] * len(QUANTILES)
            res.append({**{k: r[k] for k in keys}, "ops": r["ops"], "ok": r["ok"],
                        "availability": round(r["ok"] / r["ops"], 6) if r["ops"] else None,
                        "latency_ms": {**{f"p{int(p * 100)}": _ms(x) for p, x in zip(QUANTILES, q, strict=True)},
                                       "max": _ms(r["max"])}})
        return sorted(res, key=lambda d: tuple(str(d[k]) for k in keys))

    all_ops = marked.withColumn("f", F.lit("all"))
    return {
        "overall": agg(all_ops, ["inside"]),
        "by_f": agg(marked, ["f", "inside"]),
        "by_config": agg(all_ops, ["config", "inside"]),
        "by_fault_kind": agg(by_kind, ["w_kind"]),
    }


def _ms(ns: Any) -> float | None:
    return None if ns is None else round(ns / 1e6, 3)


def regressions(runs: list[dict[str, Any]], base: list[dict[str, Any]]) -> dict[str, Any]:
    """Runs and cells that regressed against the baseline campaign's runs (see module docstring)."""
    def cells(rows: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
        g: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for r in rows:
            g[r["config"]].append(r)
        return g

    now, before = cells(runs), cells(base)
    reg_runs, reg_cells, worse = [], [], []
    for cfg, rows in sorted(now.items()):
        b = before.get(cfg)
        if not b:
            continue
        b_checked = [r for r in b if r["valid"] is not None]
        b_ok = bool(b_checked) and all(r["valid"] == "true" for r in b_checked)
        bad = [r for r in rows if r["valid"] in ("false", "unknown")]
        if b_ok and bad:
            reg_cells.append({"config": cfg, "baseline_runs": len(b), "runs": len(rows), "regressed_runs": len(bad)})
            reg_runs += [{"run_id": r["run_id"], "config": cfg, "valid": r["valid"],
                          "anomaly_types": r["anomaly_types"]} for r in bad]
        rate_b = _anomaly_rate(b)
        rate_n = _anomaly_rate(rows)
        if rate_b is not None and rate_n is not None and rate_n > rate_b:
            worse.append({"config": cfg, "baseline_anomaly_rate": rate_b, "anomaly_rate": rate_n})
    return {"cells": reg_cells, "runs": reg_runs, "anomaly_rate_up": worse,
            "baseline_runs": len(base), "compared_cells": len(set(now) & set(before))}


def _anomaly_rate(rows: list[dict[str, Any]]) -> float | None:
    checked = [r for r in rows if r["valid"] is not None]
    if not checked:
        return None
    return round(sum(bool(r["anomaly_types"]) for r in checked) / len(checked), 4)


def analyse(spark: Any, out: str, baseline: str | None = None) -> dict[str, Any]:
    """The whole report dict for pipeline directory `out` (and a baseline directory)."""
    runs = run_table(out)
    ttfa = first_anomaly_times(spark, out, runs)
    report: dict[str, Any] = {
        "runs": len(runs),
        "checked": sum(r["valid"] is not None for r in runs),
        "verdicts": {v: sum(r["valid"] == v for r in runs) for v in ("true", "false", "unknown")},
        "damaged_runs": [r["run_id"] for r in runs if r["damaged"]],
        "by_config": by_config(runs, ttfa),
        "by_dimension": by_dimension(runs, ttfa),
        "faults": fault_stats(spark, out, runs),
        "runs_table": [{k: r[k] for k in ("run_id", "config", "valid", "anomaly_types", "verdict_source")}
                       | {"time_to_first_anomaly_s": ttfa.get(r["run_id"])} for r in runs],
    }
    if baseline is not None:
        report["baseline"] = baseline
        report["regressions"] = regressions(runs, run_table(baseline))
    return json.loads(json.dumps(report, default=str))
