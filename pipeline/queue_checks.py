"""The Kafka queue anomalies of `checkers.queue`, computed for one run with numpy over its `ops` rows.

`pipeline.run_checks` calls `queue_anomalies(queue_frame.micro_ops(table))` in the task of each run:
runs are independent, so a run's rows never leave its task (no shuffle), and every step is
a sort, a grouping or a lookup over numpy columns (`pipeline.queue_frame`; the order checks
in `pipeline.queue_order`): no per-row Python, no generated code.

The definitions are `checkers.queue`'s (its docstring and docs/checkers-queue.md), in
its words: an op is named by its completion's index (`op`); a *committed* send is ok,
or belongs to an info op some of whose values an ok poll read; the *version order* of a
key holds the offsets and values of every poll record and of committed sends; its known
offsets are numbered densely (`rank`) and the *gap* between two offsets is the known
offsets strictly between them; a *read* is a record of an ok poll. Per type:

- `inconsistent-offsets`, `duplicate`: groupings of the (offset, value) sightings;
- `lost-write`: a committed send's value, at its (highest) offset at or below the highest
  offset read from its key, never read; `unseen`: other acknowledged sends never read;
- `G1a`: a read of a value whose send failed; `garbage-read`: a read of a value no op sent;
- `precommitted-read`: a txn read a value it sent (the first such record per op);
- `int-poll-skip`/`int-nonmonotonic-poll`, `int-send-skip`/`int-nonmonotonic-send`:
  successive records/sends of one op to a key (by micro-op position);
- `poll-skip`/`nonmonotonic-poll`: successive polls of a key by one process, where an ok
  or info assign/subscribe of the process starts a new epoch (a running count);
- `nonmonotonic-send` (and the `int-*-send` pairs): a process's ok/info sends to a key in
  order of op and position.

`queue_anomalies` returns `Anomaly` rows: `op_index` says which op shows the anomaly (its
completion time is looked up by the caller), `detail` is the checker's example object
without its key and `explanation` (added by `pipeline.results`, from the fields; fields
named `_...` are for that sentence only). `unseen` has one row per send; the result
object groups them per key as the checker does.
"""

from __future__ import annotations

import numpy as np

from pipeline.queue_frame import (
    FAIL,
    OK,
    S_COMMITTED,
    S_OK,
    SEND,
    Anomaly,
    Micro,
    Obs,
    Offsets,
    Values,
    first_reads,
    lookup,
    observations,
    offsets_of,
    order_by,
    records,
    sightings,
    values_of,
    with_status,
)
from pipeline.queue_order import (
    concat,
    internal_poll_pairs,
    order_anomalies,
    poll_pairs,
    poll_segments,
    send_order_pairs,
)


def inconsistent_offsets(m: Micro, obs: Obs, offs: Offsets) -> list[Anomaly]:
    out = []
    vals = m.values[obs.vid]
    for i in np.flatnonzero(offs.g.n >= 2):
        values, ops, second = sightings(obs, offs.g, i, vals)
        out.append(Anomaly("inconsistent-offsets", int(offs.g.rk[i]), None, second,
                           {"ops": ops, "offset": int(m.offsets[offs.g.by[i]]), "values": values}))
    return out


def duplicates(m: Micro, obs: Obs, vals: Values) -> list[Anomaly]:
    out = []
    offs = m.offsets[obs.oid]
    for i in np.flatnonzero(vals.g.n >= 2):
        offsets, ops, second = sightings(obs, vals.g, i, offs)
        v = int(m.values[vals.g.by[i]])
        out.append(Anomaly("duplicate", int(vals.g.rk[i]), v, second,
                           {"ops": ops, "value": v, "offsets": sorted(offsets)}))
    return out


