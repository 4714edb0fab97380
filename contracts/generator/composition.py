"""Composition: several children, or copies of one. `Synchronize`/`phases` (a barrier),
`Mix` (a random child per op), `AnyOf` (the soonest op of several), `EachThread` and
`EachProcess` (a fresh copy per thread / per process), `UntilOk`, `Cycle`, `FlipFlop`.
(`Concat`, the plain sequence, is in leaves.py beside `lift`, which makes it of lists.)"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any

from contracts.generator.core import PENDING, Context, Generator, Pending, Thread, soonest
from contracts.generator.leaves import Concat, lift


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
        dead: list[int] = []
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
