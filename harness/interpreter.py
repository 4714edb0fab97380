"""The threaded executor: the op loop (contracts/generator/loop.py) on worker threads with
real clients, journaling to the test's history.

`run(gen, threads=..., clients=..., history=..., rng=...)` runs `OpLoop` with a
`ThreadedExecutor`: one worker thread per client thread (and one for the nemesis when
`nemesis=` is given). The loop journals each invoke *before* handing the op to its worker,
and the worker appends the completion *after* the client returned (Jepsen's soundness
argument: the history's real-time order is compatible with the system's). The clock is the
history's (`history.now()`, monotonic); the loop waits for an op's time, or for a pending
generator, on the completion queue, at most 0.2 s at a time so that `stop` is noticed. It
returns when the generator is exhausted and no op is in flight, or when `stop` is set (ops
still in flight stay open in the history: indeterminate).

Clients (`contracts.protocols.Client`): `invoke(op) -> {"type": ok|fail|info, "value": ..., ...}`
and `close()`. A client is opened lazily per process by `clients(thread, process)`. An op
that completes `info` or raises ends its process: the client is closed and the loop
continues the thread under process `process + threads` (docs/ARCHITECTURE.md: a process
that got `info` never issues another op). An exception from `invoke` becomes `info` with
`error` "indeterminate: ..."; failing to open a client makes the op `fail` (nothing was sent).

Nemesis ops (process "nemesis") go to `nemesis(op)`, which records its own events (a
`nemesis.core.Nemesis` appends one `info` event per fault); they are not journaled here.

Why here and not beside the loop on the ground floor: this executor opens clients, runs
threads and blocks on queues, the application's I/O; the ground floor stays pure (the loop
and the virtual-clock executor, which the floors below the harness use to preview their
generators).
"""

from __future__ import annotations

import queue
import random
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from contracts.generator import NEMESIS_THREAD, Generator
from contracts.generator.loop import (
    Completion,
    EventSink,
    GeneratorStuck,
    OpLoop,
    RunStats,
    completion_event,
    nemesis_event,
)
from contracts.protocols import Client

__all__ = ["NEMESIS", "Client", "EventSink", "GeneratorStuck", "RunStats", "ThreadedExecutor", "run"]

NEMESIS = NEMESIS_THREAD  # the nemesis thread's process
POLL_S = 0.2  # the longest the loop waits at once: `stop` is noticed within it


class _Worker:
    """One thread: runs the ops put in its inbox, journals client completions, reports each
    completion on `done`. None in the inbox ends it."""

    def __init__(
        self,
        thread: Any,
        run_op: Callable[[Any, dict[str, Any]], dict[str, Any]],
        done: queue.SimpleQueue,
        history: EventSink,
        journal: bool,
    ):
        self.thread = thread
        self.inbox: queue.SimpleQueue = queue.SimpleQueue()
        self._run_op = run_op
        self._done = done
        self._history = history
        self._journal = journal
        self.t = threading.Thread(target=self._loop, name=f"worker-{thread}", daemon=True)
        self.t.start()

    def _loop(self) -> None:
        while True:
            op = self.inbox.get()
            if op is None:
                return
            answer = self._run_op(self.thread, op)
            if self._journal:
                ev = self._history.append(completion_event(op, answer))
            else:
                ev = nemesis_event(op, answer)
            self._done.put((self.thread, ev))


