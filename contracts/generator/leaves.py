"""Leaf generators and lifting: one op (`Once`), ops from a function (`Fn`), a template
repeated (`Repeat`), a pause (`Sleep`), a sequence (`Concat`), and `lift`, which turns plain
values into generators: a dict is one op, a callable `f(ctx)` is called per op until it
returns None, a list/tuple is a concatenation, a generator passes through. `Concat` lives
here because lifting a list makes one (and `Concat` lifts its parts)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from contracts.generator.core import NS, PENDING, Context, Generator, Pending, fill


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
