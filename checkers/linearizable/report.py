"""The outcome of a check (`Analysis`) and docs/ARCHITECTURE.md's result object made from it.

Invalid: per failing partition its counterexample, the smallest window of ops found that
cannot be linearized (`window.py`) with the longest partial linearization of it.
Unknown: the reason, the partitions decided, and for the open ones how far the search
got (docs/checkers-linearizable.md, "Result object").
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

from checkers.linearizable.models import Model
from checkers.linearizable.parts import LinOp, Partition

ANOMALY = "nonlinearizable"
MAX_LISTED = 100  # ops listed per list of a JSON counterexample
MAX_OPEN = 20  # open partitions described in an unknown result


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
            open_ = [p for p in self.partitions if p.valid == "unknown"]
            res["decided"] = len(self.partitions) - len(open_)
            res["undecided"] = [json_key(p.key) for p in open_][:100]
            res["open"] = [open_partition(p) for p in open_[:MAX_OPEN]]
        return res


def json_key(k: Hashable) -> Any:
    return k if isinstance(k, str | int | float | bool) or k is None else repr(k)


def describe_op(model: Model, lop: LinOp) -> dict[str, Any]:
    """An op for counterexamples: where it is, what it did, how the model reads it."""
    op = lop.op
    d: dict[str, Any] = {"process": op.process, "f": op.f, "type": op.type,
                         "value": op.invoke.get("value"), "index": op.index, "line": op.line}
    if op.complete is not None:
        d["result"] = op.complete.get("value")
        d["ret_index"] = op.complete.get("index")
        d["ret_line"] = op.ret_line
    d["op"] = model.describe_call(lop.call)
    return d


def _where(lop: LinOp | None, time: float | None, ret: bool) -> dict[str, Any] | str:
    if lop is None:
        return "start"
    return {"line": lop.op.ret_line if ret else lop.op.line, "time": time}


def rule6_text(model: Model, p: Partition) -> str:
    """Why rule 6 refutes an op, in words (empty for other windows)."""
    w = p.window
    if w is None or w.needed is None or w.op is None:
        return ""
    x = p.ops[w.op]
    t = model.describe_state(w.needed)
    head = f"{model.describe_call(x.call)} (line {x.op.line}) needs the state {t}"
    if w.by is None:
        return f"{head}, which no op invoked before it returned can make"
    y = p.ops[w.by]
    return (f"{head}: every op that can make it returned before {model.describe_call(y.call)} (line "
            f"{y.op.line}) was invoked, which leaves another state and returned before it was invoked, "
            f"and no op invoked later can make it")


def window_object(model: Model, p: Partition) -> dict[str, Any]:
    """The counterexample window of an invalid partition as JSON."""
    w = p.window
    assert w is not None
    first = p.ops[w.ops[0]] if w.start is not None and w.ops else None
    last = next((p.ops[i] for i in ([w.op] if w.op is not None else []) + w.ops if p.ops[i].end == w.end), None)
    listed = [describe_op(model, p.ops[i]) for i in w.ops[:MAX_LISTED]]
    out: dict[str, Any] = {"from": _where(first, w.start, False), "to": _where(last, w.end, True),
                           "ops": len(w.ops), "listed": listed,
                           "start_states": [model.describe_state(s) for s in w.states],
                           "carried": len(w.carried), "decided_by": w.reason}
    if w.needed is not None:
        out["why"] = rule6_text(model, p)
    if len(w.ops) > MAX_LISTED:
        out["listed_omitted"] = len(w.ops) - MAX_LISTED
    if w.carried:
        kinds: dict[str, int] = {}
        for i in w.carried:
            d = model.describe_call(p.ops[i].call)
            kinds[d] = kinds.get(d, 0) + 1
        out["carried_ops"] = dict(sorted(kinds.items(), key=lambda kv: -kv[1])[:MAX_LISTED])
    return out


def counterexample(model: Model, p: Partition) -> dict[str, Any]:
    """The JSON counterexample of an invalid partition: its window, the longest partial
    linearization of the window found (its last `MAX_LISTED` ops, each with the state after
    it), the op that cannot follow it and the state it is illegal in."""
    lin = []
    for pos, state in p.linearization:
        d = describe_op(model, p.ops[pos])
        d["state"] = model.describe_state(state)
        lin.append(d)
    out: dict[str, Any] = {"key": json_key(p.key), "ops": len(p.ops), "linearized_count": len(lin)}
    if p.window is not None:
        out["window"] = window_object(model, p)
    if len(lin) > MAX_LISTED:
        out["linearized_omitted"] = len(lin) - MAX_LISTED
        lin = lin[-MAX_LISTED:]
    out["linearized"] = lin
    if p.cannot_follow is not None:
        out["cannot_follow"] = describe_op(model, p.ops[p.cannot_follow])
        out["state"] = model.describe_state(p.failed_in)
    return out


def open_partition(p: Partition) -> dict[str, Any]:
    """How far the search of an undecided partition got: the stage running, and the window
    still open, from the earliest op not linearized in the deepest configuration reached to
    the op whose return no configuration has passed yet."""
    out: dict[str, Any] = {"key": json_key(p.key), "ops": len(p.ops), "stage": p.stage, "configs": p.configs}
    if p.frontier is not None:
        stuck, first = p.frontier
        a, b = p.ops[first], p.ops[stuck]
        out["window"] = {"from": {"line": a.op.line, "time": a.start},
                         "to": {"line": b.op.ret_line, "time": b.end},
                         "ops": sum(1 for lo in p.ops if a.start <= lo.start and (b.end is None or lo.start <= b.end))}
    return out
