"""Consumer-group offset commits: does a restarted consumer resume where its group committed?

The queue workload's consuming processes commit what they polled to their thread's group
(a poll's completion: "group", "commit": {"offsets": {key: next offset}, "ok": bool}) and a
process resumes from its group's committed offsets on its first assign (the completion:
"group", "resumed": {key: offset or null}); workloads/queue.py. One thread's processes run
one after another, so a group's commits and resumes are totally ordered by the history.

For each group and key, a resume must read one of: the offset of the last commit that was
acknowledged before it (none if there was none), or of any commit after that one whose
outcome was unknown (`ok` false: it may have happened). Anything else is a `lost-commit`
anomaly, {"group", "key", "resumed", "expected", "time", "process"}: an acknowledged commit the
coordinator no longer returns (lost on a coordinator change or a crash, KAFKA-20634), or an
offset nobody committed. No policy allows it: committed offsets are stored durably whatever
the loss rules say of records.

`check(events)` is a pure function of the history's events (any order of keys; the history's
order of events), returning the checker result: `valid`, `anomaly_types`, `anomalies`,
`anomaly_keys` (the groups each type was found in: a loss rule may allow it for some groups
only, checkers/verdict.py) and `commits` / `resumes` counted.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

LOST_COMMIT = "lost-commit"


def check(events: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The commit check's result (module docstring)."""
    allowed: dict[tuple[str, str], set[int | None]] = {}
    found: list[dict[str, Any]] = []
    commits = resumes = 0
    for ev in events:
        if ev.get("type") != "ok" or not isinstance(ev.get("group"), str):
            continue
        group = ev["group"]
        commit = ev.get("commit")
        if isinstance(commit, Mapping):
            commits += 1
            for key, off in (commit.get("offsets") or {}).items():
                if commit.get("ok"):
                    allowed[(group, key)] = {off}
                else:
                    allowed.setdefault((group, key), {None}).add(off)
        resumed = ev.get("resumed")
        if isinstance(resumed, Mapping):
            resumes += 1
            for key, off in sorted(resumed.items()):
                expected = allowed.get((group, key), {None})
                if off not in expected:
                    found.append({"group": group, "key": key, "resumed": off,
                                  "expected": sorted(expected, key=lambda x: -1 if x is None else x),
                                  "time": ev.get("time"), "process": ev.get("process"), "index": ev.get("index")})
    anomalies = {LOST_COMMIT: found} if found else {}
    groups: dict[str, int] = {}
    for a in found:
        groups[a["group"]] = groups.get(a["group"], 0) + 1
    return {"valid": not found, "anomaly_types": sorted(anomalies), "anomalies": anomalies,
            "anomaly_counts": {LOST_COMMIT: len(found)} if found else {},
            "anomaly_keys": {LOST_COMMIT: groups} if found else {}, "commits": commits, "resumes": resumes}
