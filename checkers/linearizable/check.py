"""Linearizability of a history: pairing, model encoding, P-compositionality, verdicts.

`check_events(events, model)` is the public entry point (see `checkers.linearizable`);
`analyse` returns the full `Analysis` (every partition's ops and linearization) that the
visualisation draws. Partitions are searched round-robin in growing slices of moves, so
an easy failing partition stops the run before a hard one has used the time budget
(Python's answer to Porcupine's one goroutine per partition).

Bounds: ``time_limit`` (seconds, checked between slices of about 50 ms) and
``max_configs`` (cached configurations, states and model steps summed over partitions,
about 100 bytes each: the default 10M is about 1 GB) turn into the verdict ``"unknown"``,
never into a wrong answer.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Hashable, Iterable, Iterator
from typing import Any

from checkers.linearizable.modelkit import Spec
from checkers.linearizable.models import Model, composite, get_model
from checkers.linearizable.parts import LinOp, Partition
from checkers.linearizable.plan import Hooks, Plan
from checkers.linearizable.report import ANOMALY, MAX_LISTED, Analysis, counterexample, describe_op
from checkers.linearizable.window import find_window
from contracts.errors import InputError
from contracts.history import validate_event
from contracts.pairing import Op, pair_ops

__all__ = ["ANOMALY", "MAX_LISTED", "Analysis", "LinOp", "Partition", "analyse", "check_events", "counterexample",
           "describe_op", "plan_partitions", "prepare_ops", "replay"]

DEFAULT_MAX_CONFIGS = 10_000_000
_FIRST_SLICE = 2_000
_MAX_SLICE = 100_000


# --------------------------------------------------------------------------- preparing


def prepare_ops(ops: Iterable[Op], model: Model, path: str | None = None) -> list[LinOp]:
    """Encode paired ops for `model`; ops that constrain nothing are dropped.

    A value the model cannot read, a keyed op ([key, value]) among unkeyed ones or the
    reverse, or a completion before its invocation, raises `InputError` citing the
    completion's line (the invocation's for ops that never completed).
    """
    out: list[LinOp] = []
    prep = model.prepare
    form: tuple[bool, int] | None = None  # (keyed, line) of the first op kept
    for op in ops:
        line = op.ret_line or op.line
        try:
            p = prep(op)
        except (ValueError, TypeError, KeyError, IndexError) as e:
            raise InputError(f"{e} (op invoked at line {op.line})" if line != op.line else str(e),
                             path, line) from None
        if p is None:
            continue
        start = op.invoke["time"]
        end = None
        if op.type != "info":
            end = op.complete["time"]
            if end < start:
                raise InputError(f"completion time {end} before its invocation at time {start} "
                                 f"(line {op.line})", path, line)
        elif p[2]:
            continue  # an indeterminate read-only op constrains nothing
        if form is None:
            form = (p[0] is not None, line)
        elif form[0] != (p[0] is not None):
            raise InputError(f"{op.f} value {op.invoke.get('value')!r} is {'un' if form[0] else ''}keyed but the op "
                             f"completed at line {form[1]} is {'' if form[0] else 'un'}keyed ([key, value]): "
                             f"a history uses one form", path, line)
        out.append(LinOp(op, p[0], p[1], p[2], start, end))
    return out


def partitions_of(lops: list[LinOp], partition: bool) -> list[tuple[Hashable, list[LinOp]]]:
    """Groups by key (in order of first appearance), or one group of everything."""
    if not partition:
        return [(None, lops)] if lops else []
    groups: dict[Hashable, list[LinOp]] = {}
    for lo in lops:
        g = groups.get(lo.key)
        if g is None:
            groups[lo.key] = [lo]
        else:
            g.append(lo)
    return list(groups.items())


# --------------------------------------------------------------------------- checking


def plan_partitions(lops: list[LinOp], model: Model, whole: bool) -> tuple[list[Partition], list[Plan]]:
    """The partitions of prepared ops (`prepare_ops`), one `Plan` each (one for all when `whole`)."""
    parts: list[Partition] = []
    plans: list[Plan] = []
    for key, group in partitions_of(lops, not whole):
        p, s = _plan_for(model, key, group, whole)
        parts.append(p)
        plans.append(s)
    return parts, plans


def _plan_for(model: Model, key: Hashable, lops: list[LinOp], whole: bool) -> tuple[Partition, Plan]:
    lops.sort(key=lambda lo: (lo.start, lo.op.index))
    calls = [lo.call for lo in lops]
    m = model
    groups = None
    if whole:
        keys = list(dict.fromkeys(lo.key for lo in lops))
        kidx = {k: i for i, k in enumerate(keys)}
        groups = [kidx[lo.key] for lo in lops]
        if model.abstract is not None:  # per key
            per: dict[int, list[int]] = {}
            for i, g in enumerate(groups):
                per.setdefault(g, []).append(i)
            for idx in per.values():
                for i, c in zip(idx, model.abstract([calls[i] for i in idx]), strict=True):
                    calls[i] = c
        m = composite(model, keys)
        calls = [(g, c) for g, c in zip(groups, calls, strict=True)]
    elif model.abstract is not None:
        calls = model.abstract(calls)
    spec = Spec(m.init(), m.step, m.target, m.resets, m.stuck, m.blocking, m.needs)
    hooks = Hooks(None, None, None) if whole else Hooks(m.needs, m.produces, m.leaves)
    plan = Plan(spec, calls, [lo.start for lo in lops], [lo.end for lo in lops], [lo.readonly for lo in lops],
                groups, hooks)
    return Partition(key, lops), plan


def replay(model: Model, p: Partition, order: list[int]) -> tuple[list[tuple[int, Any]], Any]:
    """(op position, state after) for the ops of `order` replayed on the concrete model from
    its initial state (the search may have run on abstracted calls), and the final state.
    Without partitioning the states shown are those of each op's own key."""
    states: dict[Hashable, Any] = {}
    out = []
    for pos in order:
        lo = p.ops[pos]
        st = states.get(lo.key)
        if st is None:
            st = model.init()
        nxt = model.step(st, lo.call)
        st = st if nxt is None else nxt  # (never None: the order is a linearization)
        states[lo.key] = st
        out.append((pos, st))
    return out, states


