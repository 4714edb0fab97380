"""Helpers for the queue checker's tests: tiny history builders and a simulated correct log.

`H` builds hand-written histories op by op (index and time assigned in order).
`simulate(seed, ...)` runs a correct Kafka-like log with many processes, crashes,
reassignments and polls (plus a final phase that reads everything back); `plant` options
make it misbehave in exactly one way, for the property tests.
"""

from __future__ import annotations

import random
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


def wrack_bin() -> str:
    """The `wrack` console script of this environment."""
    p = Path(sys.executable).parent / "wrack"
    return str(p) if p.exists() else shutil.which("wrack") or "wrack"


class H:
    """A history under construction: `H().send(0, "x", 1, 0).poll(1, {"x": [[0, 1]]}).events`."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def ev(self, process: Any, type_: str, f: str, value: Any, **extra: Any) -> H:
        i = len(self.events)
        self.events.append({"index": i, "time": i * 1000, "process": process, "type": type_, "f": f,
                            "value": value, **extra})
        return self

    def op(self, process: Any, f: str, invoke: Any, type_: str, complete: Any, **extra: Any) -> H:
        return self.ev(process, "invoke", f, invoke).ev(process, type_, f, complete, **extra)

    def send(self, p: int, k: str, v: Any, offset: int | None = None, type_: str = "ok") -> H:
        done = [["send", k, [offset, v]]] if offset is not None else [["send", k, v]]
        return self.op(p, "send", [["send", k, v]], type_, done)

    def sends(self, p: int, pairs: list[tuple[str, Any, int | None]], type_: str = "ok") -> H:
        inv = [["send", k, v] for k, v, _o in pairs]
        done = [["send", k, [o, v]] if o is not None else ["send", k, v] for k, v, o in pairs]
        return self.op(p, "send", inv, type_, done)

    def poll(self, p: int, reads: dict[str, list[list[Any]]] | None, type_: str = "ok", **extra: Any) -> H:
        done = [["poll", reads]] if reads is not None else [["poll"]]
        return self.op(p, "poll", [["poll"]], type_, done, **extra)

    def polls(self, p: int, many: list[dict[str, list[list[Any]]]], type_: str = "ok") -> H:
        return self.op(p, "poll", [["poll"] for _ in many], type_, [["poll", r] for r in many])

    def txn(self, p: int, invoke: list[Any], done: list[Any], type_: str = "ok") -> H:
        return self.op(p, "txn", invoke, type_, done)

    def assign(self, p: int, keys: list[str], type_: str = "ok") -> H:
        return self.op(p, "assign", keys, type_, keys)

    def crash(self, p: int) -> H:
        return self.op(p, "crash", None, "info", None)

    def nemesis(self, f: str, value: Any = None) -> H:
        return self.ev("nemesis", "info", f, value)


# ---------------------------------------------------------------------- simulation

PLANTS = ("lost-write", "duplicate", "inconsistent-offsets", "G1a", "garbage-read", "poll-skip",
          "nonmonotonic-poll", "int-poll-skip", "int-nonmonotonic-poll", "nonmonotonic-send",
          "int-nonmonotonic-send", "unseen")


@dataclass
class Sim:
    """A correct replicated log and its clients, recording a docs/ARCHITECTURE.md history.

    Each key's log is a list of values (offset = position). Consumers poll from their
    position under their current assignment (an assign resets positions to 0).
    `plant` names one anomaly to inject once the history has enough material for it.
    """

    rng: random.Random
    n_keys: int = 3
    n_proc: int = 4
    plant: str | None = None
    h: H = field(default_factory=H)
    planted: bool = False

    def __post_init__(self) -> None:
        self.keys = [f"k{i}" for i in range(self.n_keys)]
        self.log: dict[str, list[Any]] = {k: [] for k in self.keys}
        self.next_val = {k: 1 for k in self.keys}
        self.procs = list(range(self.n_proc))
        self.next_proc = self.n_proc
        self.assigned: dict[int, list[str]] = {}
        self.pos: dict[tuple[int, str], int] = {}
        self.failed: dict[str, list[Any]] = {k: [] for k in self.keys}
        self.hidden: dict[str, set[int]] = {k: set() for k in self.keys}  # offsets consumers skip (lost)
        self.acked: dict[str, set[Any]] = {k: set() for k in self.keys}
        self.in_final = False

    # -- ops

    def _new_process(self, p: int) -> None:
        self.procs.remove(p)
        self.procs.append(self.next_proc)
        self.next_proc += 1
        self.assigned.pop(p, None)

    def crash(self, p: int) -> None:
        self.h.crash(p)
        self._new_process(p)

    def send(self, p: int) -> None:
        k = self.rng.choice(self.keys)
        v = self.next_val[k]
        self.next_val[k] += 1
        r = self.rng.random()
        if r < 0.8:
            self.log[k].append(v)
            o = len(self.log[k]) - 1
            if self.plant == "lost-write" and not self.planted and o >= 1 and self.rng.random() < 0.3:
                self.hidden[k].add(o)  # acknowledged, then lost before anyone read it
                self.planted_key: str = k
                self.planted = True
            if self.plant == "duplicate" and not self.planted and o >= 1 and self.rng.random() < 0.3:
                self.log[k].append(v)  # a producer retry appended it twice
                self.planted = True
            self.h.send(p, k, v, o)
            self.acked[k].add(v)
        elif r < 0.9:
            if self.plant == "G1a" and not self.planted:
                self.log[k].append(v)  # failed, yet it reached the log
                self.planted = True
            else:
                self.failed[k].append(v)
            self.h.send(p, k, v, None, "fail")
        else:
            if self.rng.random() < 0.5:
                self.log[k].append(v)
            self.h.send(p, k, v, None, "info")
            self._new_process(p)

    def assign(self, p: int, keys: list[str] | None = None) -> None:
        keys = keys or sorted(self.rng.sample(self.keys, self.rng.randint(1, len(self.keys))))
        self.h.assign(p, keys)
        self.assigned[p] = keys
        for k in keys:
            self.pos[(p, k)] = 0

    def poll(self, p: int, maxn: int | None = None) -> None:
        if p not in self.assigned:
            self.assign(p)
        out: dict[str, list[list[Any]]] = {}
        for k in self.assigned[p]:
            start = self.pos[(p, k)]
            n = maxn if maxn else self.rng.randint(0, 4)
            recs = []
            o = start
            while len(recs) < n and o < len(self.log[k]):
                if o not in self.hidden[k]:
                    recs.append([o, self.log[k][o]])
                o += 1
            if recs:
                out[k] = recs
                self.pos[(p, k)] = recs[-1][0] + 1
        self._plant_in_poll(p, out)
        self.h.poll(p, out)

    def _plant_in_poll(self, p: int, out: dict[str, list[list[Any]]]) -> None:
        if self.planted or self.plant is None:
            return
        for k, recs in out.items():
            if self.plant == "int-poll-skip" and len(recs) >= 3 and recs[1][1] in self.acked[k]:
                del recs[1]
            elif self.plant == "int-nonmonotonic-poll" and len(recs) >= 2:
                recs[0], recs[1] = recs[1], recs[0]
            elif self.plant == "inconsistent-offsets" and recs[0][1] in self.acked[k] and (
                    self.in_final or self.rng.random() < 0.5):
                # a value sent by an indeterminate op shows up at an acknowledged record's offset
                v = self.next_val[k]
                self.next_val[k] += 1
                self.h.send(self.next_proc, k, v, None, "info")
                self.next_proc += 1
                recs[0] = [recs[0][0], v]
            elif self.plant == "garbage-read":
                recs.append([recs[-1][0] + 1, -12345])
            elif self.plant == "poll-skip" and self.in_final and recs[-1][0] + 2 < len(self.log[k]) \
                    and self.log[k][recs[-1][0] + 1] in self.acked[k]:
                self.pos[(p, k)] = recs[-1][0] + 2  # the consumer's position jumps over one record
            elif self.plant == "nonmonotonic-poll" and self.in_final:
                self.pos[(p, k)] = recs[-1][0]  # the next poll re-reads the last record
            else:
                continue
            self.planted = True
            return

    def run(self, n_ops: int) -> None:
        for _ in range(n_ops):
            p = self.rng.choice(self.procs)
            r = self.rng.random()
            if r < 0.45:
                self.send(p)
            elif r < 0.85:
                self.poll(p)
            elif r < 0.95:
                self.assign(p)
            else:
                self.crash(p)
        if self.plant == "nonmonotonic-send" and not self.planted:
            self._plant_nonmonotonic_send()
        if self.plant == "int-nonmonotonic-send" and not self.planted:
            p = self.next_proc
            self.next_proc += 1
            k = self.keys[0]
            a, b = self.next_val[k], self.next_val[k] + 1
            self.next_val[k] += 2
            self.log[k].extend([b, a])
            n = len(self.log[k])
            self.h.sends(p, [(k, a, n - 1), (k, b, n - 2)])
            self.planted = True

    def _plant_nonmonotonic_send(self) -> None:
        """A producer's second send lands before its first (two fresh records, acks swapped)."""
        p = self.next_proc
        self.next_proc += 1
        k = self.keys[0]
        a, b = self.next_val[k], self.next_val[k] + 1
        self.next_val[k] += 2
        self.log[k].extend([b, a])
        n = len(self.log[k])
        self.h.send(p, k, a, n - 1)
        self.h.send(p, k, b, n - 2)
        self.planted = True

    def _acked_send(self, p: int, k: str, hidden: bool = False) -> Any:
        v = self.next_val[k]
        self.next_val[k] += 1
        self.log[k].append(v)
        o = len(self.log[k]) - 1
        if hidden:
            self.hidden[k].add(o)
        self.h.send(p, k, v, o)
        self.acked[k].add(v)
        return v

    def final(self) -> None:
        """Read everything back with a fresh process (the final phase)."""
        if self.plant and not self.planted:
            # material for the plants that need records in the final reads, and fallbacks
            q = self.next_proc
            self.next_proc += 1
            k = self.keys[0]
            if self.plant == "lost-write":
                self._acked_send(q, k, hidden=True)
                self.planted = True
            for _ in range(8):
                self._acked_send(q, k)
            if self.plant == "duplicate":
                self.log[k].append(self.log[k][-1])
                self.planted = True
            elif self.plant == "G1a":
                v = self.next_val[k]
                self.next_val[k] += 1
                self.h.send(q, k, v, None, "fail")
                self.log[k].append(v)
                self.planted = True
        elif self.plant == "lost-write" and self.planted:
            # a record after the lost one, so the final reads go past it
            self._acked_send(self.next_proc, self.planted_key)
            self.next_proc += 1
        self.in_final = True
        p = self.next_proc
        self.next_proc += 1
        self.procs.append(p)
        self.assign(p, list(self.keys))
        while any(self._unread(p, k) for k in self.keys):
            self.poll(p, maxn=5)
        if self.plant == "unseen" and not self.planted:
            self._acked_send(self.next_proc, self.keys[-1])
            self.next_proc += 1
            self.planted = True

    def _unread(self, p: int, k: str) -> bool:
        o = self.pos[(p, k)]
        return any(x not in self.hidden[k] for x in range(o, len(self.log[k])))


def simulate(seed: int, n_ops: int = 80, n_keys: int = 3, n_proc: int = 4, plant: str | None = None
             ) -> Sim:
    sim = Sim(random.Random(seed), n_keys=n_keys, n_proc=n_proc, plant=plant)
    sim.run(n_ops)
    sim.final()
    return sim


def judged(events: list[dict[str, Any]], allowed: Any = (), policies: Any = (), **kw: Any) -> dict[str, Any]:
    """The queue checker's raw result, judged by the one verdict under the named allowances
    (`checkers.queue.policy.named_policy`): what a run with that policy would report."""
    from checkers.queue import check
    from checkers.queue.policy import named_policy
    from checkers.verdict import judge

    result = check(events, **kw)
    policy = named_policy(allowed, policies)
    return judge({"queue": result}, policy).write_into(result, policy)
