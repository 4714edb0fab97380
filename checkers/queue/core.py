"""The queue checker's single streaming pass: compact per-key and per-process state.

`QueuePass.feed(events)` reads client and nemesis events in history order and keeps only
what the anomaly definitions (see `checkers.queue`) need:

- per key, the version order as two dicts (offset -> value, value -> first offset) fed by
  acknowledged sends and by every poll, plus conflicts (inconsistent offsets) and values
  seen at two offsets (duplicates);
- per key, a list indexed by offset of the `[offset, value]` pairs ok polls have read:
  a poll that re-reads records already read compares a list slice in C and is done
  (the common case: consumers re-read the same prefix many times);
- per key, every send's writer op and outcome, the ack time of acknowledged sends and the
  first time an ok poll returned each value (for unseen, lost-write, G1a, realtime lag);
- per process, the last offset read (and sent) per key for poll-skip/nonmonotonic checks;
  skips are only *candidates* here (whether a known offset lies in the gap is decided by
  `checkers.queue.analysis` once the whole version order is known);
- txn and multi-send ops, which alone can form dependency cycles (G0/G1c).

Everything else (anomaly classification, explanations) happens in `analysis.finish`.
Bad events raise `InputError` with the position of the event; callers map it to a line.
"""

from __future__ import annotations

import time as _time
from collections.abc import Callable, Iterable
from typing import Any

from checkers.optable import FAIL, INFO, OK, TYPE_CODE, OpTable
from contracts.errors import InputError
from contracts.pairing import NEMESIS, Pairing

GAP_LIMIT = 1 << 16  # offsets further than this past the read-list end skip the accelerator list


class Bad(Exception):
    """A bad event found during the pass (message only; the pass adds the position)."""


class Timeout(Exception):
    """The pass ran past its deadline."""


