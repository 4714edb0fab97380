"""The generator contract's types: `Generator`, `Context`, `Pending`, threads and time.

A generator answers `op(ctx)` with an op dict, `PENDING`/`Pending(until=t)` or None, and
hears every invoke and completion through `update(ctx, event)` (the package docstring,
contracts/generator/__init__.py, states the whole contract). `Context` is what it may look at:
the time (ns since the test started), the threads and their current processes, the idle
threads, and the one seeded rng. `fill` completes an op template, `soonest` merges pendings.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping
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


@dataclass(slots=True)
class Context:
    """What a generator may look at: the time, the threads, the seeded rng.

    `workers` maps every thread (of this view) to its current process; `free` are the idle
    threads. `restrict` gives a view on a subset of threads (used by routing combinators).
    A context is a snapshot: the op loop hands out a new one when anything changed and never
    changes one it handed out (generators must not change it either).
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
        return Context(
            self.time,
            self.rng,
            {t: p for t, p in self.workers.items() if t in ts},
            frozenset(t for t in self.free if t in ts),
            frozenset(self.workers.keys() & ts),
        )

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