class _ClientPool:
    """One client per thread, opened lazily for the op's process, closed when its process ends."""

    def __init__(self, open_client: Callable[[int, int], Client]):
        self.open_client = open_client
        self.clients: dict[Any, tuple[int, Client]] = {}
        self.lock = threading.Lock()

    def run_op(self, thread: Any, op: dict[str, Any]) -> dict[str, Any]:
        process = op["process"]
        cur = self.clients.get(thread)
        if cur is not None and cur[0] != process:
            self._close(thread)
            cur = None
        if cur is None:
            try:
                client = self.open_client(thread, process)
            except Exception as e:  # noqa: BLE001 - nothing was sent: a definite failure
                return {"type": "fail", "error": f"open: {type(e).__name__}: {e}"}
            with self.lock:
                self.clients[thread] = (process, client)
            cur = (process, client)
        try:
            comp = dict(cur[1].invoke(op))
        except Exception as e:  # noqa: BLE001 - the op may have happened
            comp = {"type": "info", "error": f"indeterminate: {type(e).__name__}: {e}"}
        if comp.get("type") not in ("ok", "fail", "info"):
            comp["type"] = "info"
        if comp["type"] == "info":
            self._close(thread)
        return comp

    def _close(self, thread: Any) -> None:
        with self.lock:
            cur = self.clients.pop(thread, None)
        if cur is not None:
            try:
                cur[1].close()
            except Exception:  # noqa: BLE001 - a broken client is still gone
                pass

    def close_all(self) -> None:
        for t in list(self.clients):
            self._close(t)


class ThreadedExecutor:
    """`OpLoop`'s executor for a real run (contracts/generator/loop.py `Executor`): worker
    threads, a client pool, the history's clock; `close()` ends the workers and clients."""

    def __init__(
        self,
        *,
        threads: int,
        clients: Callable[[int, int], Client],
        history: EventSink,
        nemesis: Callable[[dict[str, Any]], Any] | None,
        stop: threading.Event,
    ):
        self.done: queue.SimpleQueue = queue.SimpleQueue()
        self.pool = _ClientPool(clients)
        self.runners: dict[Any, _Worker] = {
            t: _Worker(t, self.pool.run_op, self.done, history, True) for t in range(threads)
        }
        if nemesis is not None:

            def run_nemesis(_thread: Any, op: dict[str, Any]) -> dict[str, Any]:
                try:
                    return {"value": nemesis(op)}
                except Exception as e:  # noqa: BLE001 - recorded by the nemesis; keep going
                    return {"value": {"error": f"{type(e).__name__}: {e}"}}

            self.runners[NEMESIS_THREAD] = _Worker(NEMESIS_THREAD, run_nemesis, self.done, history, False)
        # the protocol's methods, bound once (the loop calls them per op)
        self.now = history.now
        self.journal = history.append
        self.stopped = stop.is_set

    def start(self, thread: Any, op: dict[str, Any]) -> None:
        self.runners[thread].inbox.put({k: v for k, v in op.items() if k != "time"})

    def ready(self) -> Completion | None:
        try:
            return self.done.get_nowait()
        except queue.Empty:
            return None

    def wait(self, until: int | None) -> Completion | None:
        timeout = POLL_S
        if until is not None:
            left = (until - self.now()) / 1e9
            if left <= 0:
                return None
            timeout = min(left, POLL_S)
        try:
            return self.done.get(timeout=timeout)
        except queue.Empty:
            return None

    def close(self, join_timeout: float) -> None:
        for w in self.runners.values():
            w.inbox.put(None)
        deadline = time.monotonic() + join_timeout
        for w in self.runners.values():
            w.t.join(max(0.0, deadline - time.monotonic()))
        self.pool.close_all()


def run(
    gen: Generator,
    *,
    threads: int,
    clients: Callable[[int, int], Client],
    history: EventSink,
    rng: random.Random,
    nemesis: Callable[[dict[str, Any]], Any] | None = None,
    stop: threading.Event | None = None,
    on_event: Callable[[Mapping[str, Any]], None] | None = None,
    join_timeout: float = 5.0,
) -> RunStats:
    """Run `gen` to exhaustion (or until `stop`) on worker threads; see the module docstring."""
    ex = ThreadedExecutor(
        threads=threads, clients=clients, history=history, nemesis=nemesis, stop=stop or threading.Event()
    )
    try:
        return OpLoop(gen, ex, threads=threads, rng=rng, nemesis=nemesis is not None, on_event=on_event).run()
    finally:
        ex.close(join_timeout)
