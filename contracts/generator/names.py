"""The combinators by their friendly names (Jepsen's): `limit(n, gen)`, `rate(r, gen)`,
`any_of(a, b)`, `clients(gen)`, ... Each builds one of the classes of leaves.py, wrappers.py
or composition.py; every argument called `gen` may be a plain value (`lift`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from contracts.generator.composition import (
    AnyOf,
    Cycle,
    EachProcess,
    EachThread,
    FlipFlop,
    Mix,
    Synchronize,
    UntilOk,
)
from contracts.generator.core import NEMESIS_THREAD, Generator, Thread
from contracts.generator.leaves import Concat, Once, Repeat, Sleep
from contracts.generator.wrappers import (
    FilterOps,
    Limit,
    Lulls,
    MapOps,
    OnThreads,
    OnUpdate,
    Overtime,
    Stagger,
    TimeLimit,
    WhileNemesisBusy,
)


def once(template: Mapping[str, Any]) -> Generator:
    return Once(template)


def repeat(template: Mapping[str, Any], n: int | None = None) -> Generator:
    return Repeat(template, n)


def limit(n: int, gen: Any) -> Generator:
    return Limit(n, gen)


def time_limit(seconds: float, gen: Any) -> Generator:
    return TimeLimit(seconds, gen)


def while_nemesis_busy(seconds: float, grace: float, gen: Any, owed: Callable[[], bool] | None = None
                       ) -> Generator:
    return WhileNemesisBusy(seconds, grace, gen, owed)


def overtime(seconds: float, grace: float, more: Callable[[Any], bool], gen: Any) -> Generator:
    """`gen` until `seconds`, then on while `more(ctx)` holds, at most `grace` s more."""
    return Overtime(seconds, grace, more, gen)


def stagger(seconds: float, gen: Any) -> Generator:
    return Stagger(seconds, gen)


def rate(ops_per_s: float, gen: Any) -> Generator:
    """About `ops_per_s` ops per second across all threads (random gaps, see `stagger`)."""
    if ops_per_s <= 0:
        raise ValueError("rate must be positive")
    return Stagger(1.0 / ops_per_s, gen)


def lulls(every: float, seconds: float, rate: float, gen: Any) -> Generator:
    """`gen` slowed to `rate` ops per second for `seconds` once every `every` s (`Lulls`)."""
    return Lulls(every, seconds, rate, gen)


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
