"""The virtual-clock executor: `OpLoop` with no threads and no sleeping, and `simulate`.

Every op takes a fixed simulated latency; the completion is decided when the op starts (by
`complete(op)`, default ok) and delivered when the loop waits past its time. The clock only
moves when the loop waits: to the next completion, or to the time it waits for when none is
due sooner. Nothing completes while the loop is busy (`ready` is always None), so two ops due
at the same instant come back one per wait, in thread order. Deterministic for a seed: the
unit tests use it, and it previews what a generator does. (The loop and why it stands on the
ground floor: loop.py.)
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable
from typing import Any

from contracts.generator.core import NEMESIS_THREAD, NS, Generator, Thread
from contracts.generator.loop import Completion, OpLoop, completion_event, nemesis_event

Answer = Callable[[dict[str, Any]], str | dict[str, Any]]
Latency = int | Callable[[dict[str, Any]], int]  # ns, or ns per op


class VirtualExecutor:
    """Runs ops on a virtual clock; keeps the history as a list (`history`).

    `complete(op)` answers an op with its completion type or a completion dict (default
    "ok"; a nemesis op's completion is `info` with the answer's `value`, not journaled, as
    the threaded executor's); an op takes `latency_ns`, or `latency_ns(op)` when it is a
    function. Stops once the history holds `max_events` events."""

    def __init__(self, *, latency_ns: Latency, complete: Answer | None = None, max_events: int = 100_000):
        self.latency = latency_ns
        self.answer = complete
        self.max_events = max_events
        self.history: list[dict[str, Any]] = []
        self.clock = 0
        # (due time, str(thread), thread, completion): a thread has one op in flight at most,
        # so the first two fields order the heap and ties go to the smaller thread name
        self.inflight: list[tuple[int, str, Thread, dict[str, Any]]] = []

    def now(self) -> int:
        return self.clock

    def stopped(self) -> bool:
        return len(self.history) >= self.max_events

    def journal(self, event: dict[str, Any]) -> dict[str, Any]:
        event["time"] = self.clock
        event["index"] = len(self.history)
        self.history.append(event)
        return event

    def start(self, thread: Thread, op: dict[str, Any]) -> None:
        a = self.answer(op) if self.answer is not None else "ok"
        answer = {"type": a} if isinstance(a, str) else a
        ev = nemesis_event(op, answer) if thread == NEMESIS_THREAD else completion_event(op, answer)
        lat = self.latency if isinstance(self.latency, int) else self.latency(op)
        heapq.heappush(self.inflight, (self.clock + lat, str(thread), thread, ev))

    def ready(self) -> Completion | None:
        return None

    def wait(self, until: int | None) -> Completion | None:
        inflight = self.inflight
        if inflight and (until is None or inflight[0][0] <= until):
            due, _, thread, ev = heapq.heappop(inflight)
            if due > self.clock:
                self.clock = due
            return thread, (ev if thread == NEMESIS_THREAD else self.journal(ev))
        if until is not None and until > self.clock:
            self.clock = until
        return None


def simulate(
    gen: Generator,
    threads: int,
    *,
    seed: int = 0,
    latency: float | Callable[[dict[str, Any]], float] = 0.001,
    complete: Answer | None = None,
    max_events: int = 100_000,
    nemesis: bool = False,
) -> list[dict[str, Any]]:
    """Run `gen` on `threads` client threads (and a nemesis thread if `nemesis`) on a virtual
    clock and return the history (client ops only: the nemesis journals its own events).

    Every op takes `latency` seconds (or `latency(op)`); `complete(op)` gives its completion
    type (or a completion dict), default "ok". An `info` ends the process (the thread
    continues as process + threads), as in the real run: the loop is the same. Deterministic
    for a seed.
    """
    lat: Latency = (lambda op: int(latency(op) * NS)) if callable(latency) else int(latency * NS)
    ex = VirtualExecutor(latency_ns=lat, complete=complete, max_events=max_events)
    OpLoop(gen, ex, threads=threads, rng=random.Random(seed), nemesis=nemesis).run()
    return ex.history
