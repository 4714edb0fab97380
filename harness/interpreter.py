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

A client op that has not returned after `op_timeout` s (a client library blocked in a call
that has no deadline of its own) is abandoned: the executor journals its completion as
`info` ("indeterminate: ... abandoned"), its process ends as after any `info`, and the thread
goes on with a fresh worker; the abandoned op's client is closed at once, on a thread of
its own, while the op may still run in it (as the end of a stopped run closes clients), and
the op's late answer is dropped. Clients left at the end are closed in parallel, at most
`join_timeout` s in all: neither a hung op nor a hung close holds the run.

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
    completion on `done`. None in the inbox ends it. `abandon()` (the op in flight took too
    long) ends it too: its op's answer, when it comes, is dropped."""

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
        self._lock = threading.Lock()
        self.op: dict[str, Any] | None = None  # the op in flight
        self.since = 0.0  # monotonic s when it started
        self.abandoned = False
        self.t = threading.Thread(target=self._loop, name=f"worker-{thread}", daemon=True)
        self.t.start()

    def put(self, op: dict[str, Any]) -> None:
        with self._lock:
            self.op, self.since = op, time.monotonic()
        self.inbox.put(op)

    def abandon(self, older_than: float) -> dict[str, Any] | None:
        """Abandon the op in flight if it started over `older_than` s ago: that op, or None
        (nothing in flight, or not that old, or its answer is being reported)."""
        with self._lock:
            if self.op is None or self.abandoned or time.monotonic() - self.since < older_than:
                return None
            self.abandoned = True
            return self.op

    def _loop(self) -> None:
        while True:
            op = self.inbox.get()
            if op is None:
                return
            answer = self._run_op(self.thread, op)
            with self._lock:
                dropped = self.abandoned
                self.op = None
            if dropped:
                return
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
            _close_quietly(self.take(thread, cur[0]))
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
            _close_quietly(self.take(thread, process))
        return comp

    def take(self, thread: Any, process: int) -> Client | None:
        """Remove `thread`'s client if it is `process`'s (else a later process's stays)."""
        with self.lock:
            cur = self.clients.get(thread)
            if cur is None or cur[0] != process:
                return None
            del self.clients[thread]
            return cur[1]

    def close_all(self, timeout: float) -> None:
        """Close every client, in parallel, waiting at most `timeout` s in all (a close that
        hangs is left to its daemon thread)."""
        with self.lock:
            left = [c for _, c in self.clients.values()]
            self.clients.clear()
        closers = [threading.Thread(target=_close_quietly, args=(c,), name="close-client", daemon=True)
                   for c in left]
        for t in closers:
            t.start()
        deadline = time.monotonic() + timeout
        for t in closers:
            t.join(max(0.0, deadline - time.monotonic()))


def _close_quietly(client: Client | None) -> None:
    if client is None:
        return
    try:
        client.close()
    except Exception:  # noqa: BLE001 - a broken client is still gone
        pass


class ThreadedExecutor:
    """`OpLoop`'s executor for a real run (contracts/generator/loop.py `Executor`): worker
    threads, a client pool, the history's clock, the abandonment of client ops older than
    `op_timeout` s (None: never); `close()` ends the workers and clients."""

    def __init__(
        self,
        *,
        threads: int,
        clients: Callable[[int, int], Client],
        history: EventSink,
        nemesis: Callable[[dict[str, Any]], Any] | None,
        stop: threading.Event,
        op_timeout: float | None = None,
    ):
        self.done: queue.SimpleQueue = queue.SimpleQueue()
        self.pool = _ClientPool(clients)
        self.history = history
        self.op_timeout = op_timeout
        self._next_check = 0.0
        self.runners: dict[Any, _Worker] = {t: self._client_worker(t) for t in range(threads)}
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

    def _client_worker(self, thread: int) -> _Worker:
        return _Worker(thread, self.pool.run_op, self.done, self.history, True)

    def start(self, thread: Any, op: dict[str, Any]) -> None:
        self.runners[thread].put({k: v for k, v in op.items() if k != "time"})

    def ready(self) -> Completion | None:
        try:
            return self.done.get_nowait()
        except queue.Empty:
            return self._overdue()

    def wait(self, until: int | None) -> Completion | None:
        if (late := self._overdue()) is not None:
            return late
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

    def _overdue(self) -> Completion | None:
        """The `info` completion of one client op in flight for over `op_timeout` s, whose
        worker is abandoned and replaced (looked for at most every POLL_S)."""
        if self.op_timeout is None or time.monotonic() < self._next_check:
            return None
        self._next_check = time.monotonic() + POLL_S
        for thread, w in list(self.runners.items()):
            if thread == NEMESIS_THREAD or (op := w.abandon(self.op_timeout)) is None:
                continue
            # its client is closed beside the op still running in it (a close may hang too)
            stuck = self.pool.take(thread, op["process"])
            threading.Thread(target=_close_quietly, args=(stuck,), name="close-client", daemon=True).start()
            self.runners[thread] = self._client_worker(thread)
            answer = {"type": "info",
                      "error": f"indeterminate: the client did not return in {self.op_timeout:g} s (abandoned)"}
            return thread, self.history.append(completion_event(op, answer))
        return None

    def close(self, join_timeout: float) -> None:
        """End the workers (an op still in flight, after `stop`, stays open: its answer is
        dropped) and close the clients, waiting at most `join_timeout` s for each."""
        for w in self.runners.values():
            w.abandon(0.0)
            w.inbox.put(None)
        deadline = time.monotonic() + join_timeout
        for w in self.runners.values():
            w.t.join(max(0.0, deadline - time.monotonic()))
        self.pool.close_all(join_timeout)


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
    op_timeout: float | None = None,
) -> RunStats:
    """Run `gen` to exhaustion (or until `stop`) on worker threads; see the module docstring."""
    ex = ThreadedExecutor(
        threads=threads, clients=clients, history=history, nemesis=nemesis, stop=stop or threading.Event(),
        op_timeout=op_timeout,
    )
    try:
        return OpLoop(gen, ex, threads=threads, rng=rng, nemesis=nemesis is not None, on_event=on_event).run()
    finally:
        ex.close(join_timeout)
