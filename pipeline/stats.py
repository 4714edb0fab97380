"""Per-op views of `ops` and the per-run statistics of `checkers.stats`, as Spark aggregates.

Definitions are checkers.stats': an op's outcome is its completion type (never completed:
`info`); *availability* is ok / all over client ops other than `crash` and
`debug-topic-partitions`; an op belongs to a fault window when it completes (never
completed: is invoked) inside it, ends included; `outside_faults` is every op in no
window. A window never healed lasts until after the run's last op.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

IGNORED_FOR_AVAILABILITY = ("crash", "debug-topic-partitions")


def op_level(ops: DataFrame) -> DataFrame:
    """One row per client op: run_id, process, f, type, index, op, time, when, latency (ns, ok/fail)."""
    return (ops.where(F.col("mop_index") == 0)
            .select("run_id", "process", "f", "type", "index", F.coalesce("ret_index", "index").alias("op"), "time",
                    F.coalesce("ret_time", "time").alias("when"),
                    (F.col("ret_time") - F.col("time")).alias("latency")))


NEVER = (1 << 63) - 1  # the end of a window never healed: after every op of the run


def windows(faults: DataFrame) -> DataFrame:
    """Fault windows with a closed end `stop_eff` (never healed: after every op)."""
    return faults.withColumn("stop_eff", F.coalesce("stop", F.lit(NEVER)))


def in_windows(ops1: DataFrame, wins: DataFrame) -> DataFrame:
    """(op row, window) pairs: the op completed inside the window (a broadcast range join)."""
    w = wins.select("run_id", F.col("kind").alias("w_kind"), F.col("start").alias("w_start"),
                    F.col("stop").alias("w_stop"), "stop_eff")
    return ops1.join(F.broadcast(w), (ops1.run_id == w.run_id) & (ops1.when >= w.w_start)
                     & (ops1.when <= w.stop_eff)).drop(w.run_id)


def with_inside(ops1: DataFrame, wins: DataFrame) -> DataFrame:
    """`ops1` plus `inside`: whether the op completed inside some fault window (one pass)."""
    ws = wins.groupBy("run_id").agg(F.collect_list(F.struct(F.col("start").alias("s"),
                                                            F.col("stop_eff").alias("e"))).alias("_ws"))
    inside = F.exists("_ws", lambda w: (F.col("when") >= w["s"]) & (F.col("when") <= w["e"]))
    return (ops1.join(F.broadcast(ws), "run_id", "left")
            .withColumn("inside", F.coalesce(inside, F.lit(False))).drop("_ws"))


def run_stats(ops1: DataFrame, wins: DataFrame) -> dict[str, dict[str, Any]]:
    """checkers.stats.summarize's dict per run (ops, by_f, availability, fault_windows, outside_faults)."""
    okc = (F.col("type") == "ok").cast("long")
    by_f = (with_inside(ops1, wins).groupBy("run_id", "f")
            .agg(F.count("*").alias("count"), F.sum(okc).alias("ok"),
                 F.sum((F.col("type") == "info").cast("long")).alias("info"),
                 F.sum((F.col("type") == "fail").cast("long")).alias("fail"),
                 F.sum((~F.col("inside")).cast("long")).alias("out_ops"),
                 F.sum(F.when(~F.col("inside"), okc).otherwise(0)).alias("out_ok"))
            .collect())
    counted = ops1.where(~F.col("f").isin(*IGNORED_FOR_AVAILABILITY))
    per_win = (in_windows(counted, wins).groupBy("run_id", "w_kind", "w_start", "w_stop")
               .agg(F.count("*").alias("ops"), F.sum(okc).alias("ok")).collect())
    all_wins = wins.select("run_id", "kind", "start", "stop").collect()
    out: dict[str, dict[str, Any]] = defaultdict(lambda: {"ops": 0, "by_f": {}, "availability": _avail(0, 0),
                                                           "fault_windows": [], "outside_faults": _avail(0, 0)})
    totals: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for r in by_f:
        s = out[r["run_id"]]
        s["by_f"][r["f"]] = {"count": r["count"], "ok": r["ok"], "info": r["info"], "fail": r["fail"]}
        s["ops"] += r["count"]
        if r["f"] not in IGNORED_FOR_AVAILABILITY:
            t = totals[r["run_id"]]
            t[0] += r["count"]
            t[1] += r["ok"]
            t[2] += r["out_ops"]
            t[3] += r["out_ok"]
    for rid, (n, ok, n_out, ok_out) in totals.items():
        out[rid]["availability"] = _avail(n, ok)
        out[rid]["outside_faults"] = _avail(n_out, ok_out)
    counts = {(r["run_id"], r["w_kind"], r["w_start"], r["w_stop"]): (r["ops"], r["ok"]) for r in per_win}
    for w in sorted(all_wins, key=lambda w: (w["run_id"], w["start"])):
        n, ok = counts.get((w["run_id"], w["kind"], w["start"], w["stop"]), (0, 0))
        out[w["run_id"]]["fault_windows"].append({"kind": w["kind"], "start": w["start"], "stop": w["stop"],
                                                  **_avail(n, ok)})
    return dict(out)


def _avail(n: int, ok: int) -> dict[str, Any]:
    return {"ops": int(n), "ok": int(ok or 0), "availability": round(ok / n, 6) if n else None}