def _read_bounds(m: Micro) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per rk: (has a read, highest offset an ok poll read, the first op that read it there)."""
    sel = np.flatnonzero(records(m) & (m.typ == OK))
    rk, off, op = m.rk[sel], m.off()[sel], m.op[sel]
    order, new = order_by([rk], [-off, op])
    first = order[new]
    has = np.zeros(len(m.keys), bool)
    bound = np.zeros(len(m.keys), np.int64)
    bound_op = np.zeros(len(m.keys), np.int64)
    has[rk[first]] = True
    bound[rk[first]] = off[first]
    bound_op[rk[first]] = op[first]
    return has, bound, bound_op


def lost_and_unseen(m: Micro, vals: Values, read_kv: np.ndarray) -> list[Anomaly]:
    """lost-write and unseen (unseen: acknowledged, never read, not lost; one row per send)."""
    kv = m.kv()
    w = np.flatnonzero((m.mop == SEND) & (m.vid >= 0) & np.isin(m.status, (S_OK, S_COMMITTED))
                       & ~np.isin(kv, read_kv))
    if not len(w):
        return []
    has, bound, bound_op = _read_bounds(m)
    pos, found = lookup(vals.key, kv[w])
    max_off = m.offsets[vals.max_oid[pos]] if len(vals.key) else np.zeros(len(w), np.int64)
    rk = m.rk[w]
    lost = found & has[rk] & (max_off <= bound[rk])
    out = []
    for j in np.flatnonzero(lost | (m.status[w] == S_OK)):
        i, k = int(w[j]), int(rk[j])
        v, writer = int(m.values[m.vid[i]]), int(m.op[i])
        if lost[j]:
            out.append(Anomaly("lost-write", k, v, writer, {
                "ops": [writer, int(bound_op[k])], "value": v, "offset": int(max_off[j]),
                "max_read_offset": int(bound[k]), "_acknowledged": bool(m.status[i] == S_OK)}))
        else:
            d = {"value": v, "_writer": writer}
            if has[k]:
                d["_max_read_offset"] = int(bound[k])
            out.append(Anomaly("unseen", k, v, writer, d))
    return out


def aborted_and_garbage_reads(m: Micro, read_kv: np.ndarray, rop: np.ndarray) -> list[Anomaly]:
    """G1a (a read of a value whose send failed) and garbage-read (a read of a value never sent)."""
    kv = m.kv()
    sends = (m.mop == SEND) & (m.vid >= 0)
    failed = np.flatnonzero(sends & (m.typ == FAIL))
    f_order = failed[np.argsort(kv[failed], kind="stable")]
    f_kv = kv[f_order]
    out = []
    for i in np.flatnonzero(np.isin(read_kv, f_kv)):
        k, v = divmod(int(read_kv[i]), m.nv)
        lo, hi = np.searchsorted(f_kv, read_kv[i]), np.searchsorted(f_kv, read_kv[i], side="right")
        for writer in m.op[f_order[lo:hi]].tolist():
            val = int(m.values[v])
            out.append(Anomaly("G1a", k, val, int(rop[i]), {"ops": [writer, int(rop[i])], "value": val}))
    for i in np.flatnonzero(~np.isin(read_kv, kv[sends])):
        k, v = divmod(int(read_kv[i]), m.nv)
        val = int(m.values[v])
        out.append(Anomaly("garbage-read", k, val, int(rop[i]), {"ops": [int(rop[i])], "value": val}))
    return out


def precommitted_reads(m: Micro) -> list[Anomaly]:
    """A txn op's first record (by position) of a value the same op sent."""
    txn = np.flatnonzero(m.txn)
    if not len(txn):
        return []
    sent = {(int(k), int(v), int(o)) for k, v, o, mp in zip(m.rk[txn], m.vid[txn], m.op[txn], m.mop[txn],
                                                            strict=True) if mp == SEND and v >= 0}
    first: dict[int, tuple[int, int, int]] = {}
    rec = records(m)
    for i in txn[rec[txn]].tolist():
        k, v, o = int(m.rk[i]), int(m.vid[i]), int(m.op[i])
        if (k, v, o) in sent and (o not in first or m.mop_index[i] < first[o][0]):
            first[o] = (int(m.mop_index[i]), k, v)
    return [Anomaly("precommitted-read", k, int(m.values[v]), o, {"ops": [o], "value": int(m.values[v])})
            for o, (_mi, k, v) in sorted(first.items())]


def queue_anomalies(m: Micro) -> list[Anomaly]:
    """Every queue anomaly of one run's micro-op rows (from `micro_ops`)."""
    read_kv, rop = first_reads(m)
    with_status(m, read_kv)
    obs = observations(m)
    offs = offsets_of(m, obs)
    vals = values_of(m, obs)
    segs = poll_segments(m)
    cands = concat([internal_poll_pairs(m, segs), poll_pairs(m, segs), *send_order_pairs(m, vals)])
    return [
        *inconsistent_offsets(m, obs, offs),
        *duplicates(m, obs, vals),
        *lost_and_unseen(m, vals, read_kv),
        *aborted_and_garbage_reads(m, read_kv, rop),
        *precommitted_reads(m),
        *order_anomalies(m, cands, offs),
    ]