def analyse(events: Iterable[Any], model: str | Model, *, time_limit: float | None = None,
            partition: bool = True, max_configs: int = DEFAULT_MAX_CONFIGS,
            path: str | None = None, with_lines: bool = False) -> Analysis:
    """Check `events` (dicts, or (line, dict) pairs with `with_lines`) against `model`.

    Python's cyclic garbage collector is paused meanwhile (process-wide; resumed after):
    a check builds millions of small objects and no cycles worth collecting, and the
    collector's passes over them took 40 % of the time of a 200,000-op history.
    """
    was = gc.isenabled()
    gc.disable()
    try:
        return _analyse(events, model, time_limit, partition, max_configs, path, with_lines)
    finally:
        if was:
            gc.enable()


def _analyse(events: Iterable[Any], model: str | Model, time_limit: float | None, partition: bool,
             max_configs: int, path: str | None, with_lines: bool) -> Analysis:
    t0 = time.perf_counter()
    try:
        m = get_model(model)
    except ValueError as e:
        raise InputError(str(e), path) from None
    if not with_lines:
        events = _normalised(events, path)
    lops = prepare_ops(pair_ops(events, path, with_lines=with_lines), m, path)
    whole = not (partition and m.partition)
    parts, plans = plan_partitions(lops, m, whole)
    deadline = None if time_limit is None else t0 + time_limit
    valid: bool | str = True
    reason = ""
    total = sum(s.memory_units for s in plans)
    live = list(range(len(plans)))
    budget = _FIRST_SLICE
    while live and valid is True:
        still: list[int] = []
        for i in live:
            s, p = plans[i], parts[i]
            before = s.memory_units
            t = time.perf_counter()
            r = s.run(budget)
            t = time.perf_counter() - t
            total += s.memory_units - before
            p.configs, p.moves, p.stage = s.configs, s.moves, s.stage
            if r is None:
                still.append(i)
                # slices of about 50 ms: partitions take turns, the time limit is checked often
                budget = max(_FIRST_SLICE // 4, budget // 2) if t > 0.1 else min(budget * 2, _MAX_SLICE)
            elif r:
                p.valid = True
                p.order = s.order  # the states after each op: `replay`, when a picture needs them
            else:
                p.valid = valid = False
                _counterexample(m, p, s, whole)
            if valid is True and deadline is not None and time.perf_counter() > deadline:
                valid, reason = "unknown", f"time limit of {time_limit:g} s reached"
            if valid is True and total > max_configs:
                valid, reason = "unknown", f"memory cap of {max_configs} cached configurations and steps reached"
            if valid is not True:
                break
        live = still
    if valid == "unknown":
        for p, s in zip(parts, plans, strict=True):
            if p.valid == "unknown":
                p.frontier = s.frontier()
    return Analysis(m, valid, parts, len(lops), reason, time.perf_counter() - t0, whole)


def _counterexample(m: Model, p: Partition, plan: Plan, whole: bool) -> None:
    """Fill an invalid partition's window, its longest partial linearization and the op
    that cannot follow it. Without partitioning, states are shown per op's own key (the
    window then starts at the history's start, every key in its initial state)."""
    w = find_window(plan)
    p.window = w
    lin, p.cannot_follow, p.failed_in = w.linearization, w.op, w.failed_in
    if whole and plan.groups is not None:
        w.states = [m.init()]
        g = plan.groups
        lin = [(pos, st[g[pos]]) for pos, st in lin]
        if w.op is not None and isinstance(p.failed_in, tuple):
            p.failed_in = p.failed_in[g[w.op]]
    p.linearization = lin


def _normalised(events: Iterable[dict[str, Any]], path: str | None) -> Iterator[dict[str, Any]]:
    """Validated copies of event dicts, `index` defaulting to the position, `time` to the index."""
    for pos, ev in enumerate(events):
        if not isinstance(ev, dict):
            raise InputError(f"event {ev!r} is not a JSON object", path, pos + 1)
        if "index" not in ev or "time" not in ev:
            ev = dict(ev)  # validate_event fills them in: leave the caller's dict alone
        validate_event(ev, path, pos + 1, pos)
        yield ev


def check_events(events: Iterable[dict[str, Any]], model: str | Model, *, time_limit: float | None = None,
                 partition: bool = True, max_configs: int = DEFAULT_MAX_CONFIGS) -> dict[str, Any]:
    """docs/ARCHITECTURE.md's result object for the history `events` (event dicts, any order of keys).

    ``valid`` is True, False or "unknown" (time limit or configuration cap reached). An
    invalid result lists, per failing partition, the longest partial linearization and
    the op that cannot follow it (``anomalies["nonlinearizable"]``). Bad input raises
    `InputError`.
    """
    return analyse(events, model, time_limit=time_limit, partition=partition,
                   max_configs=max_configs).result()
