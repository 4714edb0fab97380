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

import time
from collections.abc import Hashable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from checkers.linearizable.models import Model, composite, get_model
from checkers.linearizable.search import Search, Spec
from contracts.errors import InputError
from contracts.history import validate_event
from contracts.pairing import Op, pair_ops

DEFAULT_MAX_CONFIGS = 10_000_000
_FIRST_SLICE = 2_000
_MAX_SLICE = 100_000
ANOMALY = "nonlinearizable"
MAX_LISTED = 100  # ops of a partial linearization listed in the JSON counterexample


@dataclass(slots=True)
class LinOp:
    """One op of a partition, in the model's encoding, with where it came from."""

    op: Op
    key: Hashable
    call: tuple
    readonly: bool
    start: float
    end: float | None  # None: indeterminate (returns at +infinity)


@dataclass
class Partition:
    """One independently checked sub-history and its outcome.

    `linearization` is a list of (position in `ops`, state after) for a valid partition
    (the linearization found; indeterminate ops not in it did not take effect) and the
    longest partial linearization of an invalid one, which `cannot_follow` (a position
    in `ops`) cannot extend.
    """

    key: Hashable
    ops: list[LinOp]
    valid: bool | str = "unknown"
    linearization: list[tuple[int, Any]] = field(default_factory=list)
    cannot_follow: int | None = None
    failed_in: Any = None  # the state `cannot_follow` is illegal in
    configs: int = 0
    moves: int = 0


@dataclass
class Analysis:
    """The outcome of a check: verdict, partitions, what stopped it."""

    model: Model
    valid: bool | str
    partitions: list[Partition]
    ops: int
    reason: str = ""
    seconds: float = 0.0
    whole: bool = False  # partitioning switched off

    def result(self) -> dict[str, Any]:
        """docs/ARCHITECTURE.md's result object."""
        res: dict[str, Any] = {"valid": self.valid, "checker": "linearizable", "model": self.model.name,
                               "ops": self.ops, "partitions": len(self.partitions),
                               "configs": sum(p.configs for p in self.partitions),
                               "anomaly_types": [], "anomalies": {}}
        if self.valid is False:
            res["anomaly_types"] = [ANOMALY]
            res["anomalies"] = {ANOMALY: [counterexample(self.model, p) for p in self.partitions
                                          if p.valid is False]}
        elif self.valid != "unknown":
            pass
        else:
            res["reason"] = self.reason
            res["undecided"] = [_json_key(p.key) for p in self.partitions if p.valid == "unknown"][:100]
        return res


def _json_key(k: Hashable) -> Any:
    return k if isinstance(k, str | int | float | bool) or k is None else repr(k)


def describe_op(model: Model, lop: LinOp) -> dict[str, Any]:
    """An op for counterexamples: where it is, what it did, how the model reads it."""
    op = lop.op
    d: dict[str, Any] = {"process": op.process, "f": op.f, "type": op.type,
                         "value": op.invoke.get("value"), "index": op.index, "line": op.line}
    if op.complete is not None:
        d["result"] = op.complete.get("value")
        d["ret_index"] = op.complete.get("index")
    d["op"] = model.describe_call(lop.call)
    return d


def counterexample(model: Model, p: Partition) -> dict[str, Any]:
    """The JSON counterexample of an invalid partition: the longest partial linearization
    (its last `MAX_LISTED` ops, each with the state after it), the op that cannot follow
    it and the state it is illegal in."""
    lin = []
    for pos, state in p.linearization:
        d = describe_op(model, p.ops[pos])
        d["state"] = model.describe_state(state)
        lin.append(d)
    out: dict[str, Any] = {"key": _json_key(p.key), "ops": len(p.ops), "linearized_count": len(lin)}
    if len(lin) > MAX_LISTED:
        out["linearized_omitted"] = len(lin) - MAX_LISTED
        lin = lin[-MAX_LISTED:]
    out["linearized"] = lin
    if p.cannot_follow is not None:
        out["cannot_follow"] = describe_op(model, p.ops[p.cannot_follow])
        out["state"] = model.describe_state(p.failed_in)
    return out


# --------------------------------------------------------------------------- preparing


