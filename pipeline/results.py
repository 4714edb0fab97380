"""Result objects of the pipeline's checks, in the single-process checkers' form.

`queue_result` builds `checkers.queue`'s result object (valid, anomaly_types,
bad_anomaly_types, anomalies with one-sentence `explanation`s, anomaly_counts, allowed,
stats) from the anomaly examples and counts the Spark job collected; `explain` writes
the sentence of one example. `policy_for` is the loss rules of a run: the allowances its
results.json recorded when it was checked (computed from its fault history), else its
system's rules over its test options alone (no fault history: lossy shutdowns allow
nothing), plus what the caller allows. The verdict is the one verdict's
(`checkers.verdict.judge`), as for a run checked by the harness.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import suites
from checkers.policy import Pick, Policy
from checkers.queue.policy import type_order
from checkers.verdict import judge
from suites.base import RunFacts


def policy_for(run: dict[str, Any], extra: Iterable[str] = ()) -> Policy:
    """The loss rules of run `run` (a `runs` row), see the module docstring."""
    base = run.get("allowed")
    if base is not None:
        policy = Policy([Pick("recorded", "the allowances its results.json recorded (from its fault history)",
                              sorted(base, key=type_order), "as checked")] if base else [])
    else:
        opts = json.loads(run.get("options_json") or "{}")
        policy = suites.get(opts.get("db") or suites.DEFAULT).loss_rules(RunFacts(opts))
    if extra:
        policy.picks.append(Pick("allow", "allowed on the command line", sorted(extra, key=type_order), "--allow"))
    return policy


def _span(offsets: list[int]) -> str:
    return str(offsets[0]) if len(offsets) == 1 else f"{offsets[0]}..{offsets[-1]}"


def explain(kind: str, ex: dict[str, Any]) -> str:  # noqa: C901 - one sentence per type
    """The one sentence a person can follow for an example of type `kind`."""
    k = ex.get("key")
    ops = ex.get("ops") or []
    offs = ex.get("offsets") or []
    if kind == "inconsistent-offsets":
        return (f"offset {ex['offset']} of key {k} was seen holding {len(ex['values'])} different values: "
                f"{', '.join(repr(v) for v in ex['values'])} (ops {', '.join(map(str, ops))})")
    if kind == "duplicate":
        return (f"value {ex['value']!r} of key {k} appears at {len(offs)} offsets: "
                f"{', '.join(map(str, offs))} (ops {', '.join(map(str, ops))})")
    if kind == "lost-write":
        how = "acknowledged" if ex.get("_acknowledged", True) else "indeterminate but proven committed"
        return (f"op {ops[0]} sent {ex['value']!r} to key {k} ({how}, offset {ex['offset']}), but no poll ever "
                f"returned it, although op {ops[1]} read key {k} up to offset {ex['max_read_offset']}")
    if kind == "unseen":
        mr = ex.get("_max_read_offset")
        upto = f"its highest offset read was {mr}" if mr is not None else "no poll ever returned any record of it"
        return (f"{ex['count']} acknowledged send(s) to key {k} were never returned by any poll by the end of "
                f"the history ({upto}); e.g. {ex['values'][0]!r} sent by op {ops[0]}")
    if kind == "G1a":
        return (f"op {ops[1]} polled {ex['value']!r} from key {k}, but the send of it (op {ops[0]}) definitely "
                f"failed: an aborted read")
    if kind == "garbage-read":
        return f"op {ops[0]} polled {ex['value']!r} from key {k}, a value no op ever sent"
    if kind == "precommitted-read":
        return (f"txn op {ops[0]} polled {ex['value']!r} from key {k}, a value it sent itself: consumers must "
                f"never see records of a transaction before it commits")
    if kind in ("poll-skip", "nonmonotonic-poll"):
        head = (f"process {ex['process']} read key {k} up to offset {offs[0]} (op {ops[0]}), then its next poll "
                f"(op {ops[1]}) started at offset {offs[1]}")
        if kind == "nonmonotonic-poll":
            return head + ", going back, with no assign or subscribe in between"
        return head + f", skipping {ex['delta'] - 1} record(s) other ops show exist"
    if kind == "int-nonmonotonic-poll":
        return (f"op {ops[0]} polled key {k} at offset {offs[0]} and then at offset {offs[1]}, going back "
                f"(or repeating) within one op")
    if kind == "int-poll-skip":
        return (f"op {ops[0]} polled key {k} at offset {offs[0]} and next at offset {offs[1]}, skipping "
                f"{ex['delta'] - 1} record(s) other ops show exist")
    if kind == "nonmonotonic-send":
        v1, v2 = ex["values"]
        return (f"process {ex['process']} sent {v1!r} to key {k}, landing at offset {offs[0]} (op {ops[0]}), "
                f"then sent {v2!r} (op {ops[1]}), which landed at offset {offs[1]}, not after it")
    if kind == "int-nonmonotonic-send":
        v1, v2 = ex["values"]
        return (f"op {ops[0]} sent {v1!r} then {v2!r} to key {k}, but they landed at offsets {offs[0]} and "
                f"{offs[1]}, out of order")
    if kind == "int-send-skip":
        v1, v2 = ex["values"]
        return (f"op {ops[0]} sent {v1!r} then {v2!r} to key {k}, landing at offsets {offs[0]} and {offs[1]} "
                f"with {ex['delta'] - 1} other record(s) between them")
    return f"{kind} on key {k} (ops {', '.join(map(str, ops))})"


def example(kind: str, detail: str | dict[str, Any], strings: dict[int, str] | None = None) -> dict[str, Any]:
    """An `anomalies` row's detail as the checker's example: explanation first, no `_` fields.

    `strings` maps the ids of string values (`extract.string_value_id`) back to the strings.
    """
    d = json.loads(detail) if isinstance(detail, str) else dict(detail)
    if strings:
        for f in ("value", "values", "skipped"):
            v = d.get(f)
            if isinstance(v, list):
                d[f] = [strings.get(x, x) if isinstance(x, int) else x for x in v]
            elif isinstance(v, int):
                d[f] = strings.get(v, v)
    out = {"explanation": explain(kind, d)}
    out.update({k: v for k, v in d.items() if not k.startswith("_")})
    return out


def queue_result(examples: dict[str, list[dict[str, Any]]], counts: dict[str, int], policy: Policy,
                 *, saw_queue_ops: bool, stats: dict[str, Any] | None = None,
                 strings: dict[int, str] | None = None) -> dict[str, Any]:
    """checkers.queue's result object from examples (details) and counts per type, judged."""
    types = sorted(counts, key=type_order)
    result: dict[str, Any] = {
        "valid": False if types else True if saw_queue_ops else "unknown",
        "complete": saw_queue_ops,
        "anomaly_types": types,
        "anomalies": {t: [example(t, d, strings) for d in examples.get(t, [])] for t in types},
        "anomaly_counts": {t: int(counts[t]) for t in types},
        "checker": "queue",
        "engine": "spark",
    }
    if not saw_queue_ops:
        result["reason"] = "no send, poll or txn op in the history: nothing to check"
    if stats is not None:
        result["stats"] = stats
    return judge({"queue": result}, policy).write_into(result, policy)


def lin_result(merged: dict[str, Any], policy: Policy, stats: dict[str, Any] | None = None) -> dict[str, Any]:
    """The linearizable result, judged."""
    res = dict(merged)
    types = list(res.get("anomaly_types") or [])
    res["anomaly_counts"] = {t: len(res["anomalies"].get(t, [])) for t in types}
    res["engine"] = "spark"
    if stats is not None:
        res["stats"] = stats
    return judge({"linearizable": res}, policy).write_into(res, policy)