class QueuePass:
    """State of one streaming pass over a queue history (see the module docstring)."""

    def __init__(self, *, deadline: float | None = None, max_examples: int = 32):
        self.deadline = deadline
        self.max_examples = max_examples
        self.events = 0  # events consumed
        self.last_time = 0
        # version order
        self.off2val: dict[str, dict[int, Any]] = {}
        self.val2off: dict[str, dict[Any, int]] = {}
        self.off_op: dict[str, dict[int, int]] = {}  # op that first showed each offset
        self.conflicts: dict[tuple[str, int], dict[Any, int]] = {}  # (k, offset) -> {value: op}
        self.dups: dict[tuple[str, Any], dict[int, int]] = {}  # (k, value) -> {offset: op}
        # reads by ok polls
        self.okl: dict[str, list[Any]] = {}
        self.read_t: dict[str, dict[Any, int]] = {}  # value -> completion time of first ok read
        self.read_op: dict[str, dict[Any, int]] = {}  # value -> op of first ok read
        self.max_read: dict[str, list[int]] = {}  # k -> [highest offset read by an ok poll, op]
        # sends
        self.writer: dict[str, dict[Any, int]] = {}  # value -> op index << 2 | outcome
        self.ack_t: dict[str, dict[Any, int]] = {}  # value -> ack time (ok sends)
        self.failed: dict[str, list[Any]] = {}
        self.info_sends: list[tuple[int, str, Any, int | None]] = []  # (op, k, v, offset)
        self.op_process: dict[int, Any] = {}  # op -> process, for ops that appear in examples
        # per process
        self.pairing = Pairing()  # open invokes; positions are event positions in the pass
        # process -> key -> [next offset (last one an ok poll read + 1), that op, the key's read list]
        self.ppos: dict[Any, dict[str, list[Any]]] = {}
        self.psend: dict[Any, dict[str, tuple[int | None, Any, int]]] = {}
        # candidates and direct findings
        self.poll_skip_c: list[tuple[str, int, int, int, int, Any]] = []
        self.nm_poll: list[tuple[str, int, int, int, int, Any]] = []
        self.int_poll_skip_c: list[tuple[str, int, int, int]] = []
        self.int_nm_poll: list[tuple[str, int, int, int]] = []
        self.send_pairs: list[tuple[str, int | None, Any, int, int | None, Any, int, Any]] = []
        self.int_sends: list[tuple[int, str, list[tuple[int | None, Any]]]] = []
        self.precommitted: list[tuple[int, str, Any]] = []
        # txn / multi-send ops for dependency cycles: op -> (writes, reads, outcome)
        self.graph_ops: dict[int, tuple[list[tuple[str, Any]], list[tuple[str, Any]], int]] = {}
        self.nemesis: list[dict[str, Any]] = []
        self.table = OpTable()

    # ------------------------------------------------------------------ the pass

    def feed(self, events: Iterable[dict[str, Any]], where: Callable[[int], tuple[str | None, int | None]]
             ) -> None:
        """Consume `events`; `where(position)` names the (path, line) of a bad event."""
        self.pairing.path = where(0)[0]
        self.pairing.line_of = lambda pos: where(pos)[1]
        try:
            self._feed(events)
        except Bad as e:
            path, line = where(self.events - 1)
            raise InputError(str(e), path, line) from None
        except (KeyError, TypeError, ValueError, IndexError, AttributeError) as e:
            ev = self._current
            msg = diagnose(ev)
            if msg is None:
                raise
            path, line = where(self.events - 1)
            raise InputError(msg, path, line) from e

    _current: Any = None

    def _feed(self, events: Iterable[dict[str, Any]]) -> None:  # noqa: C901 - the hot loop, kept flat
        invoke, complete, general = self.pairing.invoke, self.pairing.complete, self._general
        ppos_all, psend_all, ok_poll = self.ppos, self.psend, self._ok_poll
        writer, ack_t, send_pairs, observe = self.writer, self.ack_t, self.send_pairs, self.observe
        tab = self.table
        tab_add, f_codes = tab.data.extend, tab._f_code
        deadline, n, last_time = self.deadline, self.events, self.last_time
        ev: Any = None
        try:
            for ev in events:
                n += 1
                if not (n & 0x3FFF) and deadline is not None and _time.monotonic() > deadline:
                    raise Timeout
                p = ev["process"]
                typ = ev["type"]
                if p == NEMESIS:
                    if typ not in ("invoke", "ok", "fail", "info") or ev["f"].__class__ is not str:
                        raise Bad(diagnose(ev) or "bad nemesis event")
                    self.nemesis.append(ev)
                    continue
                if typ == "invoke":
                    invoke(ev, n - 1)
                    continue
                inv, inv_pos = complete(ev, n - 1)
                f = ev["f"]
                tc = TYPE_CODE[typ]
                idx = ev.get("index", n - 1)
                t = ev.get("time", idx)
                t0 = inv.get("time")
                if t0 is None:
                    t0 = inv.get("index", inv_pos)
                c = f_codes.get(f)
                if c is None:
                    c = tab.f_code(f)
                tab_add((p, c, tc, t0, t, idx))
                if t > last_time:
                    last_time = t
                if f == "poll":
                    val = ev.get("value")
                    if tc == OK and val.__class__ is list and len(val) == 1 and len(val[0]) == 2 and (
                            len(ev) <= 6 or ("rebalance-log" not in ev and "rebalance_log" not in ev)):
                        mop = val[0]
                        if mop[0] != "poll":
                            raise Bad(f"a poll op's micro-op is {mop[0]!r}, not 'poll'")
                        reads = mop[1]
                        if reads:
                            ok_poll(p, reads, idx, t)
                    elif tc != FAIL or val is not None:
                        general(p, f, tc, idx, t, ev, inv)
                elif f == "send":
                    val = ev.get("value")
                    x = None
                    if tc == OK and val.__class__ is list and len(val) == 1:
                        mop = val[0]
                        if mop.__class__ is list and len(mop) == 3 and mop[0] == "send":
                            x = mop[2]
                    if x.__class__ is list and len(x) == 2 and x[0].__class__ is int and x[0] >= 0 \
                            and mop[1].__class__ is str and (x[1].__class__ is int or x[1].__class__ is str):
                        # the common case: one acknowledged send with its offset
                        k = mop[1]
                        o, v = x
                        w = writer.get(k)
                        if w is None or v in w:
                            general(p, f, tc, idx, t, ev, inv)
                        else:
                            w[v] = idx << 2
                            ack_t[k][v] = t
                            observe(k, o, v, idx)
                            ps = psend_all.get(p)
                            if ps is None:
                                ps = psend_all[p] = {}
                            else:
                                prev_s = ps.get(k)
                                if prev_s is not None:
                                    send_pairs.append((k, prev_s[0], prev_s[1], prev_s[2], o, v, idx, p))
                            ps[k] = (o, v, idx)
                    else:
                        general(p, f, tc, idx, t, ev, inv)
                elif f == "txn":
                    general(p, f, tc, idx, t, ev, inv)
                elif (f == "assign" or f == "subscribe") and tc != FAIL:
                    # a new assignment: consecutive-poll checks start afresh
                    ppos_all.pop(p, None)
                if tc == INFO:  # the process is over: drop its state
                    ppos_all.pop(p, None)
                    psend_all.pop(p, None)
            ev = None
        finally:
            self.events = n
            self.last_time = last_time
            self._current = ev

    def finish_open(self, where: Callable[[int], tuple[str | None, int | None]]) -> None:
        """Ops never completed are indeterminate: treat them as `info` completions."""
        for inv, pos in self.pairing.never_completed():
            p = inv["process"]
            f = inv["f"]
            idx = inv.get("index", pos)
            t = inv.get("time", idx)
            self.table.add(p, f, INFO, t, None, idx)
            if f not in ("send", "txn"):
                continue
            try:
                self._general(p, f, INFO, idx, t, {"value": None}, inv)
            except Bad as e:
                path, line = where(pos)
                raise InputError(str(e), path, line) from None
            except (KeyError, TypeError, ValueError, IndexError, AttributeError) as e:
                msg = diagnose(inv)
                if msg is None:
                    raise
                path, line = where(pos)
                raise InputError(msg, path, line) from e

    # ------------------------------------------------------------------ helpers

    def _general(self, p: Any, f: str, tc: int, idx: int, t: int, ev: dict[str, Any],
                 inv: dict[str, Any]) -> None:
        """Any send/poll/txn completion: micro-op by micro-op."""
        val = ev.get("value")
        if val is None:  # an info/fail completion may leave the value out: use the invoke's
            val = inv.get("value")
        if val.__class__ is not list:
            raise Bad(f"{f} value must be a list of micro-ops, not {type(val).__name__}")
        sends: list[tuple[str, int | None, Any]] = []
        reads: list[dict[str, Any]] = []
        for mop in val:
            if mop.__class__ is not list or not mop:
                raise Bad(f"bad micro-op {mop!r}")
            kind = mop[0]
            if kind != f and f != "txn" and kind in ("send", "poll"):
                raise Bad(f"a {f} op's micro-op is {kind!r}, not {f!r} (mixed micro-ops need f \"txn\")")
            if kind == "send":
                if len(mop) != 3:
                    raise Bad(f"bad send micro-op {mop!r} (expected [\"send\", key, value])")
                k = mop[1]
                x = mop[2]
                if x.__class__ is list:
                    if len(x) != 2:
                        raise Bad(f"bad send result {x!r} (expected [offset, value])")
                    o, v = x
                    if o is not None and o.__class__ is not int:
                        raise Bad(f"bad offset {o!r} of key {k!r}")
                    if o is not None and o < 0:  # Kafka clients report -1 for an unknown offset
                        o = None
                else:
                    o, v = None, x
                if k.__class__ is not str:
                    raise Bad(f"bad key {k!r} (keys are strings)")
                if v.__class__ is not int and v.__class__ is not str:
                    raise Bad(f"bad value {v!r} of key {k!r} (values are integers or strings)")
                sends.append((k, o, v))
            elif kind == "poll":
                if len(mop) >= 2 and mop[1] is not None:
                    r = mop[1]
                    if r.__class__ is not dict:
                        raise Bad(f"bad poll result {r!r} (expected an object of key: [[offset, value], ...])")
                    reads.append(r)
            else:
                raise Bad(f"unknown micro-op {kind!r} (expected send or poll)")
        if sends:
            self._sends(p, f, tc, idx, t, sends)
        if reads:
            self._reads(p, tc, idx, t, reads, ev)
        if sends and (f == "txn" or len(sends) > 1):
            rd: list[tuple[str, Any]] = [(k, rec[1]) for r in reads for k, recs in r.items() for rec in recs]
            wr = [(k, v) for k, _o, v in sends]
            if tc != FAIL:
                self.graph_ops[idx] = (wr, rd, tc)
            if rd:
                mine = set(wr)
                for kv in rd:
                    if kv in mine:
                        self.precommitted.append((idx, kv[0], kv[1]))
                        break
            self.op_process[idx] = p

    def _sends(self, p: Any, f: str, tc: int, idx: int, t: int, sends: list[tuple[str, int | None, Any]]
               ) -> None:
        writer = self.writer
        per_key: dict[str, list[tuple[int | None, Any]]] | None = None
        if len(sends) > 1:
            per_key = {}
        psend = self.psend.get(p) if tc != FAIL else None
        if psend is None and tc != FAIL:
            psend = self.psend[p] = {}
        firsts: dict[str, tuple[int | None, Any]] = {}
        for k, o, v in sends:
            w = writer.get(k)
            if w is None:
                w = writer[k] = {}
                self.ack_t[k] = {}
            if v in w:
                raise Bad(f"value {v!r} of key {k!r} is sent twice (first by op {w[v] >> 2}); "
                          f"values must be unique per key")
            w[v] = idx << 2 | tc
            if tc == OK:
                self.ack_t[k][v] = t
                if o is not None:
                    self.observe(k, o, v, idx)
            elif tc == INFO:
                self.info_sends.append((idx, k, v, o))
            else:
                self.failed.setdefault(k, []).append(v)
            if per_key is not None:
                per_key.setdefault(k, []).append((o, v))
            if k not in firsts:
                firsts[k] = (o, v)
        if per_key is not None:
            for k, lst in per_key.items():
                if len(lst) > 1 and tc != FAIL:
                    self.int_sends.append((idx, k, lst))
        if tc == FAIL or psend is None:
            return
        self.op_process[idx] = p
        for k, (o, v) in firsts.items():
            prev = psend.get(k)
            if prev is not None:
                self.send_pairs.append((k, prev[0], prev[1], prev[2], o, v, idx, p))
        if per_key is None:
            k, o, v = sends[0]
            psend[k] = (o, v, idx)
        else:
            for k, lst in per_key.items():
                o, v = lst[-1]
                psend[k] = (o, v, idx)

    def _reads(self, p: Any, tc: int, idx: int, t: int, reads: list[dict[str, Any]], ev: dict[str, Any]
               ) -> None:
        """The general read path: several poll micro-ops, non-ok polls, rebalance logs."""
        rebalanced: set[str] = set()
        rlog = ev.get("rebalance-log", ev.get("rebalance_log"))
        if rlog:
            if rlog.__class__ is not list:
                raise Bad("rebalance-log must be a list of {\"keys\": [...]} objects")
            for entry in rlog:
                rebalanced.update(entry.get("keys") or () if entry.__class__ is dict else ())
        ok = tc == OK
        first: dict[str, int] = {}
        last: dict[str, int] = {}
        for r in reads:
            for k, recs in r.items():
                if recs.__class__ is not list:
                    raise Bad(f"bad records {recs!r} of key {k!r} (expected [[offset, value], ...])")
                if not recs:
                    continue
                prev_last = last.get(k)
                nl = self._slow_reads(k, recs, idx, t, ok, prev_last, rebalanced, p)
                if k not in first:
                    first[k] = recs[0][0]
                last[k] = nl
        if not first:
            return
        ppos = self.ppos.get(p)
        for k, o0 in first.items():
            st = ppos.get(k) if ppos is not None else None
            if st is not None:
                prev = st[0] - 1
                if o0 <= prev:
                    self.nm_poll.append((k, prev, o0, st[1], idx, p))
                elif o0 > prev + 1:
                    self.poll_skip_c.append((k, prev, o0, st[1], idx, p))
        if ok:
            if ppos is None:
                ppos = self.ppos[p] = {}
            for k, o1 in last.items():
                st = ppos.get(k)
                if st is None:
                    ppos[k] = [o1 + 1, idx, self.okl[k]]
                else:
                    st[0] = o1 + 1
                    st[1] = idx

    def _ok_poll(self, p: Any, reads: dict[str, Any], idx: int, t: int) -> None:
        """The reads of an ok poll op with one micro-op and no rebalance log (the common case)."""
        ppos = self.ppos.get(p)
        if ppos is None:
            ppos = self.ppos[p] = {}
        okl = self.okl
        # Fast paths: every record read before (the read list holds each [offset, value] at
        # its offset, so equal slices mean the same records, contiguous) and, for a key this
        # process already reads, starting exactly where it left off.
        for k, recs in reads.items():
            if not recs:
                continue
            st = ppos.get(k)
            o0 = recs[0][0]
            if st is not None:
                if o0 == st[0]:
                    nr = len(recs)
                    if st[2][o0:o0 + nr] == recs:
                        st[0] = o0 + nr
                        st[1] = idx
                        continue
            else:
                lst = okl.get(k)
                if lst is not None and o0.__class__ is int:
                    nr = len(recs)
                    if lst[o0:o0 + nr] == recs and o0 >= 0:
                        ppos[k] = [o0 + nr, idx, lst]
                        continue
            self._poll_key(p, ppos, st, k, recs, idx, t)

    def _poll_key(self, p: Any, ppos: dict[str, list[Any]], st: list[Any] | None, k: str, recs: list[Any],
                  idx: int, t: int) -> None:
        """One key of an ok single-poll op, when the fast path did not apply."""
        self._slow_reads(k, recs, idx, t, True, None, None, p)
        o0 = recs[0][0]
        o1 = recs[-1][0]
        if st is None:
            ppos[k] = [o1 + 1, idx, self.okl[k]]
            return
        prev = st[0] - 1
        if o0 <= prev:
            self.nm_poll.append((k, prev, o0, st[1], idx, p))
        elif o0 > prev + 1:
            self.poll_skip_c.append((k, prev, o0, st[1], idx, p))
        st[0] = o1 + 1
        st[1] = idx

    def _slow_reads(self, k: str, recs: list[Any], idx: int, t: int, ok: bool, last: int | None,
                    rebalanced: set[str] | None, p: Any) -> int:
        """Records of one key in one poll, one by one. Returns the last offset."""
        if k.__class__ is not str:
            raise Bad(f"bad key {k!r}")
        lst = self.okl.get(k)
        if lst is None:
            lst = self.okl[k] = []
            self.read_t.setdefault(k, {})
            self.read_op.setdefault(k, {})
        check_int = not (rebalanced and k in rebalanced)
        rt = self.read_t[k]
        rop = self.read_op[k]
        observe = self.observe
        for rec in recs:
            if rec.__class__ is not list or len(rec) != 2:
                raise Bad(f"bad record {rec!r} of key {k!r} (expected [offset, value])")
            o, v = rec
            if o.__class__ is not int or o < 0:
                raise Bad(f"bad offset {o!r} of key {k!r} (offsets are integers >= 0)")
            if v.__class__ is not int and v.__class__ is not str:
                raise Bad(f"bad value {v!r} of key {k!r} (values are integers or strings)")
            if last is not None and check_int:
                if o <= last:
                    self.int_nm_poll.append((k, last, o, idx))
                    self.op_process[idx] = p
                elif o > last + 1:
                    self.int_poll_skip_c.append((k, last, o, idx))
                    self.op_process[idx] = p
            last = o
            if not ok:
                observe(k, o, v, idx)
                continue
            n = len(lst)
            if o < n and lst[o] == rec:
                continue
            observe(k, o, v, idx)
            if v not in rt:
                rt[v] = t
                rop[v] = idx
            if o >= n:
                if o - n > GAP_LIMIT:
                    mr = self.max_read.get(k)
                    if mr is None or o > mr[0]:
                        self.max_read[k] = [o, idx]
                    continue
                lst.extend([None] * (o + 1 - n))
            if lst[o] is None:
                lst[o] = rec
            mr = self.max_read.get(k)
            if mr is None:
                self.max_read[k] = [o, idx]
            elif o > mr[0]:
                mr[0] = o
                mr[1] = idx
        return last  # type: ignore[return-value]

    def observe(self, k: str, o: int, v: Any, idx: int) -> None:
        """Offset `o` of key `k` held value `v`, as op `idx` showed."""
        ov = self.off2val.get(k)
        if ov is None:
            ov = self.off2val[k] = {}
            self.val2off[k] = {}
            self.off_op[k] = {}
        cur = ov.get(o)
        if cur is None:
            ov[o] = v
            self.off_op[k][o] = idx
        elif cur != v:
            c = self.conflicts.get((k, o))
            if c is None:
                c = self.conflicts[(k, o)] = {cur: self.off_op[k][o]}
            c.setdefault(v, idx)
        vo = self.val2off[k]
        co = vo.get(v)
        if co is None:
            vo[v] = o
        elif co != o:
            d = self.dups.get((k, v))
            if d is None:
                first_op = self.off_op[k].get(co, idx)
                if ov.get(co) != v:  # the first sighting was a conflicting one
                    first_op = self.conflicts.get((k, co), {}).get(v, first_op)
                d = self.dups[(k, v)] = {co: first_op}
            d.setdefault(o, idx)


