"""What a run's report leads with, and what it folds away (harness/report.py renders it).

- `cause_line`: the verdict's one-line cause: the system's own (`SystemUnderTest.cause`,
  e.g. the safeguard an explained offset's story matches), else the first anomaly no rule
  allowed with its count, keys and first example's sentence; for a valid run, how many fault
  actions it survived, or that its trigger never came; for an unknown one, why.
- `coverage`: per fault package, whether the run planned it (its schedule's packages) and how
  many actions it played and how many failed (schedule.json), the stories' as-planned counts
  (results.json `faults`), and the system's notes (`SystemUnderTest.coverage_notes`): so a
  valid verdict whose trigger never came says so.
- `configuration`: only the options that differ from the defaults, and only the general ones
  and those of this system under test (harness/reproduce.py `differing`), the seed once.
- `commands`: rerun, shrink, replay the schedule, replay the minimal one (when shrunk).
- `pages`: an anomaly's examples in pages of `PAGE`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import suites
from harness import reproduce
from harness.fingerprint import bad_types

PAGE = 5


def _mapping(v: Any) -> Mapping[str, Any]:
    return v if isinstance(v, Mapping) else {}


def _system(test: Mapping[str, Any]) -> Any:
    options = _mapping(test.get("options"))
    try:
        return suites.get(options.get("db") or suites.DEFAULT)
    except ValueError:
        return None


def coverage(test: Mapping[str, Any], results: Mapping[str, Any], schedule: Mapping[str, Any] | None
             ) -> dict[str, Any]:
    """{"packages": [{name, planned, played, failed}], "stories": {...}, "notes": [(text, missed)],
    "missed": any note missed, "actions": N}."""
    acts = [a for a in (schedule or {}).get("actions") or [] if isinstance(a, Mapping)]
    planned = [str(p) for p in (schedule or {}).get("packages") or []]
    rows: dict[str, dict[str, Any]] = {p: {"name": p, "planned": True, "played": 0, "failed": 0} for p in planned}
    for a in acts:
        r = rows.setdefault(str(a.get("package")), {"name": str(a.get("package")), "planned": False,
                                                     "played": 0, "failed": 0})
        r["played"] += 1
        r["failed"] += a.get("ok") is False
    played = {name: r["played"] for name, r in rows.items()}
    system = _system(test)
    try:
        notes = list(system.coverage_notes(results, test, played)) if system is not None else []
    except Exception as e:  # noqa: BLE001 - a missing note must not cost the report
        notes = [(f"the system's coverage notes failed: {type(e).__name__}: {e}", False)]
    faults = _mapping(results.get("faults"))
    return {"packages": list(rows.values()), "stories": dict(faults.get("stories") or {}), "notes": notes,
            "missed": any(m for _t, m in notes), "actions": len(acts) if schedule else faults.get("actions"),
            "recorded": schedule is not None}


def cause_line(test: Mapping[str, Any], results: Mapping[str, Any] | None, cov: Mapping[str, Any]) -> str:
    """The verdict's one-line cause (module docstring)."""
    if results is None:
        return f"The run was not checked{': ' + str(test['error']) if test.get('error') else ''}."
    valid = results.get("valid")
    if valid is True:
        n = cov.get("actions")
        line = f"No anomaly in {n} fault action(s)." if n is not None else "No anomaly."
        missed = [t for t, m in cov.get("notes") or [] if m]
        return line + (f" {missed[0][:1].upper()}{missed[0][1:]}: this verdict says nothing about that bug."
                       if missed else "")
    if valid is False:
        system = _system(test)
        try:
            own = system.cause(results, test) if system is not None else None
        except Exception:  # noqa: BLE001 - the generic line stands in
            own = None
        return own or _generic_cause(results)
    why = results.get("run_error") or results.get("error") or results.get("reason") or test.get("error")
    return f"Could not decide{': ' + str(why) if why else ''}."


def _generic_cause(results: Mapping[str, Any]) -> str:
    kinds = bad_types(results)
    if not kinds:
        return "Invalid."
    k = kinds[0]
    count = (results.get("anomaly_counts") or {}).get(k)
    keys = (results.get("anomaly_keys") or {}).get(k) or {}
    examples = (results.get("anomalies") or {}).get(k)
    if isinstance(examples, Mapping):
        examples = examples.get("examples") or []
    first = examples[0] if isinstance(examples, list) and examples else None
    sentence = first.get("explanation") or first.get("message") if isinstance(first, Mapping) else None
    head = f"{k}{f' x {count}' if count else ''}{f' on {len(keys)} key(s)' if keys else ''}"
    more = f" (and {', '.join(kinds[1:])})" if len(kinds) > 1 else ""
    return f"{head}{more}{': ' + str(sentence) if sentence else ''}"


def configuration(test: Mapping[str, Any]) -> dict[str, Any]:
    """The options that differ from the defaults (this system's and the general ones), and the seed."""
    shown = reproduce.differing(_mapping(test.get("options")))
    if test.get("seed") is not None:
        shown["seed"] = test["seed"]
    return shown


def commands(run_dir: str, test: Mapping[str, Any], results: Mapping[str, Any] | None) -> dict[str, str]:
    if not run_dir or not isinstance(test.get("options"), Mapping):
        return {}
    return reproduce.commands(reproduce.StoredRun(Path(run_dir), dict(test), dict(results) if results else None))


def pages(examples: Sequence[Any]) -> list[list[Any]]:
    """`examples` in pages of `PAGE` (the first shown open, the rest folded)."""
    return [list(examples[i:i + PAGE]) for i in range(0, len(examples), PAGE)]
