"""Checkers composed as Jepsen composes them (jepsen/checker.clj: `check`, `compose`, `merge-valid`).

A `Checker` judges one run: `check(run) -> result`, the result a dict with at least `valid`
(docs/ARCHITECTURE.md's checker result). `run` is whatever the caller hands every checker of
the run alike (`Run` states what `harness.analysis` gives).

- `merge_valid(values)`: the verdict of several; False beats "unknown" beats True (True for none).
- `check_safe(name, checker, run)`: a checker that raises, or answers no verdict, yields
  `{"valid": "unknown", "error": ...}` for its part instead of a crash. `InputError` (the run's
  input itself is missing or malformed) passes through: that is bad input, not a verdict.
- `compose({name: checker})`: a checker that runs each in the mapping's order and answers
  `{name: its result, ...}` plus the merged `valid`, `anomaly_types`, `anomalies`,
  `anomaly_counts` and `anomaly_times` (`merge_results`). A part whose result says `"checked": False` did not
  judge the run (liveness without a final heal): it is kept, but does not vote on `valid`.
"""

from __future__ import annotations

import traceback
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Protocol

from contracts.errors import InputError
from contracts.protocols import Checker

UNKNOWN = "unknown"
MERGED_KEYS = ("valid", "anomaly_types", "anomalies", "anomaly_counts", "anomaly_times")


class Run(Protocol):
    """One run's inputs, as its checkers read them."""

    history_path: Path
    time_limit: float | None  # s a checker may take (then its verdict is "unknown"); None: no limit

    def events(self) -> Iterable[Mapping[str, Any]]: ...  # the history's events, one validated pass

    @property
    def policy(self) -> Any: ...  # the run's loss rules (checkers.policy.Policy), for a checker that reads them


def _rank(valid: Any) -> int:
    if valid is True:
        return 0
    if isinstance(valid, str) and valid == UNKNOWN:
        return 1
    if valid is False:
        return 2
    raise ValueError(f"{valid!r} is not a verdict (true, false or {UNKNOWN!r})")


def is_verdict(valid: Any) -> bool:
    """Is `valid` one of True, False, "unknown"?"""
    try:
        _rank(valid)
    except ValueError:
        return False
    return True


def merge_valid(values: Iterable[Any]) -> bool | str:
    """The verdict of several (Jepsen's merge-valid): False beats "unknown" beats True; True
    for none. ValueError for a value that is no verdict."""
    out: bool | str = True
    for v in values:
        if _rank(v) > _rank(out):
            out = v
    return out


def unknown(error: str, **extra: Any) -> dict[str, Any]:
    """The result of a part that could not judge: valid "unknown", no anomalies, the error."""
    return {"valid": UNKNOWN, "anomaly_types": [], "anomalies": {}, "error": error, **extra}


def check_safe(name: str, checker: Checker, run: Any) -> dict[str, Any]:
    """`checker.check(run)` as a dict; a checker that raises (but for `InputError`) or answers
    no verdict yields `unknown(...)` naming it."""
    try:
        result = checker.check(run)
    except InputError:
        raise
    except Exception as e:  # noqa: BLE001 - a checker crash is an unknown verdict, not a crash
        return unknown(f"checker {name} crashed: {type(e).__name__}: {e}",
                       traceback=traceback.format_exc(limit=8))
    if not isinstance(result, Mapping) or not is_verdict(result.get("valid")):
        got = result.get("valid") if isinstance(result, Mapping) else result
        return unknown(f"checker {name} answered no verdict: {got!r:.200}")
    return dict(result)


def anomaly_types(result: Mapping[str, Any]) -> list[str]:
    """A result's anomaly types: its `anomaly_types`, else its anomalies' kinds, sorted."""
    if "anomaly_types" in result:
        return list(result["anomaly_types"] or [])
    return sorted((result.get("anomalies") or {}).keys())


def _as_list(examples: Any) -> list[Any]:
    return examples if isinstance(examples, list) else [examples]


def merge_results(parts: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The merged `valid` (of the parts that judged), `anomaly_types` (each once, in the parts'
    order), `anomalies` (a kind two parts found: both lists of examples), `anomaly_counts`
    (summed; only if some part gives counts) and `anomaly_times` (when each type was first
    found: the earliest a part gives; only if some part gives times)."""
    types: list[str] = []
    anomalies: dict[str, Any] = {}
    counts: dict[str, int] | None = None
    times: dict[str, int] | None = None
    for part in parts.values():
        if isinstance(part.get("anomaly_times"), Mapping):
            times = times if times is not None else {}
            for kind, t in part["anomaly_times"].items():
                times[kind] = min(times.get(kind, t), t)
        types += [t for t in anomaly_types(part) if t not in types]
        for kind, examples in (part.get("anomalies") or {}).items():
            anomalies[kind] = _as_list(anomalies[kind]) + _as_list(examples) if kind in anomalies else examples
        if "anomaly_counts" in part:
            counts = counts if counts is not None else {}
            for kind, n in (part["anomaly_counts"] or {}).items():
                counts[kind] = counts.get(kind, 0) + n
    valid = merge_valid(p["valid"] for p in parts.values() if p.get("checked") is not False)
    merged: dict[str, Any] = {"valid": valid, "anomaly_types": types, "anomalies": anomalies}
    if counts is not None:
        merged["anomaly_counts"] = counts
    if times is not None:
        merged["anomaly_times"] = times
    return merged


class Composed:
    """Named checkers as one (`compose`)."""

    def __init__(self, checkers: Mapping[str, Checker]):
        clash = sorted(set(checkers) & set(MERGED_KEYS))
        if clash:
            raise ValueError(f"a composed checker may not be named {', '.join(clash)} (the merged keys)")
        self.checkers = dict(checkers)

    def check(self, run: Any) -> dict[str, Any]:
        parts = {name: check_safe(name, c, run) for name, c in self.checkers.items()}
        return {**parts, **merge_results(parts)}


def compose(checkers: Mapping[str, Checker]) -> Composed:
    """One checker running `checkers` in order: `{name: result, ...}` and the merged verdict
    and anomalies (module docstring). ValueError for a name among `MERGED_KEYS`."""
    return Composed(checkers)
