"""Fault coverage: did the run's faults do what they were meant to?

A valid verdict means little when the faults never struck: a fault story (suites/wrack/stories.py)
that found no partition to play on, or whose election never came, tested nothing. From the
history's nemesis events, `fault_coverage` counts the fault actions, the faults that failed
(`nemesis-error`), and for each story how often it was played and how often it went as
planned (no error, every step it waited for came, but for the bug's own steps and the
closing heal). `warnings` turns that into the lines a
reader must see next to the verdict.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

_NOT_FAULTS = {"story-step", "cluster-state", "final-heal", "heal-errors", "nemesis-error"}


def _story_outcome(value: Mapping[str, Any]) -> str | None:
    """None when the story went as planned, else why not (its error or first failed step). A
    step that is the bug itself (`bug_only`: it happens only with the safeguard off) and the
    closing `healed` wait (after the trigger; the final heal and the liveness check cover it)
    are not misses."""
    if value.get("error"):
        return str(value["error"])
    failed = [s.get("step") for s in value.get("steps") or []
              if s.get("ok") is False and not s.get("bug_only") and s.get("step") != "healed"]
    return f"step {failed[0]} did not happen in time" if failed else None


def fault_coverage(nemesis_events: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """{"actions": N, "errors": [...], "stories": {name: {"played", "as_planned", "misses"}}}
    from the history's nemesis events (misses: up to 3 reasons per story)."""
    actions, errors = 0, []
    stories: dict[str, dict[str, Any]] = {}
    for ev in nemesis_events:
        if ev.get("type") not in (None, "info") or ev.get("process") != "nemesis":
            continue
        f, value = ev.get("f"), ev.get("value")
        if f == "nemesis-error" and isinstance(value, Mapping):
            errors.append(f"{value.get('f')}: {value.get('error')}")
        if f in _NOT_FAULTS or str(f).startswith("start-") and isinstance(value, Mapping) and "candidates" in value:
            continue
        actions += 1
        if isinstance(value, Mapping) and "story" in value and "steps" in value:
            s = stories.setdefault(str(value["story"]), {"played": 0, "as_planned": 0, "misses": []})
            s["played"] += 1
            why = _story_outcome(value)
            if why is None:
                s["as_planned"] += 1
            elif len(s["misses"]) < 3:
                s["misses"].append(why[:240])
    return {"actions": actions, "errors": errors[:10], "error_count": len(errors), "stories": stories}


def warnings(coverage: Mapping[str, Any]) -> list[str]:
    """What a reader of the verdict must know: stories that never went as planned, faults that
    failed."""
    out = []
    for name, s in sorted((coverage.get("stories") or {}).items()):
        if s["played"] and not s["as_planned"]:
            why = f": {s['misses'][0]}" if s["misses"] else ""
            out.append(f"fault story {name} never went as planned ({s['played']} tries){why}")
    if coverage.get("error_count"):
        out.append(f"{coverage['error_count']} fault action(s) failed, e.g. {coverage['errors'][0]}")
    return out
