"""One run's keyed micro-op rows as numpy columns, and the tables the queue checks share.

`micro_ops(table)` codes the rows of a run's `ops` file that name a key (sends, polled
records, assigned keys): keys, values and offsets densely per run (`rk`, `vid`, `oid`;
value and offset codes keep their order, so a (key, value) or (key, offset) pair is one
int64 that sorts and joins fast), outcomes and micro-op kinds as small codes. On them:
the first ok read of each value, the send status of each send (`with_status`), the first
sighting of each (offset, value) in history order (`observations`), and per known offset
(`offsets_of`: its dense rank) and per value (`values_of`) groups of those sightings.
Definitions: `pipeline.queue_checks`. Everything is a sort, a grouping or a lookup over
whole columns (`order_by`, `lookup`): no per-row Python.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

SEND, POLL, ASSIGN = 0, 1, 2  # mop codes
OK, INFO, FAIL = 0, 1, 2  # type codes
S_NONE, S_OK, S_COMMITTED, S_INFO, S_FAIL = -1, 0, 1, 2, 3  # send status codes
SEQ_OP_SHIFT = 17
COLUMNS = ("process", "f", "type", "index", "time", "ret_index", "ret_time", "mop_index", "mop", "key",
           "offset", "value", "rebalanced")
MOP_CODES = {"send": SEND, "poll": POLL, "assign": ASSIGN, "subscribe": ASSIGN}


class Anomaly(NamedTuple):
    """One anomaly: its type, key code, value (or None), the op that shows it, the example."""

    type: str
    rk: int
    value: int | None
    op_index: int
    detail: dict[str, Any]


@dataclass
class Micro:
    """The keyed micro-op rows of one run as numpy columns (one entry per row).

    `rk` codes `keys`; `vid`/`oid` code `values`/`offsets` (sorted; -1 where the row has
    none); `op` is the completion index (the invoke's for an op never completed) and
    `ret_time` its time; `status` the send status (S_NONE for other rows), set by
    `with_status`.
    """

    keys: list[str]
    rk: np.ndarray
    process: np.ndarray
    op: np.ndarray
    ret_time: np.ndarray
    mop: np.ndarray
    typ: np.ndarray
    txn: np.ndarray
    mop_index: np.ndarray
    rebalanced: np.ndarray
    values: np.ndarray
    vid: np.ndarray
    offsets: np.ndarray
    oid: np.ndarray
    status: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))

    @property
    def nv(self) -> int:
        return max(1, len(self.values))

    @property
    def no(self) -> int:
        return max(1, len(self.offsets))

    def kv(self) -> np.ndarray:
        """(key, value) as one int64 per row (meaningless where vid is -1)."""
        return self.rk * self.nv + self.vid

    def off(self) -> np.ndarray:
        return self.offsets[np.maximum(self.oid, 0)] if len(self.offsets) else np.zeros(len(self.oid), np.int64)

    def val(self) -> np.ndarray:
        return self.values[np.maximum(self.vid, 0)] if len(self.values) else np.zeros(len(self.vid), np.int64)


def _ints(col: pa.ChunkedArray, null: int = -1) -> np.ndarray:
    return pc.fill_null(col, null).to_numpy().astype(np.int64)


def _codes(col: pa.ChunkedArray) -> tuple[np.ndarray, list[str]]:
    """Dictionary codes of a string column (-1 for null) and the dictionary."""
    enc = pc.dictionary_encode(col).combine_chunks()
    return pc.fill_null(enc.indices, -1).to_numpy().astype(np.int64), enc.dictionary.to_pylist()


def _dense(col: pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """(sorted distinct values, per-row code with -1 for null) of an int64 column."""
    valid = pc.is_valid(col).to_numpy(zero_copy_only=False)
    x = pc.fill_null(col, 0).to_numpy()
    uniq, inv = np.unique(x[valid], return_inverse=True)
    code = np.full(len(x), -1, np.int64)
    code[valid] = inv
    return uniq.astype(np.int64), code


def micro_ops(table: pa.Table) -> Micro:
    """The keyed micro-op rows (sends, polled records, assigned keys) of one run's `ops` table."""
    t = table.select(COLUMNS).filter(pc.and_(pc.is_valid(table["mop"]), pc.is_valid(table["key"])))
    rk, keys = _codes(t["key"])
    mop_c, mop_names = _codes(t["mop"])
    mop = np.array([MOP_CODES.get(n, -1) for n in mop_names] + [-1], np.int64)[mop_c]
    typ_c, typ_names = _codes(t["type"])
    typ = np.array([{"ok": OK, "fail": FAIL}.get(n, INFO) for n in typ_names] + [INFO], np.int64)[typ_c]
    f_c, f_names = _codes(t["f"])
    txn = np.array([n == "txn" for n in f_names] + [False])[f_c]
    values, vid = _dense(t["value"])
    offsets, oid = _dense(t["offset"])
    return Micro(keys=keys, rk=rk, process=_ints(t["process"]),
                 op=pc.coalesce(t["ret_index"], t["index"]).to_numpy().astype(np.int64),
                 ret_time=pc.coalesce(t["ret_time"], t["time"]).to_numpy().astype(np.int64),
                 mop=mop, typ=typ, txn=txn, mop_index=_ints(t["mop_index"]),
                 rebalanced=pc.fill_null(t["rebalanced"], False).to_numpy(zero_copy_only=False).astype(bool),
                 values=values, vid=vid, offsets=offsets, oid=oid,
                 status=np.full(len(rk), S_NONE, np.int64))


def order_by(keys: list[np.ndarray], then: list[np.ndarray] = ()) -> tuple[np.ndarray, np.ndarray]:
    """(order, starts): rows sorted by `keys` then `then` (first array most significant), and
    the mask (in sorted order) of the first row of each group of equal `keys`."""
    order = np.lexsort([*reversed(then), *reversed(keys)]) if keys else np.zeros(0, np.int64)
    new = np.zeros(len(order), bool)
    if len(order):
        new[0] = True
        for k in keys:
            s = k[order]
            new[1:] |= s[1:] != s[:-1]
    return order, new


def lookup(sorted_keys: np.ndarray, want: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(positions, found) of `want` in the sorted array `sorted_keys`."""
    pos = np.searchsorted(sorted_keys, want)
    pos_c = np.minimum(pos, max(len(sorted_keys) - 1, 0))
    found = (pos < len(sorted_keys)) & (sorted_keys[pos_c] == want) if len(sorted_keys) else np.zeros(len(want), bool)
    return pos_c, found


def seq_op(seq: np.ndarray | int) -> Any:
    return (seq >> SEQ_OP_SHIFT) & ((1 << 41) - 1)


def records(m: Micro) -> np.ndarray:
    """Mask of poll records with an offset and a value (polls of any outcome)."""
    return (m.mop == POLL) & (m.oid >= 0) & (m.vid >= 0)


def first_reads(m: Micro) -> tuple[np.ndarray, np.ndarray]:
    """(kv, rop): each (key, value) read by an ok poll (sorted), with the first ok poll that read it."""
    sel = np.flatnonzero(records(m) & (m.typ == OK))
    kv, op = m.kv()[sel], m.op[sel]
    order, new = order_by([kv], [op])
    return kv[order][new], op[order][new]


def with_status(m: Micro, read_kv: np.ndarray) -> None:
    """Set `m.status` of send rows: S_OK, S_FAIL, S_COMMITTED (an info op some of whose sent
    values an ok poll read) or S_INFO."""
    send = m.mop == SEND
    info_sends = send & (m.typ == INFO) & (m.vid >= 0)
    committed = np.unique(m.op[info_sends & np.isin(m.kv(), read_kv)])
    st = np.full(len(m.rk), S_NONE, np.int64)
    st[send] = S_INFO
    st[send & np.isin(m.op, committed)] = S_COMMITTED
    st[send & (m.typ == FAIL)] = S_FAIL
    st[send & (m.typ == OK)] = S_OK
    m.status = st


@dataclass
class Obs:
    """First sighting (`seq`) of each (key, offset, value) in history order, and per-offset /
    per-value groups of them."""

    rk: np.ndarray
    oid: np.ndarray
    vid: np.ndarray
    seq: np.ndarray


def observations(m: Micro) -> Obs:
    """Sightings: every poll record, ok sends with an offset, and committed info sends with an
    offset (the checker adds those at the end). `seq` orders sightings as the checker meets
    them, in one long: phase (1 bit), op (41 bits), poll after send within an op (1 bit),
    micro-op position (16 bits); `seq_op(seq)` is the op."""
    send_seen = np.isin(m.status, (S_OK, S_COMMITTED)) & (m.oid >= 0) & (m.vid >= 0)
    sel = np.flatnonzero(records(m) | send_seen)
    phase = (m.status[sel] == S_COMMITTED).astype(np.int64)
    seq = ((phase << 58) + (m.op[sel] << SEQ_OP_SHIFT) + ((m.mop[sel] == POLL).astype(np.int64) << 16)
           + np.minimum(m.mop_index[sel], 65535))
    rk, oid, vid = m.rk[sel], m.oid[sel], m.vid[sel]
    order, new = order_by([rk, oid, vid], [seq])
    first = order[new]
    return Obs(rk[first], oid[first], vid[first], seq[first])


@dataclass
class Groups:
    """Sightings sorted by (rk, `by`, seq, other) in `order`; per group of (rk, by): first
    position `start`, size `n`, and the group's keys."""

    order: np.ndarray
    start: np.ndarray
    n: np.ndarray
    rk: np.ndarray
    by: np.ndarray


def _groups(obs: Obs, by: np.ndarray, other: np.ndarray) -> Groups:
    order, new = order_by([obs.rk, by], [obs.seq, other])
    start = np.flatnonzero(new)
    n = np.diff(np.append(start, len(order)))
    return Groups(order, start, n, obs.rk[order][start], by[order][start])


@dataclass
class Offsets:
    """Per known offset of a key (sorted by key, offset): values seen there, the first
    sighted one, its dense rank in the key (from 0); `key` = rk * no + oid."""

    g: Groups
    key: np.ndarray
    first_vid: np.ndarray
    rank: np.ndarray
    rk_start: np.ndarray  # rk -> position of its first offset in these arrays


def offsets_of(m: Micro, obs: Obs) -> Offsets:
    g = _groups(obs, obs.oid, obs.vid)
    first_vid = obs.vid[g.order][g.start]
    rk_start = np.searchsorted(g.rk, np.arange(len(m.keys) + 1))
    rank = np.arange(len(g.rk)) - rk_start[g.rk]
    return Offsets(g, g.rk * m.no + g.by, first_vid, rank, rk_start)


@dataclass
class Values:
    """Per value of a key seen at an offset (sorted by key, value): at how many offsets, the
    first sighted and the highest (as offset codes); `key` = rk * nv + vid."""

    g: Groups
    key: np.ndarray
    first_oid: np.ndarray
    max_oid: np.ndarray


def values_of(m: Micro, obs: Obs) -> Values:
    g = _groups(obs, obs.vid, obs.oid)
    oids = obs.oid[g.order]
    max_oid = np.maximum.reduceat(oids, g.start) if len(g.start) else np.zeros(0, np.int64)
    return Values(g, g.rk * m.nv + g.by, oids[g.start], max_oid)


def sightings(obs: Obs, g: Groups, i: int, what: np.ndarray) -> tuple[list[int], list[int], int]:
    """Group `i`'s sightings in order: (what, sorted distinct ops, op of the second sighting)."""
    rows = g.order[g.start[i]:g.start[i] + g.n[i]]
    ops = seq_op(obs.seq[rows])
    return what[rows].tolist(), sorted(set(ops.tolist())), int(ops[1])
