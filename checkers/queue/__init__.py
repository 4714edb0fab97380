"""The Kafka queue checker: Jepsen's kafka anomalies, found in one streaming pass.

Input: a docs/ARCHITECTURE.md history (JSON Lines or event dicts) of `send`, `poll`, `txn`,
`assign`, `subscribe` and `crash` ops; keys are strings naming one topic-partition,
values are integers (or strings) unique per key. Output: docs/ARCHITECTURE.md's result object
(`valid`, `anomaly_types`, `anomalies`) plus `anomaly_counts`, `anomaly_keys` (per type, the
keys it was found in), `complete`, `worst_realtime_lag`, `checked` and `stats`.
Every example is `{"explanation": one sentence, "ops": [op indices], ...details}`; an op
is named by the `index` of its completion event (of its invoke if it never completed).

Terms. An *acknowledged* send is a send micro-op of an `ok` op; a *committed* send is
acknowledged, or belongs to an `info` (indeterminate, or never completed) op some of
whose values an `ok` poll returned. The *version order* of a key maps offsets to values,
from the offsets of committed sends and of every poll record (ok, info or fail polls:
consumers must never return bad data); the *known offsets* of a key are its keys. A
*read* is a record returned by an `ok` poll (or ok txn poll). The *gap* between offsets
a < b is the set of known offsets strictly between them. Consecutive polls of a process
on a key are compared *under one assignment*: an ok or info `assign`/`subscribe` (and the
process ending) starts afresh; only ok polls advance the position.

Anomalies (names as Jepsen's kafka checker; each example names the ops that show it):

- `inconsistent-offsets`: one offset of a key seen holding two or more different values.
- `duplicate`: one value of a key seen at two or more different offsets.
- `lost-write`: a committed send of value v to key k, at offset o (its first; the last if
  it is a duplicate), was never read, although some ok poll read k at an offset >= o.
- `unseen`: an acknowledged send never read by the end of the history, that is not a
  lost-write (nothing at or above its offset was read, or its offset is unknown). Counted
  per send; one example per key.
- `G1a` (aborted read): an ok poll returned a value whose send definitely failed.
- `garbage-read`: an ok poll returned a value no op ever sent (new name, Elle's term).
- `precommitted-read`: a txn polled a value it sent itself.
- `poll-skip`: a process's ok poll read key k up to offset a, and its next poll of k
  (ok, info or fail) under the same assignment started at offset b > a whose gap is not
  empty (Jepsen: index delta > 1).
- `nonmonotonic-poll`: ... started at offset b <= a (going back or repeating).
- `int-poll-skip` / `int-nonmonotonic-poll`: within one op, two successive records of key k
  at offsets a then b with a non-empty gap / with b <= a. Keys named in the completion's
  `rebalance-log` (`[{"keys": [...]}]`) are exempt, as in Jepsen.
- `nonmonotonic-send`: a process sent to key k (ok or committed info op) landing at offset
  a, and its next send op to k landed at offset b <= a. Unlike Jepsen, an assign or
  subscribe does not reset this: a producer's order does not depend on its consumer.
  Where a send's own offset is unknown, the offset its value holds in the version order
  is used.
- `int-send-skip` / `int-nonmonotonic-send`: within one op, two successive sends to k
  landed at offsets a then b with a non-empty gap / with b <= a.
- `G0` (only with `ww_deps=True`): a cycle of ww edges (T1 sent to k before T2 in k's
  version order) between committed sending ops.
- `G1c`: a cycle with at least one wr edge (T2, a txn, polled a value T1 sent), plus ww
  edges when `ww_deps=True`. See `checkers.queue.cycles`.

Raw verdict: `false` if any anomaly was found; otherwise `"unknown"` if the time limit was
hit or the history has no send/poll/txn op at all (`complete` false); otherwise `true`.
Named policies (`POLICIES`, see `checkers.queue.policy`) say what a configuration may
show; the one verdict (checkers/verdict.py) applies them.

Public API: `check`, `check_file` (result dicts), `analyze`, `analyze_file` (a
`QueueAnalysis`: the result plus the op table and series the plots use), `POLICIES`,
`ANOMALY_TYPES`, `resolve_allowed`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from checkers.queue.analysis import QueueAnalysis, finish
from checkers.queue.core import QueuePass, Timeout
from checkers.queue.policy import ANOMALY_TYPES, POLICIES, resolve_allowed
from checkers.queue.reader import EventFile

__all__ = ["ANOMALY_TYPES", "POLICIES", "QueueAnalysis", "analyze", "analyze_file", "check", "check_file",
           "resolve_allowed"]


def analyze(events: Iterable[dict[str, Any]], *, time_limit: float | None = None, ww_deps: bool = False,
            max_examples: int = 32, path: str | None = None, line_of: Any = None) -> QueueAnalysis:
    """Check a stream of event dicts; the raw result and the series for plots."""
    deadline = time.monotonic() + time_limit if time_limit is not None else None
    qp = QueuePass(deadline=deadline, max_examples=max_examples)

    def where(pos: int) -> tuple[str | None, int | None]:
        if line_of is not None:
            return path, line_of(pos)
        return path or "<events>", pos + 1

    timed_out = False
    try:
        qp.feed(events, where)
        qp.finish_open(where)
    except Timeout:
        timed_out = True
    return finish(qp, ww_deps=ww_deps, timed_out=timed_out)


def check(events: Iterable[dict[str, Any]], *, time_limit: float | None = None, ww_deps: bool = False,
          max_examples: int = 32) -> dict[str, Any]:
    """Check a stream of event dicts (pure, one pass); docs/ARCHITECTURE.md's raw result object.

    Bad events raise `contracts.errors.InputError` naming the event's position.
    """
    return analyze(events, time_limit=time_limit, ww_deps=ww_deps, max_examples=max_examples).result


def analyze_file(path: str | os.PathLike[str], *, time_limit: float | None = None, ww_deps: bool = False,
                 max_examples: int = 32, tap: Callable[[dict[str, Any]], None] | None = None) -> QueueAnalysis:
    """`analyze` over a history file; errors cite FILE:LINE; a torn last line is dropped and noted.
    `tap`, if given, sees every event of the same pass (another check's input, without a
    second read of the file)."""
    p = os.fspath(path)
    ef = EventFile(p)
    events: Iterable[dict[str, Any]] = ef if tap is None else _tapped(ef, tap)
    an = analyze(events, time_limit=time_limit, ww_deps=ww_deps, max_examples=max_examples, path=p,
                 line_of=ef.line_of)
    if ef.dropped:
        an.result["dropped_lines"] = ef.dropped
        an.result["dropped_reason"] = ef.dropped_reason
    return an


def _tapped(events: Iterable[dict[str, Any]], tap: Callable[[dict[str, Any]], None]
            ) -> Iterator[dict[str, Any]]:
    for ev in events:
        tap(ev)
        yield ev


def check_file(path: str | os.PathLike[str], *, time_limit: float | None = None, ww_deps: bool = False,
               max_examples: int = 32) -> dict[str, Any]:
    """`check` over a history file."""
    return analyze_file(path, time_limit=time_limit, ww_deps=ww_deps, max_examples=max_examples).result
