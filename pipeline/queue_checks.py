"""The Kafka queue anomalies of `checkers.queue`, as Spark DataFrame operations over `ops`.

The micro-op rows (sends, polled records, assigned keys) are shuffled once, by (run, key);
every later step is a join, aggregation or window whose keys include the (run, key) id
`rk`, so it runs inside those partitions (`spark.sql.requireAllClusterKeysForCoPartition
=false` lets joins on (rk, value) reuse the partitioning). Only small sets move again: the
info sends some poll read, assign ops, and the candidate rows of anomalies, which are
broadcast to the big tables. Runs and keys travel as integers (`rid`, `rk`; the small
`keymap` says which is which) and outcomes as small codes: grouping, joining and sorting
tens of millions of rows on strings costs several times more.

The definitions are `checkers.queue`'s (its docstring and docs/checkers-queue.md), in
its words: an op is named by its completion's index (`op`); a *committed* send is ok,
or belongs to an info op some of whose values an ok poll read; the *version order* of a
key holds the offsets and values of every poll record and of committed sends; its known
offsets are numbered densely (`rank`) and the *gap* between two offsets is the known
offsets strictly between them; a *read* is a record of an ok poll. Per type:

- `inconsistent-offsets`, `duplicate`: aggregations over (offset, value) sightings;
- `lost-write`: a committed send's value, at its (highest) offset at or below the highest
  offset read from its key, never read; `unseen`: other acknowledged sends never read;
- `G1a`: a read of a value whose send failed; `garbage-read`: a read of a value no op sent;
- `precommitted-read`: a txn read a value it sent (the first such record per op);
- `int-poll-skip`/`int-nonmonotonic-poll`, `int-send-skip`/`int-nonmonotonic-send`:
  window functions over one op's records/sends of a key (lag by micro-op position);
- `poll-skip`/`nonmonotonic-poll`: windows over one process's polls of a key, where an
  ok or info assign/subscribe of the process starts a new epoch (a running count);
- `nonmonotonic-send` (and the `int-*-send` pairs): one window over a process's ok/info
  sends to a key, by op and position.

The result has `ANOMALY_COLUMNS`: `op_index`/`time` say which op shows the anomaly and when
it completed (time-to-first-anomaly; looked up once, for the few anomaly rows), `detail`
is the checker's example object as JSON without its `explanation` (added by
`pipeline.results`, from the fields; fields named `_...` are for that sentence only).
`unseen` has one row per send; the result object groups them per key as the checker does.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

ANOMALY_COLUMNS = ("run_id", "type", "key", "value", "op_index", "time", "detail")
SKIPPED_SHOWN = 10  # checkers.queue.analysis.SKIPPED_SHOWN
SEND, POLL, ASSIGN = 0, 1, 2  # mop codes
OK, INFO, FAIL = 0, 1, 2  # type codes
S_OK, S_COMMITTED, S_INFO, S_FAIL = 0, 1, 2, 3  # send status codes


def keymap(run_keys: dict[str, list[str] | None], ops: DataFrame) -> list[tuple[int, int, str, str]]:
    """The (run_id, key) pairs to check, numbered: (rid, rk, run_id, key) tuples, a small list.

    `run_keys` maps each run to its keys as ingest recorded them (`runs.keys`); runs without
    that list are looked up in `ops` (one scan).
    """
    pairs = {(r, k) for r, ks in run_keys.items() if ks is not None for k in ks}
    missing = [r for r, ks in run_keys.items() if ks is None]
    if missing:
        pairs |= {(r["run_id"], r["key"]) for r in
                  ops.where(F.col("run_id").isin(missing) & F.col("mop").isNotNull() & F.col("key").isNotNull())
                  .select("run_id", "key").distinct().collect()}
    runs = {rid: i for i, rid in enumerate(sorted(run_keys))}
    return [(runs[run_id], rk, run_id, key) for rk, (run_id, key) in enumerate(sorted(pairs))]


def micro_ops(ops: DataFrame, keys: DataFrame, partitions: int) -> DataFrame:
    """The keyed micro-op rows of `ops` as codes, partitioned by rk: the one big shuffle.

    Columns: rid, rk, process, op (completion index; a process's ops are in this order),
    ret_time, mop (code), type (code), txn, mop_index, offset, value, rebalanced. `keys`
    is the keymap as a DataFrame (rid, rk, run_id, key).
    """
    code = {"send": SEND, "poll": POLL, "assign": ASSIGN, "subscribe": ASSIGN}
    mop = F.lit(None).cast("int")
    for name, c in code.items():
        mop = F.when(F.col("mop") == name, F.lit(c)).otherwise(mop)
    typ = (F.when(F.col("type") == "ok", F.lit(OK)).when(F.col("type") == "fail", F.lit(FAIL))
           .otherwise(F.lit(INFO)))
    return (ops.where(F.col("mop").isNotNull() & F.col("key").isNotNull())
            .join(F.broadcast(keys.select("run_id", "key", "rid", "rk")), ["run_id", "key"])
            .select("rid", "rk", "process", F.coalesce("ret_index", "index").alias("op"),
                    F.coalesce("ret_time", "time").alias("ret_time"), mop.alias("mop"), typ.alias("type"),
                    (F.col("f") == "txn").alias("txn"), "mop_index", "offset", "value",
                    F.coalesce("rebalanced", F.lit(False)).alias("rebalanced"))
            .repartition(partitions, "rk"))


# ------------------------------------------------------------------ building blocks


def records(m: DataFrame) -> DataFrame:
    """Poll records with an offset and a value (polls of any outcome)."""
    return m.where((F.col("mop") == POLL) & F.col("offset").isNotNull() & F.col("value").isNotNull())


def reads(m: DataFrame) -> DataFrame:
    """Records of ok polls."""
    return records(m).where(F.col("type") == OK)


def first_reads(m: DataFrame) -> DataFrame:
    """(rk, value, rop): each value read, with the first ok poll that read it."""
    return reads(m).groupBy("rk", "value").agg(F.min("op").alias("rop"))


def committed_info_ops(m: DataFrame, read_values: DataFrame) -> DataFrame:
    """(rid, op) of info ops some of whose sent values an ok poll read: small."""
    return (m.where((F.col("mop") == SEND) & (F.col("type") == INFO) & F.col("value").isNotNull())
            .join(read_values, ["rk", "value"], "left_semi")
            .select("rid", "op").distinct())


def with_status(m: DataFrame, committed: DataFrame) -> DataFrame:
    """`m` plus `status` of send rows (S_OK, S_COMMITTED, S_INFO, S_FAIL; null otherwise)."""
    c = committed.withColumn("_read", F.lit(True))
    status = (F.when(F.col("mop") != SEND, F.lit(None).cast("int"))
              .when(F.col("type") == OK, F.lit(S_OK))
              .when(F.col("type") == FAIL, F.lit(S_FAIL))
              .when(F.col("_read").isNotNull(), F.lit(S_COMMITTED))
              .otherwise(F.lit(S_INFO)))
    return m.join(F.broadcast(c), ["rid", "op"], "left").withColumn("status", status).drop("_read")


SEQ_OP_SHIFT = 17
SEQ_OP_MASK = (1 << 41) - 1


def observations(ms: DataFrame) -> DataFrame:
    """(rk, offset, value, seq): first sighting of each (offset, value) in history order.

    Sightings: every poll record, ok sends with an offset, and committed info sends with an
    offset (the checker adds those at the end). `seq` orders sightings as the checker meets
    them, in one long: phase (1 bit), op (41 bits), poll after send within an op (1 bit),
    micro-op position (16 bits); `seq_op(seq)` is the op.
    """
    sends = ms.where(F.col("status").isin(S_OK, S_COMMITTED) & F.col("offset").isNotNull()
                     & F.col("value").isNotNull())
    obs = records(ms).unionByName(sends)
    phase = F.when(F.col("status") == S_COMMITTED, F.lit(1)).otherwise(F.lit(0)).cast("long")
    seq = (F.shiftleft(phase, 58) + F.shiftleft(F.col("op"), SEQ_OP_SHIFT)
           + F.shiftleft((F.col("mop") == POLL).cast("long"), 16)
           + F.least(F.col("mop_index"), F.lit(65535)).cast("long"))
    return obs.groupBy("rk", "offset", "value").agg(F.min(seq).alias("seq"))


def seq_op(seq: Column) -> Column:
    return F.shiftright(seq, SEQ_OP_SHIFT).bitwiseAND(F.lit(SEQ_OP_MASK))


def offsets_of(obs: DataFrame) -> DataFrame:
    """Per known offset: how many values were seen there, the first, and its dense rank (from 0)."""
    per = (obs.groupBy("rk", "offset")
           .agg(F.count("*").alias("n"), F.min_by("value", "seq").alias("first_value")))
    w = Window.partitionBy("rk").orderBy("offset")
    return per.withColumn("rank", F.row_number().over(w) - 1)


def values_of(obs: DataFrame) -> DataFrame:
    """Per value seen at an offset: at how many offsets, the first-sighted one and the highest."""
    return (obs.groupBy("rk", "value")
            .agg(F.count("*").alias("n"), F.min_by("offset", "seq").alias("first_off"),
                 F.max("offset").alias("max_off")))


def _sightings(obs: DataFrame, which: DataFrame, by: list[str], what: str) -> DataFrame:
    """All sightings of the few (rk, by) in `which`, as one array in sighting order."""
    return (obs.join(F.broadcast(which.select("rk", *by)), ["rk", *by])
            .groupBy("rk", *by)
            .agg(F.array_sort(F.collect_list(F.struct("seq", what))).alias("vs"))
            .select("rk", *by, F.col(f"vs.{what}").alias(what + "s"),
                    F.array_sort(F.array_distinct(F.transform("vs", lambda x: seq_op(x["seq"])))).alias("ops"),
                    seq_op(F.get("vs", 1)["seq"]).alias("second_op")))


def _row(typ: str | Column, value: Column | None, op_index: Column | None, /, **detail: Column) -> list[Column]:
    """An anomaly row: rk, type, value, op_index, detail (JSON without the key: added by `_named`)."""
    return [F.col("rk"), (F.lit(typ) if isinstance(typ, str) else typ).alias("type"),
            (value if value is not None else F.lit(None).cast("long")).alias("value"),
            (op_index if op_index is not None else F.lit(None).cast("long")).alias("op_index"),
            F.to_json(F.struct(*[c.alias(n) for n, c in detail.items()])).alias("detail")]


def _ranked(df: DataFrame, offsets: DataFrame, col: str, rank_col: str) -> DataFrame:
    """`df` (a few candidate rows) plus the rank of its offset column `col`, a known offset.

    The candidates are broadcast to the rk-partitioned offsets: no sort of the big side,
    no shuffle.
    """
    r = offsets.select("rk", F.col("offset").alias(col), F.col("rank").alias(rank_col))
    return r.join(F.broadcast(df), ["rk", col])


def _with_skipped(df: DataFrame, offsets: DataFrame, r1: str, r2: str) -> DataFrame:
    """`df` (candidates; `_skip` rows have ranks r1 < r2) plus `skipped`: the first values in their gap."""
    ident = ["rk", "kind", "op", r1, r2]
    want = df.where("_skip").select(
        *ident, F.explode(F.sequence(F.col(r1) + 1, F.least(F.col(r2) - 1, F.col(r1) + SKIPPED_SHOWN))).alias("rank"))
    gap = (offsets.select("rk", "rank", "first_value").join(F.broadcast(want), ["rk", "rank"])
           .groupBy(*ident).agg(F.array_sort(F.collect_set(F.struct("rank", "first_value"))).alias("_g"))
           .select(*ident, F.col("_g.first_value").alias("skipped")))
    return df.join(gap, ident, "left")


# ------------------------------------------------------------------ anomaly types


def inconsistent_offsets(obs: DataFrame, offsets: DataFrame) -> DataFrame:
    bad = _sightings(obs, offsets.where(F.col("n") >= 2), ["offset"], "value")
    return bad.select(*_row("inconsistent-offsets", None, F.col("second_op"),
                            ops=F.col("ops"), offset=F.col("offset"), values=F.col("values")))


def duplicates(obs: DataFrame, values: DataFrame) -> DataFrame:
    bad = _sightings(obs, values.where(F.col("n") >= 2), ["value"], "offset")
    return bad.select(*_row("duplicate", F.col("value"), F.col("second_op"),
                            ops=F.col("ops"), value=F.col("value"), offsets=F.array_sort("offsets")))


def lost_and_unseen(ms: DataFrame, values: DataFrame, read_values: DataFrame) -> DataFrame:
    """lost-write and unseen (unseen: acknowledged, never read, not lost; one row per send)."""
    top = reads(ms).groupBy("rk").agg(F.max(F.struct(F.col("offset"), (-F.col("op")).alias("nop"))).alias("t"))
    bound = top.select("rk", F.col("t.offset").alias("bound"), (-F.col("t.nop")).alias("bound_op"))
    writers = (ms.where((F.col("mop") == SEND) & F.col("value").isNotNull()
                        & F.col("status").isin(S_OK, S_COMMITTED))
               .select("rk", "value", "status", F.col("op").alias("writer")))
    cand = (writers.join(read_values, ["rk", "value"], "left_anti")
            .join(values.select("rk", "value", "max_off"), ["rk", "value"], "left")
            .join(F.broadcast(bound), "rk", "left")
            .withColumn("lost", F.col("max_off").isNotNull() & F.col("bound").isNotNull()
                        & (F.col("max_off") <= F.col("bound"))))
    lost = cand.where("lost").select(*_row(
        "lost-write", F.col("value"), F.col("writer"),
        ops=F.array("writer", "bound_op"), value=F.col("value"), offset=F.col("max_off"),
        max_read_offset=F.col("bound"), _acknowledged=(F.col("status") == S_OK)))
    unseen = cand.where(~F.col("lost") & (F.col("status") == S_OK)).select(*_row(
        "unseen", F.col("value"), F.col("writer"),
        value=F.col("value"), _writer=F.col("writer"), _max_read_offset=F.col("bound")))
    return lost.unionByName(unseen)


def aborted_and_garbage_reads(ms: DataFrame, first_read: DataFrame) -> DataFrame:
    """G1a (a read of a value whose send failed) and garbage-read (a read of a value never sent)."""
    sends = ms.where((F.col("mop") == SEND) & F.col("value").isNotNull())
    failed = sends.where(F.col("type") == FAIL).select("rk", "value", F.col("op").alias("writer"))
    g1a = first_read.join(failed, ["rk", "value"]).select(*_row(
        "G1a", F.col("value"), F.col("rop"), ops=F.array("writer", "rop"), value=F.col("value")))
    garbage = first_read.join(sends.select("rk", "value"), ["rk", "value"], "left_anti").select(*_row(
        "garbage-read", F.col("value"), F.col("rop"), ops=F.array("rop"), value=F.col("value")))
    return g1a.unionByName(garbage)


def precommitted_reads(ms: DataFrame) -> DataFrame:
    """A txn op's first record (by position) of a value the same op sent."""
    txn = ms.where("txn")
    sent = txn.where((F.col("mop") == SEND) & F.col("value").isNotNull()).select("rk", "value", "op")
    hits = records(txn).join(sent, ["rk", "value", "op"], "left_semi")
    first = (hits.groupBy("rid", "op").agg(F.min_by(F.struct("rk", "value"), "mop_index").alias("h"))
             .select("op", "h.*"))
    return first.select(*_row("precommitted-read", F.col("value"), F.col("op"), ops=F.array("op"),
                              value=F.col("value")))


# Order checks: candidate pairs (a, b) of offsets of one key, of four kinds, checked together.
CANDIDATE_COLUMNS = ("rk", "kind", "op", "a", "b", "process", "pop", "v1", "v2")
ORDER_TYPES = {  # kind -> (type when b <= a, type when a gap lies between a and b)
    "int-poll": ("int-nonmonotonic-poll", "int-poll-skip"),
    "int-send": ("int-nonmonotonic-send", "int-send-skip"),
    "poll": ("nonmonotonic-poll", "poll-skip"),
    "send": ("nonmonotonic-send", None),
}


def _candidates(df: DataFrame, kind: str, **cols: Column) -> DataFrame:
    """Rows of one kind in CANDIDATE_COLUMNS form (missing columns null), irregular pairs only."""
    sel = [F.col("rk"), F.lit(kind).alias("kind")]
    for c in CANDIDATE_COLUMNS[2:]:
        sel.append(cols[c].alias(c) if c in cols else F.lit(None).cast("long").alias(c))
    out = df.select(*sel).where(F.col("a").isNotNull() & F.col("b").isNotNull())
    irregular = (F.col("b") <= F.col("a")) if ORDER_TYPES[kind][1] is None else \
        ((F.col("b") <= F.col("a")) | (F.col("b") > F.col("a") + 1))
    return out.where(irregular)


def poll_segments(ms: DataFrame) -> DataFrame:
    """One row per (poll op, key): first and last offset, outcome, and `irregular`.

    A segment is regular when its records sit at consecutive micro-op positions and
    consecutive offsets (offset - position constant): nothing inside it can be an
    int-poll anomaly, so only irregular segments (few) get the record-by-record look.
    Keys in the op's rebalance-log are exempt from those checks, as in the checker.
    """
    d = F.col("offset") - F.col("mop_index")
    return (records(ms).groupBy("rk", "process", "op")
            .agg(F.min_by("offset", "mop_index").alias("o0"), F.max_by("offset", "mop_index").alias("o1"),
                 F.first("type").alias("type"),
                 ((F.max(d) != F.min(d))
                  | (F.max("mop_index") - F.min("mop_index") + 1 != F.count("*"))).alias("irregular"),
                 F.max(F.col("rebalanced").cast("int")).alias("rebalanced")))


def internal_poll_pairs(ms: DataFrame, segments: DataFrame) -> DataFrame:
    """Successive records of a key within one op, in the irregular segments."""
    odd = segments.where(F.col("irregular") & (F.col("rebalanced") == 0)).select("rk", "op")
    rec = records(ms).join(F.broadcast(odd), ["rk", "op"], "left_semi")
    w = Window.partitionBy("rk", "op").orderBy("mop_index")
    pairs = rec.withColumn("a", F.lag("offset").over(w))
    return _candidates(pairs, "int-poll", op=F.col("op"), a=F.col("a"), b=F.col("offset"))


def send_offsets(ms: DataFrame, values: DataFrame) -> DataFrame:
    """ok/info send rows with `landed`: their own offset (not for uncommitted info sends),
    else where the version order first shows their value (looked up for those few only)."""
    sends = (ms.where((F.col("mop") == SEND) & F.col("value").isNotNull() & F.col("type").isin(OK, INFO))
             .withColumn("landed", F.when(F.col("status") == S_INFO, F.lit(None)).otherwise(F.col("offset"))))
    missing = sends.where(F.col("landed").isNull()).select("rk", "value").distinct()
    found = values.select("rk", "value", "first_off").join(F.broadcast(missing), ["rk", "value"])
    return (sends.join(F.broadcast(found), ["rk", "value"], "left")
            .withColumn("landed", F.coalesce("landed", "first_off")).drop("first_off"))


def send_order_pairs(sends: DataFrame) -> DataFrame:
    """Successive sends of a process to a key: within one op (int-send) or from one op to the
    next (send: the previous op's last send, this op's first)."""
    w = Window.partitionBy("rk", "process").orderBy("op", "mop_index")
    p = (sends.withColumn("a", F.lag("landed").over(w)).withColumn("v1", F.lag("value").over(w))
         .withColumn("pop", F.lag("op").over(w)).where(F.col("pop").isNotNull()))
    same = _candidates(p.where(F.col("pop") == F.col("op")), "int-send", op=F.col("op"), a=F.col("a"),
                       b=F.col("landed"), v1=F.col("v1"), v2=F.col("value"))
    between = _candidates(p.where(F.col("pop") != F.col("op")), "send", op=F.col("op"), a=F.col("a"),
                          b=F.col("landed"), process=F.col("process"), pop=F.col("pop"), v1=F.col("v1"),
                          v2=F.col("value"))
    return same.unionByName(between)


def poll_pairs(ms: DataFrame, segments: DataFrame, keys: DataFrame, partitions: int) -> DataFrame:
    """A poll of a key and the last ok poll of the same process that read it, in one epoch.

    An ok or info assign/subscribe of the process starts a new epoch for every key (the
    assign ops are crossed with the keys the process polled, a small set).
    """
    per_op = segments.select("rk", "process", "op", "o0", "o1", "type", F.lit(0).alias("is_assign"))
    assigns = (ms.where((F.col("mop") == ASSIGN) & F.col("type").isin(OK, INFO))
               .select("rid", "process", "op").distinct())
    touched = (per_op.select("rk", "process").distinct()
               .join(F.broadcast(keys.select("rk", "rid")), "rk"))
    resets = (assigns.join(touched, ["rid", "process"])
              .select("rk", "process", "op", *[F.lit(None).cast(t).alias(c) for c, t in
                                              (("o0", "long"), ("o1", "long"), ("type", "int"))],
                      F.lit(1).alias("is_assign"))
              .repartition(partitions, "rk"))
    w = Window.partitionBy("rk", "process").orderBy("op")
    ev = per_op.unionByName(resets).withColumn(
        "epoch", F.sum("is_assign").over(w.rowsBetween(Window.unboundedPreceding, 0)))
    prev_ok = F.last(F.when(F.col("type") == OK, F.struct(F.col("o1").alias("prev"), F.col("op").alias("pop"),
                                                             F.col("epoch").alias("pep"))),
                     ignorenulls=True).over(w.rowsBetween(Window.unboundedPreceding, -1))
    pairs = (ev.where(F.col("is_assign") == 0).withColumn("p", prev_ok)
             .where(F.col("p").isNotNull() & (F.col("p.pep") == F.col("epoch"))))
    return _candidates(pairs, "poll", op=F.col("op"), a=F.col("p.prev"), b=F.col("o0"), process=F.col("process"),
                       pop=F.col("p.pop"))


def order_anomalies(cands: DataFrame, offsets: DataFrame, stage: Any) -> DataFrame:
    """The anomalies among order candidates: ranks of a and b, deltas, the skipped values."""
    c = _ranked(_ranked(cands, offsets, "a", "r1"), offsets, "b", "r2").withColumn(
        "delta", F.col("r2") - F.col("r1"))
    skip_kinds = [k for k, (_n, sk) in ORDER_TYPES.items() if sk]
    is_skip = (F.col("b") > F.col("a") + 1) & (F.col("delta") > 1) & F.col("kind").isin(*skip_kinds)
    bad = stage("order", c.where((F.col("b") <= F.col("a")) | is_skip).withColumn("_skip", is_skip))
    bad = _with_skipped(bad, offsets, "r1", "r2")
    typ = F.lit(None).cast("string")
    for kind, (nonmono, skip) in ORDER_TYPES.items():
        typ = F.when((F.col("kind") == kind) & ~F.col("_skip"), F.lit(nonmono)).otherwise(typ)
        if skip:
            typ = F.when((F.col("kind") == kind) & F.col("_skip"), F.lit(skip)).otherwise(typ)
    between = F.col("kind").isin("poll", "send")
    sends_ = F.col("kind").isin("int-send", "send")
    return bad.select(*_row(
        typ, F.when(sends_, F.col("v2")), F.col("op"),
        ops=F.when(between, F.array("pop", "op")).otherwise(F.array("op")),
        process=F.when(between, F.col("process")), values=F.when(sends_, F.array("v1", "v2")),
        offsets=F.array("a", "b"), delta=F.col("delta"), skipped=F.when(F.col("_skip"), F.col("skipped"))))


def _named(rows: DataFrame, ms: DataFrame, keys: DataFrame) -> DataFrame:
    """The few anomaly rows in final form: run_id and key (from the keymap), the key also in
    the example, and the time of `op_index` (completion time, looked up in `ms`)."""
    wanted = rows.select("rk", F.col("op_index").alias("op")).distinct()
    times = (ms.select("rk", "op", "ret_time").join(F.broadcast(wanted), ["rk", "op"], "left_semi")
             .groupBy("rk", "op").agg(F.max("ret_time").alias("time")))
    # '{"key": k}' + the rest of the example: '{"key":"k1"' + ',' + '"ops":[...],...}'
    detail = F.concat(F.regexp_replace(F.to_json(F.struct(F.col("key"))), r"\}$", ""), F.lit(","),
                      F.expr("substring(detail, 2)"))
    return (rows.join(F.broadcast(keys.select("rk", "run_id", "key")), "rk")
            .join(F.broadcast(times.withColumnRenamed("op", "op_index")), ["rk", "op_index"], "left")
            .select("run_id", "type", "key", "value", "op_index", "time", detail.alias("detail")))


def queue_anomalies(m: DataFrame, keys: DataFrame, partitions: int, *, stage: Any = None) -> DataFrame:
    """Every queue anomaly of the runs in `m` (from `micro_ops`), as one DataFrame.

    `stage(name, df) -> df` may materialise the tables several steps share (first reads,
    committed info ops, sightings, offsets, values, poll segments, order candidates and
    anomalies); by default they stay lazy. The committed info ops are few:
    staged, they become a small local table that every use broadcasts.
    """
    stage = stage or (lambda _name, df: df)
    first_read = stage("first_read", first_reads(m))
    read_values = first_read.select("rk", "value")
    committed = stage("committed", committed_info_ops(m, read_values))
    ms = with_status(m, committed)
    obs = stage("sightings", observations(ms))
    offsets = stage("offsets", offsets_of(obs))
    values = stage("values", values_of(obs))
    segments = stage("poll segments", poll_segments(ms))
    cands = stage("order candidates", internal_poll_pairs(ms, segments)
                  .unionByName(poll_pairs(ms, segments, keys, partitions))
                  .unionByName(send_order_pairs(send_offsets(ms, values))))
    parts = [
        inconsistent_offsets(obs, offsets),
        duplicates(obs, values),
        lost_and_unseen(ms, values, read_values),
        aborted_and_garbage_reads(ms, first_read),
        precommitted_reads(ms),
        order_anomalies(cands, offsets, stage),
    ]
    rows = parts[0]
    for p in parts[1:]:
        rows = rows.unionByName(p)
    return _named(stage("anomalies", rows), ms, keys)
