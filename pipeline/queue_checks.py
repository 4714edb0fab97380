"""The Kafka queue anomalies of `checkers.queue`, as Spark DataFrame operations over `ops`.

The micro-op rows (sends, polled records, assigned keys) are shuffled once, by (run, key);
every later step is a join, aggregation or window whose keys include run and key, so it
runs inside those partitions (`spark.sql.requireAllClusterKeysForCoPartition=false` lets
joins on (run, key, value) reuse the partitioning). Only small sets move again: the info
sends some poll read, assign ops, and the few rows of anomalies.

The definitions are `checkers.queue`'s (its docstring and docs/checkers-queue.md), in
its words: an op is named by its completion's index (`op`); a *committed* send is ok,
or belongs to an info op some of whose values an ok poll read; the *version order* of a
key holds the offsets and values of every poll record and of committed sends; its known
offsets are numbered densely (`rank`) and the *gap* between two offsets is the known
offsets strictly between them; a *read* is a record of an ok poll. Per type:

- `inconsistent-offsets`, `duplicate`: aggregations over (offset, value) observations;
- `lost-write`: a committed send's value, at its (highest) offset at or below the highest
  offset read from its key, never read; `unseen`: other acknowledged sends never read;
- `G1a`: a read of a value whose send failed; `garbage-read`: a read of a value no op sent;
- `precommitted-read`: a txn read a value it sent (the first such record per op);
- `int-poll-skip`/`int-nonmonotonic-poll`, `int-send-skip`/`int-nonmonotonic-send`:
  window functions over one op's records/sends of a key (lag by micro-op position);
- `poll-skip`/`nonmonotonic-poll`: windows over one process's polls of a key, where an
  ok or info assign/subscribe of the process starts a new epoch (a running count);
- `nonmonotonic-send`: windows over one process's ok/info send ops to a key.

Each function returns rows of `ANOMALY_COLUMNS`: `op_index`/`time` say which op shows
the anomaly and when it completed (time-to-first-anomaly), `detail` is the checker's
example object as JSON without its `explanation` (added by `pipeline.results`, from the
fields; fields named `_...` are for that sentence only). `unseen` has one row per send;
the result object groups them per key as the checker does.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

ANOMALY_COLUMNS = ("run_id", "type", "key", "value", "op_index", "time", "detail")
MICRO_OP_COLUMNS = ("run_id", "key", "process", "f", "type", "index", "op", "time", "ret_time", "mop",
                    "mop_index", "offset", "value", "rebalanced")
SKIPPED_SHOWN = 10  # checkers.queue.analysis.SKIPPED_SHOWN


def micro_ops(ops: DataFrame, partitions: int) -> DataFrame:
    """The keyed micro-op rows of `ops`, partitioned by (run, key): the one big shuffle."""
    return (ops.where(F.col("mop").isNotNull() & F.col("key").isNotNull())
            .withColumn("op", F.coalesce("ret_index", "index"))
            .withColumn("ret_time", F.coalesce("ret_time", "time"))
            .withColumn("rebalanced", F.coalesce("rebalanced", F.lit(False)))
            .select(*MICRO_OP_COLUMNS)
            .repartition(partitions, "run_id", "key"))


# ------------------------------------------------------------------ building blocks


def records(m: DataFrame) -> DataFrame:
    """Poll records with an offset and a value (polls of any outcome)."""
    return m.where((F.col("mop") == "poll") & F.col("offset").isNotNull() & F.col("value").isNotNull())


def reads(m: DataFrame) -> DataFrame:
    """Records of ok polls."""
    return records(m).where(F.col("type") == "ok")


def first_reads(m: DataFrame) -> DataFrame:
    """(run_id, key, value, rop, rtime): each value read, with the first ok poll that read it."""
    return (reads(m).groupBy("run_id", "key", "value")
            .agg(F.min_by(F.struct("op", "ret_time"), "op").alias("r"))
            .select("run_id", "key", "value", F.col("r.op").alias("rop"), F.col("r.ret_time").alias("rtime")))


def committed_info_ops(m: DataFrame, read_values: DataFrame) -> DataFrame:
    """(run_id, op) of info ops some of whose sent values an ok poll read: small."""
    return (m.where((F.col("mop") == "send") & (F.col("type") == "info") & F.col("value").isNotNull())
            .join(read_values, ["run_id", "key", "value"], "left_semi")
            .select("run_id", "op").distinct())


def with_status(m: DataFrame, committed: DataFrame) -> DataFrame:
    """`m` plus `status` of send rows: ok, committed (info, some value read), info, fail."""
    c = committed.withColumn("_read", F.lit(True))
    status = (F.when(F.col("mop") != "send", F.lit(None))
              .when(F.col("type") == "ok", F.lit("ok"))
              .when((F.col("type") == "info") & F.col("_read").isNotNull(), F.lit("committed"))
              .otherwise(F.col("type")))
    return m.join(F.broadcast(c), ["run_id", "op"], "left").withColumn("status", status).drop("_read")


def observations(m: DataFrame) -> DataFrame:
    """(run_id, key, offset, value, seq): first sighting of each (offset, value) in history order.

    Sightings: every poll record, ok sends with an offset, and committed info sends with an
    offset (the checker adds those at the end). `seq` = (phase, op, is_poll, mop_index,
    ret_time): sightings compare in history order.
    """
    sends = m.where(F.col("status").isin("ok", "committed") & F.col("offset").isNotNull()
                    & F.col("value").isNotNull())
    obs = records(m).withColumn("phase", F.lit(0)).unionByName(
        sends.withColumn("phase", F.when(F.col("status") == "ok", F.lit(0)).otherwise(F.lit(1))))
    seq = F.struct("phase", "op", (F.col("mop") == "poll").alias("is_poll"), "mop_index", "ret_time")
    return obs.groupBy("run_id", "key", "offset", "value").agg(F.min(seq).alias("seq"))


def offsets_of(obs: DataFrame) -> DataFrame:
    """Per known offset: rank (dense, from 0), values in sighting order, the first value, ops."""
    per = (obs.groupBy("run_id", "key", "offset")
           .agg(F.array_sort(F.collect_list(F.struct("seq", "value"))).alias("vs")))
    w = Window.partitionBy("run_id", "key").orderBy("offset")
    return per.select("run_id", "key", "offset", F.col("vs.value").alias("values"),
                      F.col("vs")[0]["value"].alias("first_value"),
                      F.get("vs", 1)["seq"]["ret_time"].alias("second_time"),
                      F.array_sort(F.array_distinct(F.col("vs.seq.op"))).alias("ops"),
                      (F.row_number().over(w) - 1).alias("rank"))


def values_of(obs: DataFrame) -> DataFrame:
    """Per value seen at an offset: first-sighted offset, highest offset, offsets, ops."""
    per = (obs.groupBy("run_id", "key", "value")
           .agg(F.array_sort(F.collect_list(F.struct("seq", "offset"))).alias("os"), F.max("offset").alias("max_off")))
    return per.select("run_id", "key", "value", F.col("os")[0]["offset"].alias("first_off"), "max_off",
                      F.get("os", 1)["seq"]["ret_time"].alias("second_time"),
                      F.array_sort(F.col("os.offset")).alias("offsets"),
                      F.array_sort(F.array_distinct(F.col("os.seq.op"))).alias("ops"))


def _row(typ: str | Column, key_col: str, value: Column | None, op_index: Column | None, time: Column | None,
         /, **detail: Column) -> list[Column]:
    return [F.col("run_id"), (F.lit(typ) if isinstance(typ, str) else typ).alias("type"),
            F.col(key_col).alias("key"),
            (value if value is not None else F.lit(None).cast("long")).alias("value"),
            (op_index if op_index is not None else F.lit(None).cast("long")).alias("op_index"),
            (time if time is not None else F.lit(None).cast("long")).alias("time"),
            F.to_json(F.struct(*[c.alias(n) for n, c in detail.items()])).alias("detail")]


def _ranked(df: DataFrame, offsets: DataFrame, col: str, rank_col: str) -> DataFrame:
    """`df` (a few candidate rows) plus the rank of its offset column `col`, a known offset.

    The candidates are broadcast to the (run, key)-partitioned offsets: no sort of the
    big side, no shuffle.
    """
    r = offsets.select("run_id", "key", F.col("offset").alias(col), F.col("rank").alias(rank_col))
    return r.join(F.broadcast(df), ["run_id", "key", col])


def _with_skipped(df: DataFrame, offsets: DataFrame, r1: str, r2: str) -> DataFrame:
    """`df` (candidates; `_skip` rows have ranks r1 < r2) plus `skipped`: the first values in their gap."""
    ident = ["run_id", "key", "kind", "op", r1, r2]
    want = df.where("_skip").select(
        *ident, F.explode(F.sequence(F.col(r1) + 1, F.least(F.col(r2) - 1, F.col(r1) + SKIPPED_SHOWN))).alias("rank"))
    gap = (offsets.select("run_id", "key", "rank", "first_value").join(F.broadcast(want), ["run_id", "key", "rank"])
           .groupBy(*ident).agg(F.array_sort(F.collect_set(F.struct("rank", "first_value"))).alias("_g"))
           .select(*ident, F.col("_g.first_value").alias("skipped")))
    return df.join(gap, ident, "left")


# ------------------------------------------------------------------ anomaly types


def inconsistent_offsets(offsets: DataFrame) -> DataFrame:
    return offsets.where(F.size("values") >= 2).select(*_row(
        "inconsistent-offsets", "key", None, F.col("ops")[0], F.col("second_time"),
        ops=F.col("ops"), key=F.col("key"), offset=F.col("offset"), values=F.col("values")))


def duplicates(values: DataFrame) -> DataFrame:
    return values.where(F.size("offsets") >= 2).select(*_row(
        "duplicate", "key", F.col("value"), F.col("ops")[0], F.col("second_time"),
        ops=F.col("ops"), key=F.col("key"), value=F.col("value"), offsets=F.col("offsets")))


def lost_and_unseen(m: DataFrame, values: DataFrame, read_values: DataFrame) -> DataFrame:
    """lost-write and unseen (unseen: acknowledged, never read, not lost; one row per send)."""
    rec = reads(m)
    bound = (rec.groupBy("run_id", "key").agg(F.max("offset").alias("bound"))
             .join(rec.select("run_id", "key", F.col("offset").alias("bound"), F.col("op").alias("bop")),
                   ["run_id", "key", "bound"])
             .groupBy("run_id", "key", "bound").agg(F.min("bop").alias("bound_op")))
    writers = (m.where((F.col("mop") == "send") & F.col("value").isNotNull())
               .select("run_id", "key", "value", "status", F.col("op").alias("writer"),
                       F.col("ret_time").alias("wtime")))
    unread = writers.join(read_values, ["run_id", "key", "value"], "left_anti")
    cand = (unread.where(F.col("status").isin("ok", "committed"))
            .join(values.select("run_id", "key", "value", "max_off"), ["run_id", "key", "value"], "left")
            .join(bound, ["run_id", "key"], "left")
            .withColumn("lost", F.col("max_off").isNotNull() & F.col("bound").isNotNull()
                        & (F.col("max_off") <= F.col("bound"))))
    lost = cand.where("lost").select(*_row(
        "lost-write", "key", F.col("value"), F.col("writer"), F.col("wtime"),
        ops=F.array("writer", "bound_op"), key=F.col("key"), value=F.col("value"), offset=F.col("max_off"),
        max_read_offset=F.col("bound"), _acknowledged=(F.col("status") == "ok")))
    unseen = cand.where(~F.col("lost") & (F.col("status") == "ok")).select(*_row(
        "unseen", "key", F.col("value"), F.col("writer"), F.col("wtime"),
        key=F.col("key"), value=F.col("value"), _writer=F.col("writer"), _max_read_offset=F.col("bound")))
    return lost.unionByName(unseen)


def aborted_and_garbage_reads(m: DataFrame, first_read: DataFrame) -> DataFrame:
    """G1a (a read of a value whose send failed) and garbage-read (a read of a value never sent)."""
    sends = m.where((F.col("mop") == "send") & F.col("value").isNotNull())
    failed = sends.where(F.col("type") == "fail").select("run_id", "key", "value", F.col("op").alias("writer"))
    g1a = first_read.join(failed, ["run_id", "key", "value"]).select(*_row(
        "G1a", "key", F.col("value"), F.col("rop"), F.col("rtime"),
        ops=F.array("writer", "rop"), key=F.col("key"), value=F.col("value")))
    garbage = (first_read.join(sends.select("run_id", "key", "value"), ["run_id", "key", "value"], "left_anti")
               .select(*_row("garbage-read", "key", F.col("value"), F.col("rop"), F.col("rtime"),
                             ops=F.array("rop"), key=F.col("key"), value=F.col("value"))))
    return g1a.unionByName(garbage)


def precommitted_reads(m: DataFrame) -> DataFrame:
    txn = m.where(F.col("f") == "txn")
    sent = (txn.where((F.col("mop") == "send") & F.col("value").isNotNull())
            .select("run_id", "key", "value", "op"))
    hits = records(txn).join(sent, ["run_id", "key", "value", "op"], "left_semi")
    first = (hits.groupBy("run_id", "op")
             .agg(F.min_by(F.struct("key", "value", "ret_time"), "mop_index").alias("h"))
             .select("run_id", "op", "h.*"))
    return first.select(*_row("precommitted-read", "key", F.col("value"), F.col("op"), F.col("ret_time"),
                              ops=F.array("op"), key=F.col("key"), value=F.col("value")))


# Order checks: candidate pairs (a, b) of offsets of one key, of four kinds, checked together.
CANDIDATE_COLUMNS = ("run_id", "key", "kind", "op", "ret_time", "a", "b", "process", "pop", "v1", "v2")
ORDER_TYPES = {  # kind -> (type when b <= a, type when a gap lies between a and b)
    "int-poll": ("int-nonmonotonic-poll", "int-poll-skip"),
    "int-send": ("int-nonmonotonic-send", "int-send-skip"),
    "poll": ("nonmonotonic-poll", "poll-skip"),
    "send": ("nonmonotonic-send", None),
}


def _candidates(df: DataFrame, kind: str, **cols: Column) -> DataFrame:
    """Rows of one kind in CANDIDATE_COLUMNS form (missing columns null), irregular pairs only."""
    types = {"process": "long", "pop": "long", "v1": "long", "v2": "long"}
    sel = [F.col("run_id"), F.col("key"), F.lit(kind).alias("kind")]
    for c in CANDIDATE_COLUMNS[3:]:
        sel.append(cols[c].alias(c) if c in cols else F.lit(None).cast(types.get(c, "long")).alias(c))
    out = df.select(*sel).where(F.col("a").isNotNull() & F.col("b").isNotNull())
    irregular = (F.col("b") <= F.col("a")) if ORDER_TYPES[kind][1] is None else \
        ((F.col("b") <= F.col("a")) | (F.col("b") > F.col("a") + 1))
    return out.where(irregular)


def internal_poll_pairs(m: DataFrame) -> DataFrame:
    """Successive records of a key within one op (keys in the op's rebalance-log exempt)."""
    rec = records(m).where(~F.col("rebalanced"))
    w = Window.partitionBy("run_id", "op", "key").orderBy("mop_index")
    pairs = rec.withColumn("a", F.lag("offset").over(w))
    return _candidates(pairs, "int-poll", op=F.col("op"), ret_time=F.col("ret_time"), a=F.col("a"),
                       b=F.col("offset"))


def _send_offsets(m: DataFrame, values: DataFrame) -> DataFrame:
    """ok/info send rows with `landed`: their own offset (not for uncommitted info sends),
    else where the version order first shows their value."""
    sends = m.where((F.col("mop") == "send") & F.col("value").isNotNull() & F.col("type").isin("ok", "info"))
    own = F.when(F.col("status") == "info", F.lit(None)).otherwise(F.col("offset"))
    return (sends.join(values.select("run_id", "key", "value", "first_off"), ["run_id", "key", "value"], "left")
            .withColumn("landed", F.coalesce(own, F.col("first_off"))))


def internal_send_pairs(sends: DataFrame) -> DataFrame:
    """Successive sends of one op to a key."""
    w = Window.partitionBy("run_id", "op", "key").orderBy("mop_index")
    pairs = sends.withColumn("a", F.lag("landed").over(w)).withColumn("v1", F.lag("value").over(w))
    return _candidates(pairs, "int-send", op=F.col("op"), ret_time=F.col("ret_time"), a=F.col("a"),
                       b=F.col("landed"), v1=F.col("v1"), v2=F.col("value"))


def poll_pairs(m: DataFrame, partitions: int) -> DataFrame:
    """A poll of a key and the last ok poll of the same process that read it, in one epoch.

    An ok or info assign/subscribe of the process starts a new epoch for every key (the
    assign rows are crossed with the keys the process polled, a small set).
    """
    rec = records(m)
    per_op = (rec.groupBy("run_id", "process", "key", "index")
              .agg(F.min_by("offset", "mop_index").alias("o0"), F.max_by("offset", "mop_index").alias("o1"),
                   F.first("op").alias("op"), F.first("type").alias("type"), F.first("ret_time").alias("ret_time"))
              .withColumn("is_assign", F.lit(0)))
    assigns = (m.where(F.col("mop").isin("assign", "subscribe") & F.col("type").isin("ok", "info"))
               .select("run_id", "process", "index").distinct())
    touched = per_op.select("run_id", "process", "key").distinct()
    resets = (assigns.join(touched, ["run_id", "process"])
              .select("run_id", "process", "key", "index",
                      *[F.lit(None).cast(t).alias(c) for c, t in
                        (("o0", "long"), ("o1", "long"), ("op", "long"), ("type", "string"), ("ret_time", "long"))],
                      F.lit(1).alias("is_assign"))
              .repartition(partitions, "run_id", "key"))
    w = Window.partitionBy("run_id", "process", "key").orderBy("index")
    ev = per_op.unionByName(resets).withColumn(
        "epoch", F.sum("is_assign").over(w.rowsBetween(Window.unboundedPreceding, 0)))
    prev_ok = F.last(F.when(F.col("type") == "ok", F.struct(F.col("o1").alias("prev"), F.col("op").alias("pop"),
                                                               F.col("epoch").alias("pep"))),
                     ignorenulls=True).over(w.rowsBetween(Window.unboundedPreceding, -1))
    pairs = (ev.where(F.col("is_assign") == 0).withColumn("p", prev_ok)
             .where(F.col("p").isNotNull() & (F.col("p.pep") == F.col("epoch"))))
    return _candidates(pairs, "poll", op=F.col("op"), ret_time=F.col("ret_time"), a=F.col("p.prev"),
                       b=F.col("o0"), process=F.col("process"), pop=F.col("p.pop"))


def send_pairs(sends: DataFrame) -> DataFrame:
    """A process's send op to a key and its previous ok/info send op to that key."""
    per_op = (sends.groupBy("run_id", "process", "key", "index")
              .agg(F.min_by(F.struct("landed", "value"), "mop_index").alias("first"),
                   F.max_by(F.struct("landed", "value"), "mop_index").alias("last"),
                   F.first("op").alias("op"), F.first("ret_time").alias("ret_time")))
    w = Window.partitionBy("run_id", "process", "key").orderBy("index")
    pairs = per_op.withColumn("prev", F.lag("last").over(w)).withColumn("pop", F.lag("op").over(w))
    return _candidates(pairs, "send", op=F.col("op"), ret_time=F.col("ret_time"), a=F.col("prev.landed"),
                       b=F.col("first.landed"), process=F.col("process"), pop=F.col("pop"),
                       v1=F.col("prev.value"), v2=F.col("first.value"))


def order_anomalies(cands: DataFrame, offsets: DataFrame) -> DataFrame:
    """The anomalies among order candidates: ranks of a and b, deltas, the skipped values."""
    c = _ranked(_ranked(cands, offsets, "a", "r1"), offsets, "b", "r2").withColumn(
        "delta", F.col("r2") - F.col("r1"))
    skip_kinds = [k for k, (_n, sk) in ORDER_TYPES.items() if sk]
    is_skip = (F.col("b") > F.col("a") + 1) & (F.col("delta") > 1) & F.col("kind").isin(*skip_kinds)
    bad = c.where((F.col("b") <= F.col("a")) | is_skip)
    bad = _with_skipped(bad.withColumn("_skip", is_skip), offsets, "r1", "r2")
    typ = F.lit(None).cast("string")
    for kind, (nonmono, skip) in ORDER_TYPES.items():
        typ = F.when((F.col("kind") == kind) & ~F.col("_skip"), F.lit(nonmono)).otherwise(typ)
        if skip:
            typ = F.when((F.col("kind") == kind) & F.col("_skip"), F.lit(skip)).otherwise(typ)
    between = F.col("kind").isin("poll", "send")
    ops = F.when(between, F.array("pop", "op")).otherwise(F.array("op"))
    sends_ = F.col("kind").isin("int-send", "send")
    detail = F.to_json(F.struct(
        ops.alias("ops"), F.col("key"), F.when(between, F.col("process")).alias("process"),
        F.when(sends_, F.array("v1", "v2")).alias("values"), F.array("a", "b").alias("offsets"),
        F.col("delta"), F.when(F.col("_skip"), F.col("skipped")).alias("skipped")))
    return bad.select(F.col("run_id"), typ.alias("type"), F.col("key"),
                      F.when(sends_, F.col("v2")).alias("value"), F.col("op").alias("op_index"),
                      F.col("ret_time").alias("time"), detail.alias("detail"))


def queue_anomalies(m: DataFrame, partitions: int, *, stage: Any = None) -> DataFrame:
    """Every queue anomaly of the runs in `m` (from `micro_ops`), as one DataFrame.

    `stage(name, df) -> df` may materialise the tables several anomaly types share
    (`first_read`, `committed`, `offsets`, `values`); by default they stay lazy. The
    committed info ops are few: staged, they become a small local table that every use
    broadcasts, instead of a subplan each use repeats.
    """
    stage = stage or (lambda _name, df: df)
    first_read = stage("first_read", first_reads(m))
    read_values = first_read.select("run_id", "key", "value")
    committed = stage("committed", committed_info_ops(m, read_values))
    ms = with_status(m, committed)
    obs = observations(ms)
    offsets = stage("offsets", offsets_of(obs))
    values = stage("values", values_of(obs))
    sends = _send_offsets(ms, values)
    cands = (internal_poll_pairs(ms).unionByName(internal_send_pairs(sends))
             .unionByName(poll_pairs(ms, partitions)).unionByName(send_pairs(sends)))
    parts = [
        inconsistent_offsets(offsets),
        duplicates(values),
        lost_and_unseen(ms, values, read_values),
        aborted_and_garbage_reads(ms, first_read),
        precommitted_reads(ms),
        order_anomalies(cands, offsets),
    ]
    out = parts[0]
    for p in parts[1:]:
        out = out.unionByName(p)
    return out