def prepare_ops(ops: Iterable[Op], model: Model, path: str | None = None) -> list[LinOp]:
    """Encode paired ops for `model`; ops that constrain nothing are dropped.

    A value the model cannot read, or a completion before its invocation, raises
    `InputError` citing the completion's line (the invocation's for ops that never completed).
    """
    out: list[LinOp] = []
    prep = model.prepare
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


def _search_for(model: Model, key: Hashable, lops: list[LinOp], whole: bool) -> tuple[Partition, Search]:
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
    spec = Spec(m.init(), m.step, m.target, m.resets, m.stuck, m.blocking)
    s = Search(calls, [lo.start for lo in lops], [lo.end for lo in lops], [lo.readonly for lo in lops], spec,
               groups)
    return Partition(key, lops), s


def _replay(model: Model, p: Partition, order: list[int]) -> tuple[list[tuple[int, Any]], Any]:
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
    """Check `events` (dicts, or (line, dict) pairs with `with_lines`) against `model`."""
    t0 = time.perf_counter()
    try:
        m = get_model(model)
    except ValueError as e:
        raise InputError(str(e), path) from None
    if not with_lines:
        events = _normalised(events, path)
    lops = prepare_ops(pair_ops(events, path, with_lines=with_lines), m, path)
    whole = not (partition and m.partition)
    parts: list[Partition] = []
    searches: list[Search] = []
    for key, group in partitions_of(lops, not whole):
        p, s = _search_for(m, key, group, whole)
        parts.append(p)
        searches.append(s)
    deadline = None if time_limit is None else t0 + time_limit
    valid: bool | str = True
    reason = ""
    total = sum(s.memory_units for s in searches)
    live = list(range(len(searches)))
    budget = _FIRST_SLICE
    while live and valid is True:
        still: list[int] = []
        for i in live:
            s, p = searches[i], parts[i]
            before = s.memory_units
            t = time.perf_counter()
            r = s.run(budget)
            t = time.perf_counter() - t
            total += s.memory_units - before
            p.configs, p.moves = s.configs, s.steps
            if r is None:
                still.append(i)
                # slices of about 50 ms: partitions take turns, the time limit is checked often
                budget = max(_FIRST_SLICE // 4, budget // 2) if t > 0.1 else min(budget * 2, _MAX_SLICE)
            elif r:
                p.valid = True
                p.linearization, _ = _replay(m, p, [op for op, _ in s.frames(s.final)])
            else:
                p.valid = False
                p.linearization, states = _replay(m, p, [op for op, _ in s.frames(s.best)])
                p.cannot_follow = _cannot_follow(s, s.best)
                if p.cannot_follow is not None:
                    k = p.ops[p.cannot_follow].key
                    p.failed_in = states[k] if k in states else m.init()
                valid = False
            if valid is True and deadline is not None and time.perf_counter() > deadline:
                valid, reason = "unknown", f"time limit of {time_limit:g} s reached"
            if valid is True and total > max_configs:
                valid, reason = "unknown", f"memory cap of {max_configs} cached configurations and steps reached"
            if valid is not True:
                break
        live = still
    return Analysis(m, valid, parts, len(lops), reason, time.perf_counter() - t0, whole)


def _normalised(events: Iterable[dict[str, Any]], path: str | None) -> Iterator[dict[str, Any]]:
    """Validated copies of event dicts, `index` defaulting to the position, `time` to the index."""
    for pos, ev in enumerate(events):
        if not isinstance(ev, dict):
            raise InputError(f"event {ev!r} is not a JSON object", path, pos + 1)
        if "index" not in ev or "time" not in ev:
            ev = dict(ev)  # validate_event fills them in: leave the caller's dict alone
        validate_event(ev, path, pos + 1, pos)
        yield ev


def _cannot_follow(s: Search, stack: list[int]) -> int | None:
    """The determinate op, not in `stack`, that returns first: what the longest partial
    linearization cannot take."""
    done = {op for op, _ in s.frames(stack)}
    best = None
    for op in range(s.n):
        r = s.ret_entry[op]
        if op not in done and r >= 0 and (best is None or r < s.ret_entry[best]):
            best = op
    return best


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
