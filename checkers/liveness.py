"""Liveness: did the system make progress again after the faults, and how available was it?

`check(events, keys=..., bound_s=30)` is a pure function of a queue history (docs/ARCHITECTURE.md's
vocabulary). Its parts:

- **Recovery.** The runner journals a nemesis event `final-heal` once every fault is undone
  and every node is back. From then on, within `bound_s` seconds, every key must accept a
  write (an `ok` send) and a read (an `ok` poll that returns the record that write got, at
  its offset). A key that does not is a `no-recovery` anomaly naming the key, how many
  sends and polls were tried after the heal and the errors they got. No policy allows it.
- **Hanging transactions.** A partition whose last stable offset stayed below its high
  watermark after the final phase (the observer's `txn-state` event) holds a transaction
  never completed or aborted: a `hanging-txn` anomaly (checkers/txnhang.py), judged in runs
  with `txn` ops only (the workload's transactions). No policy allows it.
  A history without a `final-heal` event (an older run, a harness stopped before its heal)
  is not judged (`checked: false`).
- **Availability.** The share of client ops (and of sends alone) that completed `ok`, in
  fault windows (`contracts.history.fault_windows`), outside them, and in the stretches after
  a heal while no fault is active; and per window.
- **Recovery times.** For every fault that starts (a window opening, or an instant fault
  such as `power-loss`): seconds to the first `ok` send completing after it; for every heal
  (a window closing, and the final heal): seconds to the first `ok` send after it.

Times in the result are seconds since the workload started.
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from checkers.txnhang import HANGING_TXN, hanging
from contracts.history import FINAL_HEAL_F, fault_windows

NO_RECOVERY = "no-recovery"
INSTANT_FAULTS = frozenset({"power-loss", "restart", "rolling-restart", "corrupt-file"})
NS = 1_000_000_000


@dataclass
class _KeyProgress:
    """What happened to one key after the final heal."""

    sends: int = 0
    polls: int = 0
    write: tuple[int, int] | None = None  # (completion time, offset) of the first ok send
    read_time: int | None = None  # completion time of the first ok poll returning that write
    errors: Counter[str] = field(default_factory=Counter)


def _secs(ns: int | None) -> float | None:
    return None if ns is None else round(ns / NS, 3)


def _share(ok: int, done: int) -> dict[str, Any]:
    return {"ok": ok, "completed": done, "share": round(ok / done, 4) if done else None}


class _Ops:
    """Client completions in time order: (time, f, ok) plus the keys of ok sends."""

    def __init__(self) -> None:
        self.times: list[int] = []
        self.sends: list[bool] = []
        self.oks: list[bool] = []
        self.ok_send_times: list[int] = []

    def add(self, ev: Mapping[str, Any]) -> None:
        ok = ev["type"] == "ok"
        self.times.append(ev["time"])
        self.sends.append(ev.get("f") == "send")
        self.oks.append(ok)
        if ok and ev.get("f") == "send":
            self.ok_send_times.append(ev["time"])

    def share(self, spans: Sequence[tuple[int, int]], sends_only: bool = False) -> dict[str, Any]:
        ok = done = 0
        for a, b in spans:
            for i in range(bisect.bisect_left(self.times, a), bisect.bisect_right(self.times, b)):
                if sends_only and not self.sends[i]:
                    continue
                done += 1
                ok += self.oks[i]
        return _share(ok, done)

    def first_ok_send_after(self, t: int) -> int | None:
        i = bisect.bisect_right(self.ok_send_times, t)
        return self.ok_send_times[i] if i < len(self.ok_send_times) else None


def _spans_outside(windows: Sequence[tuple[int, int]], start: int, end: int) -> list[tuple[int, int]]:
    """The stretches of [start, end] that no window covers."""
    out, t = [], start
    for a, b in sorted(windows):
        if a > t:
            out.append((t, a))
        t = max(t, b)
    if t < end:
        out.append((t, end))
    return out


def check(events: Iterable[Mapping[str, Any]], *, keys: Sequence[str] | None = None,
          bound_s: float = 30.0) -> dict[str, Any]:
    """The liveness result (see the module docstring): `valid` False with `no-recovery` when
    a key did not recover, True when all did, "unknown" when there is no final heal."""
    ops, nemesis = _Ops(), []
    invokes: dict[Any, Mapping[str, Any]] = {}
    completions: list[Mapping[str, Any]] = []
    end = 0
    transactions = False
    for ev in events:
        end = max(end, ev.get("time", 0))
        if ev.get("process") == "nemesis":
            nemesis.append(ev)
        elif ev["type"] == "invoke":
            invokes[ev["process"]] = ev
            transactions = transactions or ev.get("f") == "txn"
        else:
            ops.add(ev)
            completions.append(ev)
    heal = max((e["time"] for e in nemesis if e.get("f") == FINAL_HEAL_F), default=None)
    out = {"bound_s": bound_s, "final_heal_time": _secs(heal), **_availability(ops, nemesis, heal, end)}
    if heal is None:
        return {"valid": "unknown", "checked": False, "anomaly_types": [], "anomalies": {},
                "reason": "no final-heal event: the harness stopped before its final heal, or an older run",
                **out}
    progress = _progress(completions, heal, keys)
    bad = [_no_recovery(k, p, heal, bound_s) for k, p in sorted(progress.items())
           if not _recovered(p, heal, bound_s)]
    out["recovered_keys"] = sorted(k for k, p in progress.items() if _recovered(p, heal, bound_s))
    hung = hanging(nemesis) if transactions else []
    anomalies = {name: found for name, found in ((NO_RECOVERY, bad), (HANGING_TXN, hung)) if found}
    return {"valid": not anomalies, "checked": True, "anomaly_types": sorted(anomalies), "anomalies": anomalies,
            "anomaly_counts": {name: len(found) for name, found in anomalies.items()}, **out}


def _progress(completions: Sequence[Mapping[str, Any]], heal: int, keys: Sequence[str] | None
              ) -> dict[str, _KeyProgress]:
    """Per key, the sends and polls that completed after the final heal."""
    prog = {k: _KeyProgress() for k in keys or ()}
    for ev in completions:
        if ev["time"] < heal or ev.get("f") not in ("send", "poll") or not isinstance(ev.get("value"), list):
            continue
        if ev["f"] == "send":
            for mop in ev["value"]:
                if len(mop) < 3:
                    continue
                p = prog.setdefault(mop[1], _KeyProgress())
                p.sends += 1
                if ev["type"] == "ok" and isinstance(mop[2], list) and p.write is None:
                    p.write = (ev["time"], mop[2][0])
                elif ev["type"] != "ok":
                    p.errors[str(ev.get("error") or ev["type"])[:120]] += 1
            continue
        if ev["type"] != "ok":
            for p in prog.values():
                p.polls += 1
                p.errors[f"poll: {str(ev.get('error') or ev['type'])[:110]}"] += 1
            continue
        got = ev["value"][0][1] if ev["value"] and len(ev["value"][0]) > 1 else {}
        for k, p in prog.items():
            p.polls += 1
            if p.read_time is None and p.write is not None and any(
                    pair[0] == p.write[1] for pair in got.get(k, ())):
                p.read_time = ev["time"]
    return prog


def _recovered(p: _KeyProgress, heal: int, bound_s: float) -> bool:
    limit = heal + bound_s * NS
    return p.write is not None and p.write[0] <= limit and p.read_time is not None and p.read_time <= limit


def _no_recovery(key: str, p: _KeyProgress, heal: int, bound_s: float) -> dict[str, Any]:
    if p.write is None:
        what = f"no send to {key} succeeded"
    elif p.write[0] > heal + bound_s * NS:
        what = f"the first send to {key} that succeeded took {(p.write[0] - heal) / NS:.1f} s"
    elif p.read_time is None:
        what = f"no poll returned the record written to {key} at offset {p.write[1]}"
    else:
        what = f"the record written to {key} at offset {p.write[1]} was read only after {(p.read_time - heal) / NS:.1f} s"
    return {"key": key, "explanation": f"{what} within {bound_s:g} s of the final heal "
                                       f"({p.sends} sends and {p.polls} polls tried after it)",
            "sends_tried": p.sends, "polls_tried": p.polls, "errors": dict(p.errors.most_common(5)),
            "write_offset": None if p.write is None else p.write[1]}


def _availability(ops: _Ops, nemesis: Sequence[Mapping[str, Any]], heal: int | None, end: int) -> dict[str, Any]:
    """Availability in and outside fault windows, after heals, and the recovery times."""
    start = 0
    stop_at = heal if heal is not None else end
    windows = fault_windows(nemesis)
    spans = [(w.start, w.stop if w.stop is not None else stop_at) for w in windows]
    outside = _spans_outside(spans, start, stop_at)
    heals = sorted({w.stop for w in windows if w.stop is not None} | ({heal} if heal is not None else set()))
    after_heal = [(a, b) for a, b in outside if any(h <= a for h in heals)]
    per_window = [{"kind": w.kind, "start": _secs(w.start), "stop": _secs(w.stop),
                   "sends": ops.share([(w.start, w.stop if w.stop is not None else stop_at)], sends_only=True)}
                  for w in windows]
    instants = [e for e in nemesis if e.get("f") in INSTANT_FAULTS and e.get("type") != "invoke"]
    starts = sorted([(w.start, w.kind) for w in windows] + [(e["time"], e["f"]) for e in instants])

    def recovery(t: int) -> float | None:
        first = ops.first_ok_send_after(t)
        return None if first is None else round((first - t) / NS, 3)

    return {"availability": {
        "in_faults": {"ops": ops.share(spans), "sends": ops.share(spans, True)},
        "outside_faults": {"ops": ops.share(outside), "sends": ops.share(outside, True)},
        "after_heals": {"ops": ops.share(after_heal), "sends": ops.share(after_heal, True)},
        "windows": per_window},
        "first_ok_send_after_fault": [{"time": _secs(t), "fault": kind, "seconds": recovery(t)} for t, kind in starts],
        "first_ok_send_after_heal": [{"time": _secs(h), "seconds": recovery(h)} for h in heals]}
