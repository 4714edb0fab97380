"""The op loop: the one place that drives a generator (Jepsen's generator interpreter).

`OpLoop(gen, executor, threads=n, rng=rng).run()` asks `gen` for ops whenever a thread is
idle, honours each op's `time` and each `Pending(until)`, journals every client op's
`invoke` before the executor starts it, and hands every completion back to the generator.
It returns `RunStats` when the generator is exhausted and no op is in flight, or when the
executor says stop (ops still in flight stay open: indeterminate). What it decides, for
both executors alike:

- which threads are free: client threads 0..n-1, and the nemesis thread when `nemesis=True`
  (process "nemesis"); an op names its process, the loop maps it to its thread;
- `gen.update(ctx, event)` on every client invoke (after it is journaled) and on every
  completion (nemesis ops too, under the process that ran them), then `on_event(event)`;
- a client process that completed `info` is over: its thread goes on as `process + n`,
  after the update (so routing combinators still find the crashed process);
- `GeneratorStuck` when the generator is pending with nothing in flight and no time to
  wait for; a RuntimeError when it emits an op for a busy or unknown process;
- `RunStats`: completions counted by (f, type), invokes, how it ended.

An executor (`Executor`) is where ops run and where time comes from: it starts an op on its
thread, tells the time, and hands completions back, either at once (`ready`) or by waiting
(`wait`). Two exist: `contracts.generator.virtual.VirtualExecutor` (a virtual clock and
simulated latencies, deterministic for a seed: `simulate`) and harness/interpreter.py's
`ThreadedExecutor` (a worker thread per thread, real clients, the monotonic clock of the
history file).

Placement: the loop is part of the generator contract (what `op`, `update`, `Pending` and a
process mean), imports only the standard library and contracts/generator/core.py, does no
I/O and never blocks itself (only its executor waits), so it stands on the ground floor with
the combinators, and the virtual executor beside it: every floor can preview its generators
without threads (the workloads' unit tests do). The threaded executor opens clients, runs
threads and writes the history file: that is the application's I/O, so it lives in harness/.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from contracts.generator.core import NEMESIS_THREAD, Context, Generator, Pending, Thread

Completion = tuple[Thread, dict[str, Any]]  # (the thread that ran the op, its completion event)
# keys of a completion event that come from the op, never from the client's answer
_OWN_KEYS = frozenset(("type", "value", "process", "f", "index", "time"))


class GeneratorStuck(RuntimeError):
    """The generator is pending with nothing in flight and no time to wait for."""


class EventSink(Protocol):
    """Where events are journaled: `append` stamps `index` and `time` and returns the event;
    `now()` is the test's clock (ns since it started)."""

    def append(self, event: dict[str, Any]) -> dict[str, Any]: ...
    def now(self) -> int: ...


class Executor(Protocol):
    """Runs ops and keeps time for `OpLoop`.

    - `now()`: the time, ns since the test started (the clock op times are on);
    - `stopped()`: the run must end now (ops in flight stay open);
    - `journal(event)`: append a client op's invoke event to the history, return it stamped;
    - `start(thread, op)`: run `op` (`time` included) on `thread`, which is idle; its completion
      (journaled by the executor for client threads) comes back later from `ready`/`wait`;
    - `ready()`: a completion that came in without waiting, or None;
    - `wait(until)`: the next completion, waiting until at most `until` (ns; None: no bound).
      None when `until` has come first; it may also return None sooner (a poll tick, so that
      `stopped` is noticed): the loop asks again."""

    def now(self) -> int: ...
    def stopped(self) -> bool: ...
    def journal(self, event: dict[str, Any]) -> dict[str, Any]: ...
    def start(self, thread: Thread, op: dict[str, Any]) -> None: ...
    def ready(self) -> Completion | None: ...
    def wait(self, until: int | None) -> Completion | None: ...


@dataclass
class RunStats:
    """What the loop did: completions counted by (f, type), invokes, and how it ended."""

    counts: Counter[tuple[str, str]] = field(default_factory=Counter)
    invoked: int = 0
    stopped: bool = False
    open_at_end: int = 0

    def completed(self) -> int:
        return sum(self.counts.values())


