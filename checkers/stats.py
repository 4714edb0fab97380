"""Per-run statistics: ops by f and outcome, availability overall and per fault window.

- `op_table(events)` pairs invokes with completions (`contracts.pairing`) into an `OpTable`
  (`checkers.optable`: compact columns, shared with plots and the queue checker, which
  builds the same table in its own pass).
- `summarize(table, windows, last_time)` is pure: from the table and the fault windows
  (`contracts.history.fault_windows`) to a JSON-ready dict.
- `checkers.files.run_stats(history_path)` does both for a file (for a Kafka queue
  history it runs the queue checker instead, whose `stats` come from `summarize` too).

Definitions: an op's outcome is its completion type (`ok`, `fail`, `info`; an op never
completed counts as `info`). *Availability* is ok / completed over client ops other than
`crash` (a crash op is the workload killing its own client, always `info`). An op belongs
to a fault window when it completes (or, never completed, is invoked) inside it;
`outside_faults` is every op in no window.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from checkers.optable import INFO, TYPE_CODE, TYPE_NAMES, OpTable
from contracts.history import FaultWindow
from contracts.pairing import NEMESIS, Pairing

IGNORED_FOR_AVAILABILITY = frozenset({"crash", "debug-topic-partitions"})

__all__ = ["OpTable", "op_table", "summarize"]


def op_table(events: Iterable[dict[str, Any]], path: str | None = None,
             line_of: Callable[[int], int] | None = None) -> tuple[OpTable, list[dict[str, Any]], int]:
    """(table, nemesis events, last time) from event dicts, paired by `contracts.pairing`
    (bad pairs raise `InputError` citing `line_of(position)`, default position + 1)."""
    tab = OpTable()
    nemesis: list[dict[str, Any]] = []
    pairing = Pairing(path, line_of)
    invoke = pairing.invoke
    complete = pairing.complete
    last = 0
    for pos, ev in enumerate(events):
        p = ev["process"]
        t = ev.get("time", pos)
        if t > last:
            last = t
        if p == NEMESIS:
            nemesis.append(ev)
            continue
        if ev["type"] == "invoke":
            invoke(ev, pos)
            continue
        inv, inv_pos = complete(ev, pos)
        tab.add(p, inv["f"], TYPE_CODE[ev["type"]], inv.get("time", inv.get("index", inv_pos)), t)
    for inv, inv_pos in pairing.never_completed():
        tab.add(inv["process"], inv["f"], INFO, inv.get("time", inv.get("index", inv_pos)), None)
    return tab, nemesis, last


def summarize(table: OpTable, windows: list[FaultWindow], *, last_time: int = 0) -> dict[str, Any]:
    """Ops by f and outcome, availability overall, per fault window and outside faults."""
    # lazy: numpy takes ~60 ms; `wrack` imports this module at every start (cmd_check's POLICIES)
    import numpy as np

    n = len(table)
    cols = table.columns()
    f = cols["f"].astype(np.int64)
    ty = cols["type"].astype(np.int64)
    by_f: dict[str, dict[str, int]] = {}
    for code, name in enumerate(table.f_names):
        sel = ty[f == code]
        counts = np.bincount(sel, minlength=3)
        by_f[name] = {"count": int(sel.size), **{TYPE_NAMES[i]: int(counts[i]) for i in range(3)}}
    counted = np.ones(n, dtype=bool)
    for code, name in enumerate(table.f_names):
        if name in IGNORED_FOR_AVAILABILITY:
            counted &= f != code
    t1 = cols["t1"]
    t0 = cols["t0"]
    when = np.where(cols["done"], t1, t0)[counted]
    ok = (ty == 0)[counted]
    order = np.argsort(when, kind="stable")
    when = when[order]
    okc = np.concatenate(([0], np.cumsum(ok[order])))
    end = max(int(last_time), int(when[-1]) if when.size else 0)

    def avail(lo: int, hi: int) -> dict[str, Any]:
        total = hi - lo
        good = int(okc[hi] - okc[lo])
        return {"ops": int(total), "ok": good, "availability": round(good / total, 6) if total else None}

    out_windows = []
    inside = np.zeros(when.size, dtype=bool)
    for w in windows:
        stop = w.stop if w.stop is not None else end
        lo = int(np.searchsorted(when, w.start, side="left"))
        hi = int(np.searchsorted(when, stop, side="right"))
        inside[lo:hi] = True
        out_windows.append({"kind": w.kind, "start": w.start, "stop": w.stop, **avail(lo, hi)})
    outside = ~inside
    n_out = int(outside.sum())
    ok_out = int(ok[order][outside].sum())
    return {
        "ops": n,
        "by_f": by_f,
        "availability": avail(0, when.size),
        "fault_windows": out_windows,
        "outside_faults": {"ops": n_out, "ok": ok_out,
                           "availability": round(ok_out / n_out, 6) if n_out else None},
    }
