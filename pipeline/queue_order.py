"""The order checks of the queue anomalies for one run: successive polls and sends of a key.

Candidate pairs (a, b) of offsets of one key, of four kinds (`KINDS`), are found with
whole-column sorts (`pipeline.queue_frame.order_by`) and shifts, then checked together
against the version order's dense ranks: b <= a is a nonmonotonic type, a gap (a rank
delta over 1, b > a + 1) a skip type (`ORDER_TYPES`). Definitions: `pipeline.queue_checks`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from pipeline.queue_frame import (
    ASSIGN,
    INFO,
    OK,
    S_INFO,
    SEND,
    Anomaly,
    Micro,
    Offsets,
    Values,
    lookup,
    order_by,
    records,
)

SKIPPED_SHOWN = 10  # checkers.queue.analysis.SKIPPED_SHOWN
# Order checks: pairs (a, b) of offsets of one key, of four kinds, checked together.
KINDS = ("int-poll", "int-send", "poll", "send")
ORDER_TYPES = {  # kind -> (type when b <= a, type when a gap lies between a and b)
    "int-poll": ("int-nonmonotonic-poll", "int-poll-skip"),
    "int-send": ("int-nonmonotonic-send", "int-send-skip"),
    "poll": ("nonmonotonic-poll", "poll-skip"),
    "send": ("nonmonotonic-send", None),
}


class Candidates(NamedTuple):
    """Order-check candidate pairs (a, b) of offsets of one key (columns; -1: none)."""

    kind: np.ndarray  # index into KINDS
    rk: np.ndarray
    op: np.ndarray
    a: np.ndarray
    b: np.ndarray
    process: np.ndarray
    pop: np.ndarray
    v1: np.ndarray  # value codes (vid) for send kinds
    v2: np.ndarray


def _cands(kind: str, sel: np.ndarray, rk: np.ndarray, op: np.ndarray, a: np.ndarray, b: np.ndarray,
           process: np.ndarray | None = None, pop: np.ndarray | None = None, v1: np.ndarray | None = None,
           v2: np.ndarray | None = None) -> Candidates:
    """The irregular pairs among the rows `sel` (b <= a; for kinds with a skip type also b > a + 1)."""
    irregular = b <= a
    if ORDER_TYPES[kind][1] is not None:
        irregular = irregular | (b > a + 1)
    s = sel & irregular
    none = np.full(int(s.sum()), -1, np.int64)
    return Candidates(np.full(len(none), KINDS.index(kind)), rk[s], op[s], a[s], b[s],
                      *[x[s] if x is not None else none for x in (process, pop, v1, v2)])


@dataclass
class Segments:
    """One entry per (poll op, key) with records: first and last offset, outcome,
    `irregular`, `rebalanced`; `rows` are the records sorted by (rk, op, position) and
    `seg` the segment of each."""

    rk: np.ndarray
    process: np.ndarray
    op: np.ndarray
    o0: np.ndarray
    o1: np.ndarray
    typ: np.ndarray
    irregular: np.ndarray
    rebalanced: np.ndarray
    rows: np.ndarray
    seg: np.ndarray


def poll_segments(m: Micro) -> Segments:
    """A segment is regular when its records sit at consecutive micro-op positions and
    consecutive offsets (offset - position constant): nothing inside it can be an int-poll
    anomaly, so only irregular segments (few) get the record-by-record look. Keys in the
    op's rebalance-log are exempt from those checks, as in the checker."""
    rec = np.flatnonzero(records(m))
    order, new = order_by([m.rk[rec], m.op[rec]], [m.mop_index[rec]])
    rows = rec[order]
    start = np.flatnonzero(new)
    end = np.append(start[1:], len(rows)) - 1
    off, mi = m.off()[rows], m.mop_index[rows]
    if len(rows):
        d = off - mi
        irregular = ((np.maximum.reduceat(d, start) != np.minimum.reduceat(d, start))
                     | (mi[end] - mi[start] + 1 != end - start + 1))
        reb = np.maximum.reduceat(m.rebalanced[rows].astype(np.int8), start) > 0
    else:
        irregular = reb = np.zeros(0, bool)
    first = rows[start]
    return Segments(m.rk[first], m.process[first], m.op[first], off[start], off[end], m.typ[first], irregular,
                    reb, rows, np.cumsum(new) - 1)


def internal_poll_pairs(m: Micro, s: Segments) -> Candidates:
    """Successive records of a key within one op, in the irregular segments."""
    off = m.off()[s.rows]
    same = np.zeros(len(s.rows), bool)
    same[1:] = s.seg[1:] == s.seg[:-1]
    odd = (s.irregular & ~s.rebalanced)[s.seg] if len(s.rows) else same
    a = np.roll(off, 1)
    return _cands("int-poll", same & odd, m.rk[s.rows], m.op[s.rows], a, off)


