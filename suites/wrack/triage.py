"""What the report of a wrack run leads with: the one-line cause and the triggers' coverage.

`cause(results)`: for an invalid run, the first explained offset (results.json `explanations`,
explain.py) of an anomaly no rule allowed, as one line: the anomaly, who acknowledged the
offset, who was elected without it and who truncated it, and the rule or switched-off
safeguard its story matches, with that evidence.

`coverage_notes(options, results, played)`: for each safeguard switched off (`--safeguard-off`),
the fault story that brings its bug back (`suites.wrack.stories.STORIES`, each a trigger naming its
safeguard) and whether the run played it and it went as planned; a story the run did not
play, or that never went as planned, is a miss (a valid verdict then says its bug may not have
been tried).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from suites.wrack.stories import STORIES


def _first_explained(results: Mapping[str, Any]) -> Mapping[str, Any] | None:
    ex = results.get("explanations")
    if not isinstance(ex, Mapping):
        return None
    for x in ex.get("explained") or []:
        if isinstance(x, Mapping) and x.get("not_allowed"):
            return x
    return None


def cause(results: Mapping[str, Any]) -> str | None:
    """One line (module docstring), or None when nothing is explained."""
    x = _first_explained(results)
    if x is None:
        return None
    kinds = ", ".join(str(k) for k in x.get("not_allowed") or [])
    story = _story(x)
    line = f"{kinds} at {x.get('key')} offset {x.get('offset')}" + (f": {story}" if story else "")
    for r in x.get("rules") or []:
        if r.get("matched") and r.get("evidence"):
            what = (f"the bug of safeguard {r['name']} (switched off)" if r.get("kind") == "safeguard"
                    else f"rule {r['name']}")
            return f"{line}; matches {what}: {r['evidence']}"
    return line


def _story(x: Mapping[str, Any]) -> str:
    """The explained offset's story in a clause: who acknowledged it, who was elected without it,
    who truncated it."""
    parts = []
    ack = x.get("ack") or {}
    if ack.get("node"):
        parts.append(f"acknowledged by {ack['node']} at {float(ack.get('time') or 0):.2f} s")
    el = x.get("elected_without") or {}
    if el.get("node"):
        parts.append(f"{el['node']} elected leader at {float(el.get('time') or 0):.2f} s without it")
    tr = x.get("truncated_by") or []
    if tr and isinstance(tr[0], Mapping):
        parts.append(f"truncated by {tr[0].get('node')} ({tr[0].get('reason')})")
    return ", then ".join(parts)


def triggers_of(safeguard: str) -> list[str]:
    """The story names (current names, not aliases) whose trigger brings back `safeguard`'s bug."""
    return sorted({t.name for t in STORIES.values() if getattr(t, "safeguard", None) == safeguard})


def coverage_notes(options: Mapping[str, Any], results: Mapping[str, Any],
                   played: Mapping[str, int]) -> list[tuple[str, bool]]:
    """(text, missed) for each switched-off safeguard (module docstring)."""
    stories = (results.get("faults") or {}).get("stories") or {}
    out: list[tuple[str, bool]] = []
    for sg in options.get("safeguards_off") or []:
        names = triggers_of(str(sg))
        if not names:
            out.append((f"safeguard {sg} is off; no fault story brings its bug back", False))
            continue
        for name in names:
            st = stories.get(name) or {}
            n = played.get(name, 0) or st.get("played", 0)
            if not n:
                out.append((f"safeguard {sg} is off, but its trigger, fault story {name}, never played "
                            f"(add --nemesis {name} to play it)", True))
            elif not st.get("as_planned"):
                out.append((f"safeguard {sg} is off; its trigger, fault story {name}, played {n} time(s) "
                            f"but never as planned", True))
            else:
                out.append((f"safeguard {sg} is off; its trigger, fault story {name}, played as planned "
                            f"{st['as_planned']} of {n} time(s)", False))
    return out
