"""Queue-run cases the pipeline's tests share, and the single-process checker's answer to compare with.

`queue_cfg` draws a synthetic queue run with planted anomalies of random types;
`edge_history` holds hand-made ops the generator never makes; `judged` is the queue
checker's raw result with the one verdict applied (as the harness writes results.json);
`canon` puts examples in a comparable form.
"""

from __future__ import annotations

import json
import random
from typing import Any

from checkers.policy import Pick, Policy
from checkers.verdict import judge
from pipeline import synth

MANY = 100_000  # examples kept per type: compare whole anomaly sets, not the first 32


def judged(raw: dict[str, Any], allowed: list[str]) -> dict[str, Any]:
    """The queue checker's raw result with the one verdict applied, as the harness writes it."""
    policy = Policy([Pick("test", "allowed by the test", allowed)] if allowed else [])
    return judge({"queue": raw}, policy).write_into(raw, policy)


def queue_cfg(i: int, rng: random.Random, **kw: Any) -> synth.SynthConfig:
    kinds = rng.sample(synth.PLANTABLE, rng.randint(1, 4))
    return synth.SynthConfig(ops=1200, seed=1000 + i, keys=rng.randint(2, 6), concurrency=rng.randint(3, 10),
                             nemesis=rng.choice([("partition",), ("kill",), ("partition", "kill")]),
                             nemesis_interval_s=0.1, plant={k: 1 for k in kinds},
                             options={"acks": rng.choice(["all", "1"]), "min_isr": rng.choice([1, 2])}, **kw)


def op(p: int, f: str, inv: Any, typ: str, val: Any, **extra: Any) -> list[dict[str, Any]]:
    return [{"process": p, "type": "invoke", "f": f, "value": inv}, {"process": p, "type": typ, "f": f, "value": val,
                                                                     **extra}]


def edge_history() -> list[dict[str, Any]]:
    """Hand-made ops the generator never makes: multi-send and txn ops, out-of-order sends,
    garbage reads, committed info sends, string values, a rebalance-log, a fail poll."""
    ev: list[dict[str, Any]] = []
    ev += op(9, "send", [["send", "a", 12]], "ok", [["send", "a", [1, 12]]])
    # int-send-skip: one op lands at 0 and 2 with offset 1 (value 12) between them
    ev += op(1, "send", [["send", "a", 10], ["send", "a", 11]], "ok", [["send", "a", [0, 10]], ["send", "a", [2, 11]]])
    # int-nonmonotonic-send
    ev += op(1, "send", [["send", "b", 20], ["send", "b", 21]], "ok", [["send", "b", [5, 20]], ["send", "b", [4, 21]]])
    # nonmonotonic-send between two ops of process 2
    ev += op(2, "send", [["send", "c", 30]], "ok", [["send", "c", [3, 30]]])
    ev += op(2, "send", [["send", "c", 31]], "ok", [["send", "c", [1, 31]]])
    # garbage-read and a precommitted read in a txn
    ev += op(3, "poll", [["poll"]], "ok", [["poll", {"d": [[0, 999]], "a": [[0, 10], [1, 12], [2, 11]]}]])
    ev += op(4, "txn", [["send", "e", 40], ["poll"]], "ok", [["send", "e", [0, 40]], ["poll", {"e": [[0, 40]]}]])
    # an info send proven committed (read later), one never read, one never completed
    ev += op(5, "send", [["send", "f", 50]], "info", None)
    ev += op(6, "send", [["send", "f", 51]], "info", [["send", "f", [1, 51]]])
    ev += op(7, "poll", [["poll"]], "ok", [["poll", {"f": [[0, 50]]}]])
    # string values, one a garbage read
    ev += op(8, "send", [["send", "g", "x"]], "ok", [["send", "g", [0, "x"]]])
    ev += op(10, "poll", [["poll"]], "ok", [["poll", {"g": [[0, "x"], [1, "y"]]}]])
    # a skip inside a poll of a rebalanced key is exempt; the same skip unrebalanced is not
    ev += op(11, "send", [["send", "h", 60], ["send", "h", 61], ["send", "h", 62]], "ok",
              [["send", "h", [0, 60]], ["send", "h", [1, 61]], ["send", "h", [2, 62]]])
    ev += op(12, "poll", [["poll"]], "ok", [["poll", {"h": [[0, 60], [2, 62]]}]], **{"rebalance-log": [{"keys": ["h"]}]})
    ev += op(13, "poll", [["poll"]], "ok", [["poll", {"h": [[0, 60], [2, 62]]}]])
    ev += op(13, "poll", [["poll"]], "fail", None)
    ev += op(13, "poll", [["poll"]], "ok", [["poll", {"h": [[1, 61]]}]])
    ev.append({"process": 14, "type": "invoke", "f": "send", "value": [["send", "f", 52]]})
    for i, e in enumerate(ev):
        e["index"], e["time"] = i, i * 1000
    return ev


def canon(examples: list[dict[str, Any]]) -> list[str]:
    return sorted(json.dumps({k: v for k, v in e.items() if k != "explanation"}, sort_keys=True) for e in examples)