def completion_event(op: Mapping[str, Any], answer: Mapping[str, Any]) -> dict[str, Any]:
    """The completion event of `op` from its client's answer (`type`, default `info`; `value`,
    default the op's; any other key, e.g. `error`, kept). `index`/`time` are the journal's."""
    ev = {
        "process": op["process"],
        "type": answer.get("type", "info"),
        "f": op["f"],
        "value": answer.get("value", op.get("value")),
    }
    for k, v in answer.items():
        if k not in _OWN_KEYS:
            ev[k] = v
    return ev


def nemesis_event(op: Mapping[str, Any], answer: Mapping[str, Any]) -> dict[str, Any]:
    """The completion a nemesis op hands back to the generator (never journaled: the nemesis
    records its own events): `info`, with the answer's `value`."""
    return {"process": op["process"], "type": "info", "f": op["f"], "value": answer.get("value")}


class OpLoop:
    """One run of a generator on an executor (see the module docstring)."""

    def __init__(
        self,
        gen: Generator,
        executor: Executor,
        *,
        threads: int,
        rng: Any,
        nemesis: bool = False,
        on_event: Callable[[Mapping[str, Any]], None] | None = None,
    ):
        self.gen, self.ex, self.threads, self.rng, self.on_event = gen, executor, threads, rng, on_event
        # `workers` and `free` are replaced, never changed: a Context handed out stays a snapshot
        self.workers: dict[Thread, Any] = {t: t for t in range(threads)}
        if nemesis:
            self.workers[NEMESIS_THREAD] = NEMESIS_THREAD
        self.thread_of: dict[Any, Thread] = {p: t for t, p in self.workers.items()}
        self.all = frozenset(self.workers)
        self.free = self.all
        self.busy = 0
        self.stats = RunStats()

    def ctx(self) -> Context:
        return Context(self.ex.now(), self.rng, self.workers, self.free, self.all)

    def run(self) -> RunStats:
        """Until the generator is exhausted with nothing in flight, or the executor stops."""
        ex, gen = self.ex, self.gen
        try:
            while not ex.stopped():
                item = ex.ready()
                while item is not None:
                    self.complete(item)
                    item = ex.ready()
                out = gen.op(self.ctx())
                if out is None:
                    if not self.busy:
                        break
                    self.take(ex.wait(None))
                elif isinstance(out, Pending):
                    if out.until is None and not self.busy:
                        raise GeneratorStuck(
                            "the generator is pending with no op in flight and no time to wait"
                        )
                    self.take(ex.wait(out.until))
                elif self.reach(out["time"]):
                    self.invoke(out)
                else:
                    break
        finally:
            self.stats.stopped = ex.stopped()
            self.stats.open_at_end = self.busy
        return self.stats

    def reach(self, t: int) -> bool:
        """Wait until time `t`, handling the completions that come meanwhile; False: stopped."""
        ex = self.ex
        while not ex.stopped():
            item = ex.wait(t)
            if item is not None:
                self.complete(item)
            elif ex.now() >= t:
                return not ex.stopped()
        return False

    def take(self, item: Completion | None) -> None:
        if item is not None:
            self.complete(item)

    def invoke(self, out: dict[str, Any]) -> None:
        """Journal `out`'s invoke (client threads), tell the generator, start it."""
        thread = self.thread_of.get(out["process"])
        if thread is None or thread not in self.free:
            raise RuntimeError(f"generator emitted an op for busy or unknown process {out['process']!r}")
        self.free = self.free - {thread}
        self.busy += 1
        if thread != NEMESIS_THREAD:
            ev = {"process": out["process"], "type": "invoke", "f": out["f"], "value": out.get("value")}
            for k, v in out.items():
                if k not in _OWN_KEYS:
                    ev[k] = v
            ev = self.ex.journal(ev)
            self.stats.invoked += 1
            self.gen.update(self.ctx(), ev)
            if self.on_event is not None:
                self.on_event(ev)
        self.ex.start(thread, out)

    def complete(self, item: Completion) -> None:
        """A completion: the thread is free; the generator sees it under the process that ran
        the op (as Jepsen), then a client process that ended `info` is renumbered."""
        thread, ev = item
        self.busy -= 1
        self.free = self.free | {thread}
        self.stats.counts[(ev["f"], ev["type"])] += 1
        self.gen.update(self.ctx(), ev)
        if ev["type"] == "info" and thread != NEMESIS_THREAD:
            old = self.workers[thread]
            self.workers = {**self.workers, thread: old + self.threads}
            del self.thread_of[old]
            self.thread_of[old + self.threads] = thread
        if self.on_event is not None:
            self.on_event(ev)