# ---------------------------------------------------------------------- diagnosis

def diagnose(ev: Any) -> str | None:
    """What is wrong with one event, as a one-line message, or None if it looks valid."""
    if ev.__class__ is not dict:
        return "not a JSON object"
    t = ev.get("type")
    if t not in ("invoke", "ok", "fail", "info"):
        return f"bad type {t!r} (expected invoke, ok, fail or info)"
    p = ev.get("process")
    if p.__class__ is not int and p != NEMESIS:
        return f"bad process {p!r} (expected an integer or \"nemesis\")"
    f = ev.get("f")
    if f.__class__ is not str:
        return f"bad f {f!r} (expected a string)"
    if "index" in ev and ev["index"].__class__ is not int:
        return f"bad index {ev['index']!r}"
    if "time" in ev and not isinstance(ev["time"], int | float):
        return f"bad time {ev['time']!r}"
    if p == NEMESIS:
        return None
    v = ev.get("value")
    if f in ("send", "poll", "txn") and v is not None:
        if v.__class__ is not list:
            return f"{f} value must be a list of micro-ops, not {type(v).__name__}"
        for mop in v:
            if mop.__class__ is not list or not mop or mop[0] not in ("send", "poll"):
                return f"bad micro-op {mop!r}"
            if mop[0] == "send":
                if len(mop) != 3 or mop[1].__class__ is not str:
                    return f"bad send micro-op {mop!r} (expected [\"send\", key, value])"
                x = mop[2]
                if x.__class__ is list and len(x) != 2:
                    return f"bad send result {x!r} (expected [offset, value])"
            elif len(mop) > 1 and mop[1] is not None:
                r = mop[1]
                if r.__class__ is not dict:
                    return f"bad poll result {r!r} (expected an object of key: [[offset, value], ...])"
                for k, recs in r.items():
                    if recs.__class__ is not list:
                        return f"bad records {recs!r} of key {k!r} (expected [[offset, value], ...])"
                    for rec in recs:
                        if rec.__class__ is not list or len(rec) != 2:
                            return f"bad record {rec!r} of key {k!r} (expected [offset, value])"
                        if rec[0].__class__ is not int or rec[0] < 0:
                            return f"bad offset {rec[0]!r} of key {k!r} (offsets are integers >= 0)"
    if f in ("assign", "subscribe") and v is not None and (
            v.__class__ is not list or any(k.__class__ is not str for k in v)):
        return f"{f} value must be a list of keys (strings), not {v!r}"
    return None
