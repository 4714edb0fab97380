"""The generator interpreter: runs a generator's ops on worker threads and journals them.

`run(gen, clients=..., history=...)` starts one worker thread per client thread (and one
for the nemesis when `nemesis=` is given), asks `gen` for ops whenever a thread is idle,
waits until each op's `time`, appends the `invoke` event to the history *before* handing
the op to its worker, and the worker appends the completion *after* the client returned
(Jepsen's soundness argument: the history's real-time order is compatible with the
system's). It returns when the generator is exhausted and no op is in flight, or when
`stop` is set (ops still in flight stay open in the history: indeterminate).

Clients (`workloads.base.Client`): `invoke(op) -> {"type": ok|fail|info, "value": ..., ...}`
and `close()`. A client is opened lazily per process by `clients(thread, process)`. An op
that completes `info` or raises ends its process: the client is closed and the thread
continues under process `process + threads` (docs/ARCHITECTURE.md: a process that got `info` never
issues another op). An exception from `invoke` becomes `info` with `error`
"indeterminate: ..."; failing to open a client makes the op `fail` (nothing was sent).

Nemesis ops (process "nemesis") go to `nemesis(op)`, which records its own events (a
`nemesis.core.Nemesis` appends one `info` event per fault); the interpreter does not
journal them.
"""

from __future__ import annotations

import queue
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from contracts.generator import NEMESIS_THREAD, Context, Generator, Pending

NEMESIS = "nemesis"


class Client(Protocol):
    def invoke(self, op: Mapping[str, Any]) -> dict[str, Any]: ...
    def close(self) -> None: ...


class EventSink(Protocol):
    def append(self, event: dict[str, Any]) -> dict[str, Any]: ...
    def now(self) -> int: ...


class GeneratorStuck(RuntimeError):
    """The generator is pending with nothing in flight and no time to wait for."""


@dataclass
class RunStats:
    """What the interpreter did: op counts by (f, type), and how it ended."""

    counts: Counter[tuple[str, str]] = field(default_factory=Counter)
    invoked: int = 0
    stopped: bool = False
    open_at_end: int = 0

    def completed(self) -> int:
        return sum(self.counts.values())


class _Worker:
    def __init__(self, thread: Any, process: Any, run_op: Callable[[Any, dict[str, Any]], dict[str, Any]],
                 done: queue.SimpleQueue, history: EventSink, journal: bool):
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
            comp = self._run_op(self.thread, op)
            if self._journal:
                ev = {"process": op["process"], "type": comp.get("type", "info"), "f": op["f"],
                      "value": comp.get("value", op.get("value"))}
                for k, v in comp.items():
                    if k not in ("type", "value", "process", "f", "index", "time"):
                        ev[k] = v
                self._history.append(ev)
            else:
                ev = {"process": op["process"], "type": "info", "f": op["f"], "value": comp.get("value")}
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


def run(gen: Generator, *, threads: int, clients: Callable[[int, int], Client], history: EventSink,
        rng: random.Random, nemesis: Callable[[dict[str, Any]], Any] | None = None,
        stop: threading.Event | None = None,
        on_event: Callable[[Mapping[str, Any]], None] | None = None,
        join_timeout: float = 5.0) -> RunStats:
    """Run `gen` to exhaustion (or until `stop`); see the module docstring."""
    stop = stop or threading.Event()
    stats = RunStats()
    done: queue.SimpleQueue = queue.SimpleQueue()
    pool = _ClientPool(clients)
    workers: dict[Any, Any] = {t: t for t in range(threads)}
    runners: dict[Any, _Worker] = {t: _Worker(t, t, pool.run_op, done, history, True) for t in range(threads)}
    if nemesis is not None:
        workers[NEMESIS_THREAD] = NEMESIS

        def run_nemesis(_thread: Any, op: dict[str, Any]) -> dict[str, Any]:
            try:
                return {"value": nemesis(op)}
            except Exception as e:  # noqa: BLE001 - recorded by the nemesis; keep going
                return {"value": {"error": f"{type(e).__name__}: {e}"}}

        runners[NEMESIS_THREAD] = _Worker(NEMESIS_THREAD, NEMESIS, run_nemesis, done, history, False)
    free: set[Any] = set(workers)
    inflight: set[Any] = set()

    def ctx() -> Context:
        return Context(history.now(), rng, dict(workers), frozenset(free))

    def handle(item: tuple[Any, dict[str, Any]]) -> None:
        thread, ev = item
        inflight.discard(thread)
        free.add(thread)
        stats.counts[(ev["f"], ev["type"])] += 1
        gen.update(ctx(), ev)  # as Jepsen: the generator sees the completion under its own process
        if thread != NEMESIS_THREAD and ev["type"] == "info":
            workers[thread] = workers[thread] + threads
        if on_event is not None:
            on_event(ev)

    def wait(timeout: float | None) -> bool:
        """Handle one completion (waiting up to `timeout` s; None: forever); False on timeout."""
        try:
            item = done.get(timeout=timeout) if timeout is None or timeout > 0 else done.get_nowait()
        except queue.Empty:
            return False
        handle(item)
        return True

    try:
        while not stop.is_set():
            while wait(0):
                pass
            c = ctx()
            out = gen.op(c)
            if out is None:
                if not inflight:
                    break
                wait(0.2)  # bounded so that `stop` is noticed
                continue
            if isinstance(out, Pending):
                if out.until is None:
                    if not inflight:
                        raise GeneratorStuck("the generator is pending with no op in flight and no time to wait")
                    wait(0.2)
                else:
                    wait(min(0.2, max(0.0, (out.until - history.now()) / 1e9)))
                continue
            # committed to `out`: wait for its time, handling completions meanwhile
            while not stop.is_set():
                left = (out["time"] - history.now()) / 1e9
                if left <= 0:
                    break
                wait(min(left, 0.2))
            if stop.is_set():
                break
            thread = c.thread_of(out["process"])
            if thread is None or thread not in free:
                raise RuntimeError(f"generator emitted an op for busy or unknown process {out['process']!r}")
            free.discard(thread)
            inflight.add(thread)
            op = {k: v for k, v in out.items() if k != "time"}
            if thread != NEMESIS_THREAD:
                ev = history.append({"process": op["process"], "type": "invoke", "f": op["f"],
                                     "value": op.get("value"),
                                     **{k: v for k, v in op.items() if k not in ("process", "f", "value")}})
                stats.invoked += 1
                gen.update(ctx(), ev)
                if on_event is not None:
                    on_event(ev)
            runners[thread].inbox.put(op)
    finally:
        stats.stopped = stop.is_set()
        stats.open_at_end = len(inflight)
        for w in runners.values():
            w.inbox.put(None)
        deadline = time.monotonic() + join_timeout
        for w in runners.values():
            w.t.join(max(0.0, deadline - time.monotonic()))
        pool.close_all()
    return stats
