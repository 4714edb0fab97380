"""Which faults struck while writes were in flight: the coverage evidence of a Tansu run.

`struck(events)` pairs the history's fault events into windows (`contracts.history.fault_windows`;
an instant such as `power-loss` is a window of its own op) and, for each window, counts the
sends that were in flight inside it: invoked before it ended and completed (or never) after it
began, split by outcome (ok, fail, info). `summary(run_dirs)` adds them up per fault kind over
runs; `python -m suites.tansu.inflight RUN_DIR...` prints that table (docs/findings/tansu-0.6.0.md).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from contracts.history import fault_windows, read_events
from contracts.pairing import pair_ops

INSTANT_NS = 2_000_000_000  # an instant fault (a power loss, a restart) counts as a 2-s window


def label(kind: str, value: Any, database: str = "n1") -> str:
    """A fault window's kind with what it struck: the database node or brokers, the shape of a partition."""
    v = value if isinstance(value, dict) else {}
    spec = v.get("spec") if isinstance(v.get("spec"), dict) else {}
    if kind == "partition":
        if "clients" in spec:
            return "partition clients-brokers"
        if "cut" in spec:
            return "partition brokers-database"
        return "partition database isolated" if "isolate" in spec else "partition"
    nodes = v.get("nodes")
    if kind in ("kill", "pause", "power-loss", "restart") and isinstance(nodes, list):
        return f"{kind} {'database' if database in nodes else 'broker'}"
    return kind


def _windows(nemesis: Sequence[Mapping[str, Any]]) -> list[tuple[str, int, int]]:
    """(kind, start ns, end ns) of every fault: paired windows, and instants as short windows."""
    out = [(label(w.kind, w.start_event.get("value")), int(w.start),
            int(w.stop if w.stop is not None else w.start + INSTANT_NS)) for w in fault_windows(list(nemesis))]
    for e in nemesis:
        if e.get("f") in ("power-loss", "restart", "rolling-restart"):
            out.append((label(str(e["f"]), e.get("value")), int(e["time"]), int(e["time"]) + INSTANT_NS))
    return out


def struck(events: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per fault window: its kind, start and end (s) and the sends in flight by outcome."""
    nemesis: list[Mapping[str, Any]] = []
    sends = [(op.time, op.ret_time, op.type) for op in pair_ops(events, nemesis=nemesis.append) if op.f == "send"]
    out = []
    for kind, a, b in _windows(nemesis):
        counts = {"ok": 0, "fail": 0, "info": 0}
        for t0, t1, typ in sends:
            if t0 <= b and (t1 is None or t1 >= a):
                counts[typ] += 1
        out.append({"fault": kind, "start_s": round(a / 1e9, 2), "end_s": round(b / 1e9, 2), **counts})
    return out


def summary(run_dirs: Iterable[Path]) -> dict[str, dict[str, int]]:
    """Fault kind -> {windows, ok, fail, info} over the runs."""
    total: dict[str, dict[str, int]] = {}
    for d in run_dirs:
        for w in struck(read_events(Path(d) / "history.jsonl")):
            t = total.setdefault(w["fault"], {"windows": 0, "ok": 0, "fail": 0, "info": 0})
            t["windows"] += 1
            for k in ("ok", "fail", "info"):
                t[k] += w[k]
    return total


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m suites.tansu.inflight", description=__doc__.split("\n\n")[0])
    p.add_argument("runs", nargs="+", type=Path, help="run folders (each with history.jsonl)")
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    table = summary(a.runs)
    if a.json:
        print(json.dumps(table, indent=1))
        return 0
    print("| fault | windows | sends in flight: ok | fail | info |\n| --- | --- | --- | --- | --- |")
    for kind, t in sorted(table.items()):
        print(f"| {kind} | {t['windows']} | {t['ok']} | {t['fail']} | {t['info']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