def send_order_pairs(m: Micro, vals: Values) -> tuple[Candidates, Candidates]:
    """Successive ok/info sends of a process to a key: within one op (int-send) or from one op
    to the next (send: the previous op's last send, this op's first). A send lands at its
    own offset (not for uncommitted info sends), else where the version order first shows
    its value."""
    sel = np.flatnonzero((m.mop == SEND) & (m.vid >= 0) & ((m.typ == OK) | (m.typ == INFO)))
    landed = np.where((m.status[sel] != S_INFO) & (m.oid[sel] >= 0), m.off()[sel], -1)
    has = landed >= 0
    if (~has).any() and len(vals.key):
        miss = np.flatnonzero(~has)
        pos, found = lookup(vals.key, m.kv()[sel[miss]])
        landed[miss[found]] = m.offsets[vals.first_oid[pos[found]]]
        has[miss[found]] = True
    order, new = order_by([m.rk[sel], m.process[sel]], [m.op[sel], m.mop_index[sel]])
    rows, landed, has = sel[order], landed[order], has[order]
    rk, op, vid = m.rk[rows], m.op[rows], m.vid[rows]
    pair = ~new & has & np.roll(has, 1)
    prev_op, a, v1 = np.roll(op, 1), np.roll(landed, 1), np.roll(vid, 1)
    same = prev_op == op
    return (_cands("int-send", pair & same, rk, op, a, landed, v1=v1, v2=vid),
            _cands("send", pair & ~same, rk, op, a, landed, process=m.process[rows], pop=prev_op, v1=v1, v2=vid))


def poll_pairs(m: Micro, s: Segments) -> Candidates:
    """A poll of a key and the last ok poll of the same process that read it, in one epoch.

    An ok or info assign/subscribe of the process starts a new epoch for every key (the
    assign ops are crossed with the keys the process polled, a small set).
    """
    asg = (m.mop == ASSIGN) & ((m.typ == OK) | (m.typ == INFO))
    a_proc, a_op = np.unique(np.stack([m.process[asg], m.op[asg]]), axis=1) if asg.any() else (
        np.zeros(0, np.int64), np.zeros(0, np.int64))
    touched = np.unique(np.stack([s.rk, s.process]), axis=1) if len(s.rk) else np.zeros((2, 0), np.int64)
    # resets: every (key, process) the process polled x every assign op of the process
    p_order = np.argsort(a_proc, kind="stable")
    a_proc, a_op = a_proc[p_order], a_op[p_order]
    lo, hi = np.searchsorted(a_proc, touched[1]), np.searchsorted(a_proc, touched[1], side="right")
    reps = hi - lo
    r_rk, r_proc = np.repeat(touched[0], reps), np.repeat(touched[1], reps)
    r_op = a_op[np.concatenate([np.arange(x, y) for x, y in zip(lo, hi, strict=True)])] if reps.sum() else \
        np.zeros(0, np.int64)
    n = len(s.rk)
    rk, proc, op = (np.concatenate([s.rk, r_rk]), np.concatenate([s.process, r_proc]),
                    np.concatenate([s.op, r_op]))
    is_assign = np.arange(len(rk)) >= n
    order, new = order_by([rk, proc], [op])
    is_assign, new = is_assign[order], new
    seg = np.where(is_assign, 0, order)  # segment index of poll rows
    okrow = ~is_assign & (s.typ[seg] == OK)
    idx = np.arange(len(order))
    last_ok = np.maximum.accumulate(np.where(okrow, idx, -1)) if len(idx) else idx
    prev = np.roll(last_ok, 1)
    if len(prev):
        prev[0] = -1
    group_start = np.maximum.accumulate(np.where(new, idx, 0)) if len(idx) else idx
    epoch = np.cumsum(is_assign)
    ok = ~is_assign & (prev >= group_start) & (epoch[np.maximum(prev, 0)] == epoch)
    pseg = seg[np.maximum(prev, 0)]
    return _cands("poll", ok, rk[order], op[order], s.o1[pseg], s.o0[seg], process=proc[order], pop=s.op[pseg])


def concat(parts: list[Candidates]) -> Candidates:
    return Candidates(*[np.concatenate([getattr(p, f) for p in parts]) for f in Candidates._fields])


def _ranks(m: Micro, offs: Offsets, rk: np.ndarray, o: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(rank, known) of offsets `o` of keys `rk`."""
    oid, known = lookup(m.offsets, o)
    pos, found = lookup(offs.key, rk * m.no + oid)
    return offs.rank[pos] if len(offs.key) else np.zeros(len(o), np.int64), known & found


def order_anomalies(m: Micro, c: Candidates, offs: Offsets) -> list[Anomaly]:
    """The anomalies among order candidates (both offsets known): a gap (delta of the ranks > 1)
    or going back; skips name the first values in their gap."""
    r1, k1 = _ranks(m, offs, c.rk, c.a)
    r2, k2 = _ranks(m, offs, c.rk, c.b)
    delta = r2 - r1
    has_skip = np.array([ORDER_TYPES[k][1] is not None for k in KINDS])[c.kind] if len(c.kind) else \
        np.zeros(0, bool)
    skip = (c.b > c.a + 1) & (delta > 1) & has_skip
    out = []
    for i in np.flatnonzero(k1 & k2 & ((c.b <= c.a) | skip)):
        kind = KINDS[c.kind[i]]
        op, a, b = int(c.op[i]), int(c.a[i]), int(c.b[i])
        between, sends = kind in ("poll", "send"), kind in ("int-send", "send")
        d: dict[str, Any] = {"ops": [int(c.pop[i]), op] if between else [op]}
        if between:
            d["process"] = int(c.process[i])
        if sends:
            d["values"] = [int(m.values[c.v1[i]]), int(m.values[c.v2[i]])]
        d["offsets"] = [a, b]
        d["delta"] = int(delta[i])
        if skip[i]:
            first = offs.rk_start[c.rk[i]] + r1[i]
            gap = offs.first_vid[first + 1:first + min(int(delta[i]), SKIPPED_SHOWN + 1)]
            d["skipped"] = m.values[gap].tolist()
        typ = ORDER_TYPES[kind][1 if skip[i] else 0]
        out.append(Anomaly(typ, int(c.rk[i]), d["values"][1] if sends else None, op, d))
    return out
