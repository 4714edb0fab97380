"""Consumer-group offset commits: does a restarted consumer resume where its group committed?

The queue workload's consuming processes commit what they polled to their thread's group
(a poll's completion: "group", "commit": {"offsets": {key: next offset}, "ok": bool}) and a
process resumes from its group's committed offsets on its first assign (the completion:
"group", "resumed": {key: offset or null}); workloads/queue.py. One thread's processes run
one after another, so a group's commits and resumes are totally ordered by the history.

For each group and key, a resume must read one of: the offset of the last commit that was
acknowledged before it (none if there was none), or of any commit before it whose outcome
was unknown (`ok` false). Such a commit may take effect at any time after it was sent, also
after later acknowledged ones: the client may still be retrying it, or the network still
delivering it, when the harness gives up on it (a librdkafka consumer's timed-out commit,
delayed by the client path, landed after the thread's next acknowledged commit and was what
the group returned; simple commits carry no generation to fence them, in Kafka as here).
Anything else is a `lost-commit`
anomaly, {"group", "key", "resumed", "expected", "time", "process"}: an acknowledged commit the
coordinator no longer returns (lost on a coordinator change or a crash, KAFKA-20634), or an
offset nobody committed. No policy allows it: committed offsets are stored durably whatever
the loss rules say of records.

`check(events)` is a pure function of the history's events (any order of keys; the history's
order of events), returning the checker result: `valid`, `anomaly_types`, `anomalies`,
`anomaly_keys` (the groups each type was found in: a loss rule may allow it for some groups
only, checkers/verdict.py), `anomaly_times` (the earliest resume that showed it, ns) and
`commits` / `resumes` counted.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

LOST_COMMIT = "lost-commit"


def check(events: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The commit check's result (module docstring)."""
    acked: dict[tuple[str, str], int | None] = {}  # the last acknowledged commit's offset
    maybe: dict[tuple[str, str], set[int]] = {}  # every commit of unknown outcome so far
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
                    acked[(group, key)] = off
                else:
                    maybe.setdefault((group, key), set()).add(off)
        resumed = ev.get("resumed")
        if isinstance(resumed, Mapping):
            resumes += 1
            for key, off in sorted(resumed.items()):
                expected = {acked.get((group, key)), *maybe.get((group, key), ())}
                if off not in expected:
                    found.append({"group": group, "key": key, "resumed": off,
                                  "expected": sorted(expected, key=lambda x: -1 if x is None else x),
                                  "time": ev.get("time"), "process": ev.get("process"), "index": ev.get("index")})
    anomalies = {LOST_COMMIT: found} if found else {}
    groups: dict[str, int] = {}
    for a in found:
        groups[a["group"]] = groups.get(a["group"], 0) + 1
    times = [a["time"] for a in found if a.get("time") is not None]
    return {"valid": not found, "anomaly_types": sorted(anomalies), "anomalies": anomalies,
            "anomaly_counts": {LOST_COMMIT: len(found)} if found else {},
            "anomaly_keys": {LOST_COMMIT: groups} if found else {},
            "anomaly_times": {LOST_COMMIT: min(times)} if times else {}, "commits": commits, "resumes": resumes}
