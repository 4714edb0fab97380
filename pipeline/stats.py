"""Per-op views of `ops` and fault-window membership, as Spark expressions (for `pipeline.analytics`).

Definitions are checkers.stats': an op's outcome is its completion type (never completed:
`info`); *availability* is ok / all over client ops other than `crash` and
`debug-topic-partitions`; an op belongs to a fault window when it completes (never
completed: is invoked) inside it, ends included; `outside_faults` is every op in no
window. A window never healed lasts until after the run's last op.
"""

from __future__ import annotations

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
