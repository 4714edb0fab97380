"""Operation generators: small combinators like Jepsen's, driven by `harness.interpreter`.

A generator is an object with two methods:

- `op(ctx) -> dict | Pending | None`: the next operation, `PENDING`/`Pending(until=t)` when
  it has nothing *now* but may later (waiting for a thread, a barrier, or time `t`), or
  `None` when it is exhausted for good. An operation is a dict with `f`, `value`, the
  `process` that runs it (one of `ctx`'s free processes) and the earliest `time` (ns since
  the test started) at which to run it. Returning an op commits to it: the interpreter
  runs it (no peeking; combinators that choose among children buffer what they drew).
- `update(ctx, event)`: every invoke and completion of the test, so generators can react
  (`until_ok`, the queue workload's final polls).

Generators are mutable and single-use; `copy.deepcopy` of a fresh one is a fresh one
(`each_thread`, `cycle`). Every random choice goes through `ctx.rng`, one `random.Random`
seeded once per test, so a seed replays the same op stream for the same completions.

Plain values are lifted (`lift`): a dict is one op, a callable `f(ctx)` is called per op
until it returns None, a list/tuple is a concatenation, a generator object passes through.

Combinators: `limit`, `time_limit` (seconds), `stagger` (random gaps uniform in [0, 2 dt]
across all threads), `rate` (= stagger 1/r), `delay` (fixed gaps), `mix`, `concat`,
`phases` (each phase ends when it is exhausted *and* every thread is idle), `synchronize`,
`each_thread`, `each_process` (a fresh copy per process id), `until_ok`, `cycle`,
`repeat`, `flip_flop`, `on_threads`/`clients`/`nemesis`, `any_of` (the soonest of
several), `sleep`, `map_ops`, `filter_ops`, `on_update`.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

Thread = int | str  # client threads 0..n-1, and "nemesis"
NEMESIS_THREAD = "nemesis"
NS = 1_000_000_000


@dataclass(frozen=True)
class Pending:
    """Nothing now; ask again after an event, or at `until` (ns) if given."""

    until: int | None = None


PENDING = Pending()


@dataclass
class Context:
    """What a generator may look at: the time, the threads, the seeded rng.

    `workers` maps every thread (of this view) to its current process; `free` are the idle
    threads. `restrict` gives a view on a subset of threads (used by routing combinators).
    """

    time: int
    rng: random.Random
    workers: dict[Thread, Any]
    free: frozenset[Thread]
    all_threads: frozenset[Thread] = field(default=frozenset())

    def __post_init__(self) -> None:
        if not self.all_threads:
            self.all_threads = frozenset(self.workers)

    def restrict(self, threads: Iterable[Thread]) -> Context:
        ts = set(threads)
        return Context(self.time, self.rng, {t: p for t, p in self.workers.items() if t in ts},
                       frozenset(t for t in self.free if t in ts), frozenset(self.workers.keys() & ts))

    def free_threads(self) -> list[Thread]:
        """The idle threads in a stable order (ints first, then names)."""
        return sorted(self.free, key=lambda t: (isinstance(t, str), str(t) if isinstance(t, str) else t))

    def free_processes(self) -> list[Any]:
        return [self.workers[t] for t in self.free_threads()]

    def random_free_thread(self) -> Thread | None:
        """One of the free threads, drawn with `rng` (one draw, even when only one is free);
        None when none is free."""
        threads = self.free_threads()
        return threads[self.rng.randrange(len(threads))] if threads else None

    def random_free_process(self) -> Any | None:
        """The process of `random_free_thread()` (the same draw); None when none is free."""
        t = self.random_free_thread()
        return None if t is None else self.workers[t]

    def thread_of(self, process: Any) -> Thread | None:
        for t, p in self.workers.items():
            if p == process:
                return t
        return None

    def all_free(self) -> bool:
        return self.free == frozenset(self.workers)


class Generator:
    """Base class: override `op`; `update` does nothing by default."""

    def op(self, ctx: Context) -> dict[str, Any] | Pending | None:
        raise NotImplementedError

    def update(self, ctx: Context, event: Mapping[str, Any]) -> None:
        return None


def fill(op: Mapping[str, Any], ctx: Context) -> dict[str, Any] | Pending:
    """Complete an op template: a free process (rng choice) and the time now, unless given."""
    out = dict(op)
    if "process" not in out:
        procs = ctx.free_processes()
        if not procs:
            return PENDING
        out["process"] = procs[ctx.rng.randrange(len(procs))] if len(procs) > 1 else procs[0]
    elif ctx.thread_of(out["process"]) not in ctx.free:
        return PENDING
    out.setdefault("value", None)
    out["time"] = max(int(out.get("time", ctx.time)), ctx.time)
    return out


def soonest(a: Pending | None, b: Pending | None) -> Pending | None:
    """The earlier of two pendings (None = exhausted is 'never')."""
    if a is None:
        return b
    if b is None:
        return a
    if a.until is None or b.until is None:
        return Pending(a.until if b.until is None else b.until) if (a.until or b.until) else PENDING
    return Pending(min(a.until, b.until))


# --------------------------------------------------------------------------- leaves


class Once(Generator):
    """One op from a template dict."""

    def __init__(self, template: Mapping[str, Any]):
        self.template = dict(template)
        self.done = False

    def op(self, ctx: Context) -> dict[str, Any] | Pending | None:
        if self.done:
            return None
        out = fill(self.template, ctx)
        if isinstance(out, dict):
            self.done = True
        return out


class Fn(Generator):
    """Ops from `fn(ctx) -> template | None` (None ends the generator)."""

    def __init__(self, fn: Callable[[Context], Mapping[str, Any] | None]):
        self.fn = fn
        self.done = False

    def op(self, ctx: Context) -> dict[str, Any] | Pending | None:
        if self.done:
            return None
        if not ctx.free:
            return PENDING
        t = self.fn(ctx)
        if t is None:
            self.done = True
            return None
        return fill(t, ctx)


class Repeat(Generator):
    """The same template `n` times (forever when `n` is None)."""

    def __init__(self, template: Mapping[str, Any], n: int | None = None):
        self.template = dict(template)
        self.left = n

    def op(self, ctx: Context) -> dict[str, Any] | Pending | None:
        if self.left is not None and self.left <= 0:
            return None
        out = fill(self.template, ctx)
        if isinstance(out, dict) and self.left is not None:
            self.left -= 1
        return out


class Sleep(Generator):
    """Emits nothing for `seconds`, then is exhausted (a pause inside `concat`/`phases`)."""

    def __init__(self, seconds: float):
        self.dt = int(seconds * NS)
        self.until: int | None = None

    def op(self, ctx: Context) -> Pending | None:
        if self.until is None:
            self.until = ctx.time + self.dt
        return None if ctx.time >= self.until else Pending(self.until)


def lift(x: Any) -> Generator:
    """A generator from a dict (once), a callable (per op), a list/tuple (concat) or a generator."""
    if isinstance(x, Generator):
        return x
    if isinstance(x, Mapping):
        return Once(x)
    if isinstance(x, list | tuple):
        return Concat(*x)
    if callable(x):
        return Fn(x)
    raise TypeError(f"not a generator: {x!r}")


# --------------------------------------------------------------------------- wrappers


class Limit(Generator):
    def __init__(self, n: int, gen: Any):
        self.left = n
        self.gen = lift(gen)

    def op(self, ctx: Context) -> dict[str, Any] | Pending | None:
        if self.left <= 0:
            return None
        out = self.gen.op(ctx)
        if isinstance(out, dict):
            self.left -= 1
        return out

    def update(self, ctx: Context, event: Mapping[str, Any]) -> None:
        self.gen.update(ctx, event)


class TimeLimit(Generator):
    """Ops until `seconds` after the first time it is asked; ops scheduled later are dropped."""

    def __init__(self, seconds: float, gen: Any):
        self.dt = int(seconds * NS)
        self.gen = lift(gen)
        self.deadline: int | None = None

    def op(self, ctx: Context) -> dict[str, Any] | Pending | None:
        if self.deadline is None:
            self.deadline = ctx.time + self.dt
        if ctx.time >= self.deadline:
            return None
        out = self.gen.op(ctx)
        if isinstance(out, dict) and out["time"] >= self.deadline:
            return None
        if isinstance(out, Pending):
            return Pending(self.deadline if out.until is None else min(out.until, self.deadline))
        return out

    def update(self, ctx: Context, event: Mapping[str, Any]) -> None:
        self.gen.update(ctx, event)


class WhileNemesisBusy(Generator):
    """`gen`'s ops until `seconds` after the first time it is asked, then on while the
    nemesis thread is busy with an op (a fault under way, e.g. a story: it plays out under
    load), at most `grace` s more; ops scheduled past the limit then in force are dropped."""

    def __init__(self, seconds: float, grace: float, gen: Any):
        self.dt, self.grace = int(seconds * NS), int(grace * NS)
        self.gen = lift(gen)
        self.deadline: int | None = None

    def op(self, ctx: Context) -> dict[str, Any] | Pending | None:
        if self.deadline is None:
            self.deadline = ctx.time + self.dt
        limit = self.deadline if NEMESIS_THREAD in ctx.free else self.deadline + self.grace
        if ctx.time >= limit:
            return None
        out = self.gen.op(ctx)
        if isinstance(out, dict) and out["time"] >= limit:
            return None
        if isinstance(out, Pending):
            return Pending(limit if out.until is None else min(out.until, limit))
        return out

    def update(self, ctx: Context, event: Mapping[str, Any]) -> None:
        self.gen.update(ctx, event)


class Stagger(Generator):
    """Ops at random gaps uniform in [0, 2 dt] across all threads (mean rate 1/dt)."""

    def __init__(self, seconds: float, gen: Any, uniform: bool = True):
        self.dt = seconds * NS
        self.gen = lift(gen)
        self.uniform = uniform
        self.next_time: int | None = None

    def op(self, ctx: Context) -> dict[str, Any] | Pending | None:
        if self.next_time is None:
            self.next_time = ctx.time
        out = self.gen.op(ctx)
        if isinstance(out, dict):
            out["time"] = max(out["time"], self.next_time)
            gap = ctx.rng.uniform(0, 2 * self.dt) if self.uniform else self.dt
            self.next_time = out["time"] + int(gap)
        return out

    def update(self, ctx: Context, event: Mapping[str, Any]) -> None:
        self.gen.update(ctx, event)


class MapOps(Generator):
    def __init__(self, fn: Callable[[dict[str, Any]], dict[str, Any]], gen: Any):
        self.fn = fn
        self.gen = lift(gen)

    def op(self, ctx: Context) -> dict[str, Any] | Pending | None:
        out = self.gen.op(ctx)
        return self.fn(out) if isinstance(out, dict) else out

    def update(self, ctx: Context, event: Mapping[str, Any]) -> None:
        self.gen.update(ctx, event)


class FilterOps(Generator):
    """Drops ops for which `pred(op)` is false (asks the child again, at most 1000 times per call)."""

    def __init__(self, pred: Callable[[dict[str, Any]], bool], gen: Any):
        self.pred = pred
        self.gen = lift(gen)

    def op(self, ctx: Context) -> dict[str, Any] | Pending | None:
        for _ in range(1000):
            out = self.gen.op(ctx)
            if not isinstance(out, dict) or self.pred(out):
                return out
        return PENDING

    def update(self, ctx: Context, event: Mapping[str, Any]) -> None:
        self.gen.update(ctx, event)


class OnUpdate(Generator):
    """Calls `fn(event)` for every event, then forwards (workloads track offsets with it)."""

    def __init__(self, fn: Callable[[Mapping[str, Any]], None], gen: Any):
        self.fn = fn
        self.gen = lift(gen)

    def op(self, ctx: Context) -> dict[str, Any] | Pending | None:
        return self.gen.op(ctx)

    def update(self, ctx: Context, event: Mapping[str, Any]) -> None:
        self.fn(event)
        self.gen.update(ctx, event)


class OnThreads(Generator):
    """Routes `gen` to the threads for which `pred(thread)` holds."""

    def __init__(self, pred: Callable[[Thread], bool], gen: Any):
        self.pred = pred
        self.gen = lift(gen)

    def _view(self, ctx: Context) -> Context:
        return ctx.restrict(t for t in ctx.workers if self.pred(t))

    def op(self, ctx: Context) -> dict[str, Any] | Pending | None:
        view = self._view(ctx)
        if not view.workers:
            return None
        return self.gen.op(view)

    def update(self, ctx: Context, event: Mapping[str, Any]) -> None:
        view = self._view(ctx)
        if view.thread_of(event.get("process")) is not None:
            self.gen.update(view, event)


# --------------------------------------------------------------------------- composition


class Concat(Generator):
    """Each generator until it is exhausted, then the next (no barrier: see `phases`)."""

    def __init__(self, *gens: Any):
        self.gens = [lift(g) for g in gens]
        self.i = 0

    def op(self, ctx: Context) -> dict[str, Any] | Pending | None:
        while self.i < len(self.gens):
            out = self.gens[self.i].op(ctx)
            if out is not None:
                return out
            self.i += 1
        return None

    def update(self, ctx: Context, event: Mapping[str, Any]) -> None:
        if self.i < len(self.gens):
            self.gens[self.i].update(ctx, event)


class Synchronize(Generator):
    """Waits until every thread (of its view) is idle, then behaves like `gen`."""

    def __init__(self, gen: Any):
        self.gen = lift(gen)
        self.started = False

    def op(self, ctx: Context) -> dict[str, Any] | Pending | None:
        if not self.started:
            if not ctx.all_free():
                return PENDING
            self.started = True
        return self.gen.op(ctx)

    def update(self, ctx: Context, event: Mapping[str, Any]) -> None:
        if self.started:
            self.gen.update(ctx, event)


def phases(*gens: Any) -> Generator:
    """Each generator in turn; a phase starts only when every thread is idle."""
    return Concat(*(Synchronize(g) for g in gens))


class Mix(Generator):
    """A random child per op (children that are pending are skipped, exhausted ones dropped)."""

    def __init__(self, gens: Iterable[Any]):
        self.gens = [lift(g) for g in gens]

    def op(self, ctx: Context) -> dict[str, Any] | Pending | None:
        pend: Pending | None = None
        order = list(range(len(self.gens)))
        ctx.rng.shuffle(order)
        dead = []
        for i in order:
            out = self.gens[i].op(ctx)
            if isinstance(out, dict):
                self._drop(dead)
                return out
            if out is None:
                dead.append(i)
            else:
                pend = soonest(pend, out)
        self._drop(dead)
        return pend if self.gens else None

    def _drop(self, dead: list[int]) -> None:
        for i in sorted(dead, reverse=True):
            del self.gens[i]

    def update(self, ctx: Context, event: Mapping[str, Any]) -> None:
        for g in self.gens:
            g.update(ctx, event)


class AnyOf(Generator):
    """The soonest op of several generators (each child's drawn op is kept until it is used)."""

    def __init__(self, *gens: Any):
        self.gens = [lift(g) for g in gens]
        self.buf: list[dict[str, Any] | None] = [None] * len(self.gens)
        self.done = [False] * len(self.gens)

    def op(self, ctx: Context) -> dict[str, Any] | Pending | None:
        pend: Pending | None = None
        best = None
        for i, g in enumerate(self.gens):
            if self.done[i]:
                continue
            b = self.buf[i]
            if b is not None and ctx.thread_of(b["process"]) not in ctx.free:
                pend = soonest(pend, PENDING)
                continue
            if b is None:
                out = g.op(ctx)
                if out is None:
                    self.done[i] = True
                    continue
                if isinstance(out, Pending):
                    pend = soonest(pend, out)
                    continue
                self.buf[i] = b = out
            if best is None or b["time"] < self.buf[best]["time"]:  # type: ignore[index]
                best = i
        if best is not None:
            t = self.buf[best]["time"]  # type: ignore[index]
            if pend is not None and t > ctx.time:
                # a pending child may still produce something sooner: do not commit yet
                return Pending(t if pend.until is None else min(t, pend.until))
            out, self.buf[best] = self.buf[best], None
            return out
        return pend

    def update(self, ctx: Context, event: Mapping[str, Any]) -> None:
        for i, g in enumerate(self.gens):
            if not self.done[i]:
                g.update(ctx, event)


class EachThread(Generator):
    """A fresh copy of `gen` for every thread, each seeing only its own thread."""

    def __init__(self, gen: Any):
        self.template = lift(gen)
        self.copies: dict[Thread, Generator] = {}
        self.finished: set[Thread] = set()

    def _copy(self, t: Thread) -> Generator:
        g = self.copies.get(t)
        if g is None:
            g = self.copies[t] = copy.deepcopy(self.template)
        return g

    def op(self, ctx: Context) -> dict[str, Any] | Pending | None:
        pend: Pending | None = None
        for t in ctx.free_threads():
            if t in self.finished:
                continue
            out = self._copy(t).op(ctx.restrict([t]))
            if isinstance(out, dict):
                return out
            if out is None:
                self.finished.add(t)
            else:
                pend = soonest(pend, out)
        if self.finished >= set(ctx.workers):
            return None
        return pend if pend is not None else PENDING

    def update(self, ctx: Context, event: Mapping[str, Any]) -> None:
        t = ctx.thread_of(event.get("process"))
        if t is not None and t in self.copies and t not in self.finished:
            self.copies[t].update(ctx.restrict([t]), event)


class EachProcess(Generator):
    """A fresh copy of `gen` for every process id: a thread whose process crashed (got `info`)
    starts over with a new copy under its new process. Exhausted when every current process's
    copy is exhausted."""

    def __init__(self, gen: Any):
        self.template = lift(gen)
        self.copies: dict[Any, Generator] = {}
        self.finished: set[Any] = set()

    def op(self, ctx: Context) -> dict[str, Any] | Pending | None:
        pend: Pending | None = None
        for t in ctx.free_threads():
            p = ctx.workers[t]
            if p in self.finished:
                continue
            g = self.copies.get(p)
            if g is None:
                g = self.copies[p] = copy.deepcopy(self.template)
            out = g.op(ctx.restrict([t]))
            if isinstance(out, dict):
                return out
            if out is None:
                self.finished.add(p)
            else:
                pend = soonest(pend, out)
        if all(p in self.finished for p in ctx.workers.values()):
            return None
        return pend if pend is not None else PENDING

    def update(self, ctx: Context, event: Mapping[str, Any]) -> None:
        p = event.get("process")
        g = self.copies.get(p)
        t = ctx.thread_of(p)
        if g is not None and t is not None and p not in self.finished:
            g.update(ctx.restrict([t]), event)


class UntilOk(Generator):
    """Ops from `gen` until one of them completes `ok`."""

    def __init__(self, gen: Any):
        self.gen = lift(gen)
        self.outstanding: set[Any] = set()
        self.ok = False

    def op(self, ctx: Context) -> dict[str, Any] | Pending | None:
        if self.ok:
            return None
        out = self.gen.op(ctx)
        if isinstance(out, dict):
            self.outstanding.add(out["process"])
        elif out is None and self.outstanding:
            return PENDING  # the child is done, but an op may still come back ok... or not
        return out

    def update(self, ctx: Context, event: Mapping[str, Any]) -> None:
        p = event.get("process")
        if p in self.outstanding and event.get("type") in ("ok", "fail", "info"):
            self.outstanding.discard(p)
            if event.get("type") == "ok":
                self.ok = True
        if not self.ok:
            self.gen.update(ctx, event)


class Cycle(Generator):
    """`gen` again from a fresh copy each time it is exhausted (`times` rounds, or forever).
    A round that yields no op at all ends the cycle (no busy loop on an empty generator)."""

    def __init__(self, gen: Any, times: int | None = None):
        self.template = lift(gen)
        self.times = times
        self.round = 0
        self.cur = copy.deepcopy(self.template)
        self.emitted = False

    def op(self, ctx: Context) -> dict[str, Any] | Pending | None:
        while True:
            if self.times is not None and self.round >= self.times:
                return None
            out = self.cur.op(ctx)
            if out is not None:
                if isinstance(out, dict):
                    self.emitted = True
                return out
            if not self.emitted:
                return None
            self.round += 1
            self.cur = copy.deepcopy(self.template)
            self.emitted = False

    def update(self, ctx: Context, event: Mapping[str, Any]) -> None:
        self.cur.update(ctx, event)


class FlipFlop(Generator):
    """Alternates between two generators' ops, starting with `a`; ends when either ends."""

    def __init__(self, a: Any, b: Any):
        self.gens = [lift(a), lift(b)]
        self.i = 0

    def op(self, ctx: Context) -> dict[str, Any] | Pending | None:
        out = self.gens[self.i].op(ctx)
        if isinstance(out, dict):
            self.i ^= 1
        return out

    def update(self, ctx: Context, event: Mapping[str, Any]) -> None:
        for g in self.gens:
            g.update(ctx, event)


# --------------------------------------------------------------------------- friendly names


def once(template: Mapping[str, Any]) -> Generator:
    return Once(template)


def repeat(template: Mapping[str, Any], n: int | None = None) -> Generator:
    return Repeat(template, n)


def limit(n: int, gen: Any) -> Generator:
    return Limit(n, gen)


def time_limit(seconds: float, gen: Any) -> Generator:
    return TimeLimit(seconds, gen)


def while_nemesis_busy(seconds: float, grace: float, gen: Any) -> Generator:
    return WhileNemesisBusy(seconds, grace, gen)


def stagger(seconds: float, gen: Any) -> Generator:
    return Stagger(seconds, gen)


def rate(ops_per_s: float, gen: Any) -> Generator:
    """About `ops_per_s` ops per second across all threads (random gaps, see `stagger`)."""
    if ops_per_s <= 0:
        raise ValueError("rate must be positive")
    return Stagger(1.0 / ops_per_s, gen)


def delay(seconds: float, gen: Any) -> Generator:
    return Stagger(seconds, gen, uniform=False)


def mix(*gens: Any) -> Generator:
    return Mix(gens)


def concat(*gens: Any) -> Generator:
    return Concat(*gens)


def synchronize(gen: Any) -> Generator:
    return Synchronize(gen)


def each_thread(gen: Any) -> Generator:
    return EachThread(gen)


def each_process(gen: Any) -> Generator:
    return EachProcess(gen)


def until_ok(gen: Any) -> Generator:
    return UntilOk(gen)


def cycle(gen: Any, times: int | None = None) -> Generator:
    return Cycle(gen, times)


def flip_flop(a: Any, b: Any) -> Generator:
    return FlipFlop(a, b)


def any_of(*gens: Any) -> Generator:
    return AnyOf(*gens)


def sleep(seconds: float) -> Generator:
    return Sleep(seconds)


def map_ops(fn: Callable[[dict[str, Any]], dict[str, Any]], gen: Any) -> Generator:
    return MapOps(fn, gen)


def filter_ops(pred: Callable[[dict[str, Any]], bool], gen: Any) -> Generator:
    return FilterOps(pred, gen)


def on_update(fn: Callable[[Mapping[str, Any]], None], gen: Any) -> Generator:
    return OnUpdate(fn, gen)


def on_threads(pred: Callable[[Thread], bool], gen: Any) -> Generator:
    return OnThreads(pred, gen)


def clients(gen: Any) -> Generator:
    """Only the client threads."""
    return OnThreads(lambda t: t != NEMESIS_THREAD, gen)


def nemesis(gen: Any) -> Generator:
    """Only the nemesis thread."""
    return OnThreads(lambda t: t == NEMESIS_THREAD, gen)


def parse_concurrency(spec: str | int, nodes: int) -> int:
    """`--concurrency`: an integer, or `Kn` = K threads per node (Jepsen's `2n`)."""
    s = str(spec).strip()
    try:
        n = int(s[:-1]) * nodes if s.endswith("n") else int(s)
    except ValueError:
        raise ValueError(f"bad concurrency {spec!r} (an integer, or Kn for K per node)") from None
    if n < 1:
        raise ValueError(f"bad concurrency {spec!r} (must be at least 1)")
    return n


def simulate(gen: Generator, threads: int, *, seed: int = 0, latency: float = 0.001,
             complete: Callable[[dict[str, Any]], str | dict[str, Any]] | None = None,
             max_events: int = 100_000) -> list[dict[str, Any]]:
    """Run `gen` on a virtual clock (no threads, no sleeping) and return the history.

    Every op takes `latency` seconds; `complete(op)` gives its completion type (or a
    completion dict), default "ok". An `info` ends the process (the thread continues as
    process + threads), as the real interpreter does. Deterministic for a seed: used by the
    tests and to preview what a generator does.
    """
    rng = random.Random(seed)
    workers: dict[Thread, Any] = {t: t for t in range(threads)}
    free = set(workers)
    now = 0
    inflight: list[tuple[int, Thread, dict[str, Any]]] = []  # (done time, thread, completion)
    history: list[dict[str, Any]] = []
    lat = int(latency * NS)

    def ctx() -> Context:
        return Context(now, rng, dict(workers), frozenset(free))

    def finish_next() -> None:
        nonlocal now
        inflight.sort(key=lambda x: (x[0], str(x[1])))
        t_done, thread, ev = inflight.pop(0)
        now = max(now, t_done)
        ev["time"] = now
        ev["index"] = len(history)
        history.append(ev)
        free.add(thread)
        gen.update(ctx(), ev)
        if ev["type"] == "info":
            workers[thread] = workers[thread] + threads

    while len(history) < max_events:
        out = gen.op(ctx())
        if out is None:
            if not inflight:
                break
            finish_next()
            continue
        if isinstance(out, Pending):
            if inflight and (out.until is None or min(i[0] for i in inflight) <= out.until):
                finish_next()
            elif out.until is not None:
                now = max(now, out.until)
            else:
                raise RuntimeError("generator pending with nothing in flight")
            continue
        while inflight and min(i[0] for i in inflight) <= out["time"]:
            finish_next()
        now = max(now, out["time"])
        thread = next(t for t, p in workers.items() if p == out["process"])
        free.discard(thread)
        inv = {"process": out["process"], "type": "invoke", "f": out["f"], "value": out.get("value"),
               "time": now, "index": len(history)}
        history.append(inv)
        gen.update(ctx(), inv)
        c = complete(out) if complete is not None else "ok"
        comp = {"type": c} if isinstance(c, str) else dict(c)
        ev = {"process": out["process"], "type": comp.pop("type"), "f": out["f"],
              "value": comp.pop("value", out.get("value")), **comp}
        inflight.append((now + lat, thread, ev))
    return history
