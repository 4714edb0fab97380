"""Wrappers: one child generator, changed in one way. `Limit` (n ops), `TimeLimit`,
`Overtime` and `WhileNemesisBusy` (a deadline), `Stagger` (op times spaced out), `Lulls` (spells of
a trickle), `MapOps`/`FilterOps` (ops
rewritten or dropped), `OnUpdate` (every event seen), `OnThreads` (routed to some threads)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from contracts.generator.core import NEMESIS_THREAD, NS, PENDING, Context, Generator, Pending, Thread
from contracts.generator.leaves import lift


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


class Overtime(Generator):
    """`gen`'s ops until `seconds` after the first time it is asked, then on while
    `more(ctx)` holds, at most `grace` s more; ops scheduled past the limit then in force
    are dropped."""

    def __init__(self, seconds: float, grace: float, more: Callable[[Context], bool], gen: Any):
        self.dt, self.grace = int(seconds * NS), int(grace * NS)
        self.more = more
        self.gen = lift(gen)
        self.deadline: int | None = None

    def op(self, ctx: Context) -> dict[str, Any] | Pending | None:
        if self.deadline is None:
            self.deadline = ctx.time + self.dt
        limit = self.deadline + self.grace if self.more(ctx) else self.deadline
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


class WhileNemesisBusy(Overtime):
    """`gen`'s ops until `seconds` after the first time it is asked, then on while the
    nemesis thread is busy with an op (a fault under way, e.g. a story: it plays out under
    load) or `owed()` holds (the schedule still owes faults it must play), at most `grace`
    s more; ops scheduled past the limit then in force are dropped."""

    def __init__(self, seconds: float, grace: float, gen: Any, owed: Callable[[], bool] | None = None):
        def more(ctx: Context) -> bool:
            return NEMESIS_THREAD not in ctx.free or (owed is not None and owed())

        super().__init__(seconds, grace, more, gen)


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


class Lulls(Generator):
    """`gen`'s ops, but in a lull of `seconds` once every `every` s (the first placed at
    random in the first period, from `ctx.rng`) at most `rate` ops per second (random gaps
    uniform in [0, 2/rate]): a load that drops to a trickle now and then, so that faults
    also meet a partition with one record or none in flight (a divergent tail one record
    long, an idle follower's fetch)."""

    def __init__(self, every: float, seconds: float, rate: float, gen: Any):
        if every <= 0 or not 0 < seconds < every or rate <= 0:
            raise ValueError(f"lulls need 0 < seconds < every and rate > 0 (got every {every}, seconds {seconds}, "
                             f"rate {rate})")
        self.every, self.length, self.dt = int(every * NS), int(seconds * NS), NS / rate
        self.gen = lift(gen)
        self.first: int | None = None
        self.next_time = 0

    def lull_at(self, t: int) -> bool:
        """Whether time `t` falls in a lull (after the first call placed them)."""
        return self.first is not None and t >= self.first and (t - self.first) % self.every < self.length

    def op(self, ctx: Context) -> dict[str, Any] | Pending | None:
        if self.first is None:
            self.first = ctx.time + int(ctx.rng.uniform(0, self.every - self.length))
        first = self.first
        out = self.gen.op(ctx)
        if isinstance(out, dict) and self.lull_at(out["time"]):
            t = out["time"]
            end = t - (t - first) % self.every + self.length
            out["time"] = min(max(t, self.next_time), end)  # the load comes back when the lull ends
            self.next_time = out["time"] + int(ctx.rng.uniform(0, 2 * self.dt))
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
