"""Operation generators: small combinators like Jepsen's, and the one loop that drives them.

A generator is an object with two methods:

- `op(ctx) -> dict | Pending | None`: the next operation, `PENDING`/`Pending(until=t)` when
  it has nothing *now* but may later (waiting for a thread, a barrier, or time `t`), or
  `None` when it is exhausted for good. An operation is a dict with `f`, `value`, the
  `process` that runs it (one of `ctx`'s free processes) and the earliest `time` (ns since
  the test started) at which to run it. Returning an op commits to it: the loop runs it
  (no peeking; combinators that choose among children buffer what they drew).
- `update(ctx, event)`: every invoke and completion of the test, so generators can react
  (`until_ok`, the queue workload's final polls).

Generators are mutable and single-use; `copy.deepcopy` of a fresh one is a fresh one
(`each_thread`, `cycle`). Every random choice goes through `ctx.rng`, one `random.Random`
seeded once per test, so a seed replays the same op stream for the same completions.

Plain values are lifted (`lift`): a dict is one op, a callable `f(ctx)` is called per op
until it returns None, a list/tuple is a concatenation, a generator object passes through.

Combinators: `limit`, `time_limit` (seconds), `overtime` and `while_nemesis_busy` (a
deadline extended while a condition holds), `stagger` (random gaps uniform in [0, 2 dt]
across all threads), `rate` (= stagger 1/r), `delay` (fixed gaps), `mix`, `concat`,
`phases` (each phase ends when it is exhausted *and* every thread is idle), `synchronize`,
`each_thread`, `each_process` (a fresh copy per process id), `until_ok`, `cycle`,
`repeat`, `flip_flop`, `on_threads`/`clients`/`nemesis`, `any_of` (the soonest of
several), `sleep`, `map_ops`, `filter_ops`, `on_update`.

The modules, one job each (everything is re-exported here: `from contracts import generator
as gen; gen.any_of(...)`):

- core.py: the contract's types (`Generator`, `Context`, `Pending`, `NEMESIS_THREAD`, `NS`);
- leaves.py: `Once`, `Fn`, `Repeat`, `Sleep`, `Concat` and `lift`;
- wrappers.py: one child changed (`Limit`, `TimeLimit`, `Stagger`, `OnThreads`, ...);
- composition.py: several children or copies (`Mix`, `AnyOf`, `EachThread`, `phases`, ...);
- names.py: the combinators by their friendly names (`limit`, `rate`, `any_of`, ...);
- concurrency.py: `parse_concurrency`, the `--concurrency` spec;
- loop.py: `OpLoop`, the one op loop, and its `Executor` protocol, `RunStats`, `GeneratorStuck`;
- virtual.py: the virtual-clock executor and `simulate`. The threaded executor with real
  clients is harness/interpreter.py (`run`).
"""

from contracts.generator.composition import (
    AnyOf,
    Cycle,
    EachProcess,
    EachThread,
    FlipFlop,
    Mix,
    Synchronize,
    UntilOk,
    phases,
)
from contracts.generator.concurrency import parse_concurrency
from contracts.generator.core import (
    NEMESIS_THREAD,
    NS,
    PENDING,
    Context,
    Generator,
    Pending,
    Thread,
    fill,
    soonest,
)
from contracts.generator.leaves import Concat, Fn, Once, Repeat, Sleep, lift
from contracts.generator.loop import Executor, GeneratorStuck, OpLoop, RunStats, completion_event
from contracts.generator.names import (
    any_of,
    clients,
    concat,
    cycle,
    delay,
    each_process,
    each_thread,
    filter_ops,
    flip_flop,
    limit,
    lulls,
    map_ops,
    mix,
    nemesis,
    on_threads,
    on_update,
    once,
    overtime,
    rate,
    repeat,
    sleep,
    stagger,
    synchronize,
    time_limit,
    until_ok,
    while_nemesis_busy,
)
from contracts.generator.virtual import VirtualExecutor, simulate
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

__all__ = [
    "NEMESIS_THREAD",
    "NS",
    "PENDING",
    "AnyOf",
    "Concat",
    "Context",
    "Cycle",
    "EachProcess",
    "EachThread",
    "Executor",
    "FilterOps",
    "FlipFlop",
    "Fn",
    "Generator",
    "GeneratorStuck",
    "Limit",
    "Lulls",
    "MapOps",
    "Mix",
    "OnThreads",
    "OnUpdate",
    "Once",
    "OpLoop",
    "Overtime",
    "Pending",
    "Repeat",
    "RunStats",
    "Sleep",
    "Stagger",
    "Synchronize",
    "Thread",
    "TimeLimit",
    "UntilOk",
    "VirtualExecutor",
    "WhileNemesisBusy",
    "any_of",
    "clients",
    "completion_event",
    "concat",
    "cycle",
    "delay",
    "each_process",
    "each_thread",
    "fill",
    "filter_ops",
    "flip_flop",
    "lift",
    "limit",
    "lulls",
    "map_ops",
    "mix",
    "nemesis",
    "on_threads",
    "on_update",
    "once",
    "overtime",
    "parse_concurrency",
    "phases",
    "rate",
    "repeat",
    "simulate",
    "sleep",
    "soonest",
    "stagger",
    "synchronize",
    "time_limit",
    "until_ok",
    "while_nemesis_busy",
]
