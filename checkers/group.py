"""Consumer-group checks: what Kafka's group protocol promises the members of one group.

`check(events)` reads a history (an iterable of events: the group workload's ops, workloads/
group.py) and returns a checker result (docs/ARCHITECTURE.md) with these anomaly types:

- `group-commit-backwards`: a partition's committed offset went back. For each key, an ok
  `commit` that was invoked after another ok commit of that key had completed must name an
  offset at least as high (real-time order: the later commit's member started from what the
  earlier one committed, or was fenced by its generation, as Kafka's coordinator fences a
  member of an old generation with ILLEGAL_GENERATION).
- `group-skip`: the group committed past a record it never read. For each key, every offset
  that some poll read (so the record is in the log; the final read-back reads everything)
  and that is below the highest offset the group committed must have been returned to some
  member of the group (a `poll` carrying `generation`, i.e. a subscribe-mode poll).
- `group-overlap`: two members owned one partition in one generation: a key in the
  `assignment` of two different `member`s under the same `generation` (ok polls and commits
  carry what the member held).
- `group-never-read`: a partition the group never read: some poll read records of the key
  (the final read-back reads everything), but no member of the group was ever assigned it
  nor read it, over the whole run. The group protocol gives every partition of the
  subscribed topics to one member in each generation, so a partition no member ever holds is
  lost to the group (a liveness failure of the coordinator or the assignment it handed out).

Only ok ops count (a failed or unknown commit is no evidence). The result also counts the
commits, generations and members seen. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from contracts.pairing import Op, pair_ops

SHOWN = 10  # examples kept per anomaly type


def _commits(ops: list[dict[str, Any]]) -> dict[str, list[tuple[int, int, int, dict[str, Any]]]]:
    """key -> [(invoke time, complete time, offset, op summary)] of ok commits."""
    out: dict[str, list[tuple[int, int, int, dict[str, Any]]]] = {}
    for op in ops:
        if op["f"] != "commit" or op["type"] != "ok" or not isinstance(op.get("value"), dict):
            continue
        for k, o in op["value"].items():
            out.setdefault(k, []).append((op["invoke_time"], op["time"], int(o), _summary(op, k, o)))
    return out


def _summary(op: Mapping[str, Any], key: str, offset: Any) -> dict[str, Any]:
    return {"index": op.get("index"), "process": op.get("process"), "key": key, "offset": offset,
            "generation": op.get("generation"), "member": op.get("member"),
            "invoke_time": op.get("invoke_time"), "time": op.get("time")}


def commits_backwards(commits: Mapping[str, list[tuple[int, int, int, dict[str, Any]]]]) -> list[dict[str, Any]]:
    """`group-commit-backwards` examples (module docstring): a sweep in invoke order, keeping
    the highest commit completed before each invoke."""
    found = []
    for k, cs in sorted(commits.items()):
        by_done = sorted(cs, key=lambda c: c[1])
        best: tuple[int, int, int, dict[str, Any]] | None = None
        i = 0
        for c in sorted(cs, key=lambda c: c[0]):
            while i < len(by_done) and by_done[i][1] < c[0]:
                if best is None or by_done[i][2] > best[2]:
                    best = by_done[i]
                i += 1
            if best is not None and c[2] < best[2]:
                found.append({"key": k, "earlier": best[3], "later": c[3]})
    return found


def group_skips(ops: list[dict[str, Any]], commits: Mapping[str, list[Any]]) -> list[dict[str, Any]]:
    """`group-skip` examples: per key, the offsets below the highest commit no member read."""
    in_log: dict[str, set[int]] = {}
    by_members: dict[str, set[int]] = {}
    for op in ops:
        if op["f"] != "poll" or op["type"] != "ok" or not isinstance(op.get("value"), list):
            continue
        member = op.get("member") is not None
        for mop in op["value"]:
            if len(mop) < 2 or not isinstance(mop[1], dict):
                continue
            for k, recs in mop[1].items():
                offs = {r[0] for r in recs}
                in_log.setdefault(k, set()).update(offs)
                if member:
                    by_members.setdefault(k, set()).update(offs)
    found = []
    for k, cs in sorted(commits.items()):
        top = max(c[2] for c in cs)
        missed = sorted(o for o in in_log.get(k, ()) if o < top and o not in by_members.get(k, set()))
        if missed:
            found.append({"key": k, "committed": top, "missed": missed[:50], "count": len(missed)})
    return found


def overlaps(ops: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`group-overlap` examples: (generation, key) held by two members."""
    owners: dict[tuple[int, str], dict[str, dict[str, Any]]] = {}
    for op in ops:
        if op["type"] != "ok" or op.get("generation") is None or not op.get("member"):
            continue
        for k in op.get("assignment") or ():
            owners.setdefault((op["generation"], k), {}).setdefault(op["member"], _summary(op, k, None))
    return [{"generation": g, "key": k, "members": list(ms.values())}
            for (g, k), ms in sorted(owners.items()) if len(ms) > 1]


def _flat(op: Op) -> dict[str, Any]:
    """An op as the checks read it: f, type, process, value, invoke and completion times and
    index, and what the completion says the member held (generation, member, assignment)."""
    c = op.complete or {}
    return {"f": op.f, "type": op.type, "process": op.process, "value": op.value, "index": op.index,
            "invoke_time": op.time, "time": op.ret_time if op.ret_time is not None else op.time,
            "generation": c.get("generation"), "member": c.get("member"), "assignment": c.get("assignment")}


def never_read(ops: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`group-never-read` examples: keys with records that no member held or read."""
    in_log: dict[str, int] = {}
    held: set[str] = set()
    members = False
    for op in ops:
        if op["type"] != "ok":
            continue
        if op.get("member"):
            members = True
            held.update(op.get("assignment") or ())
        if op["f"] == "poll" and isinstance(op.get("value"), list):
            for mop in op["value"]:
                if len(mop) >= 2 and isinstance(mop[1], dict):
                    for k, recs in mop[1].items():
                        in_log[k] = in_log.get(k, 0) + len(recs)
                        if op.get("member"):
                            held.add(k)
    if not members:
        return []
    return [{"key": k, "records_read_back": n} for k, n in sorted(in_log.items()) if n and k not in held]


def progress(ops: list[dict[str, Any]]) -> tuple[dict[str, int], dict[str, int]]:
    """Per key: distinct offsets the group's members read, and distinct offsets any poll read."""
    by_members: dict[str, set[int]] = {}
    seen: dict[str, set[int]] = {}
    for op in ops:
        if op["f"] != "poll" or op["type"] != "ok" or not isinstance(op.get("value"), list):
            continue
        for mop in op["value"]:
            if len(mop) >= 2 and isinstance(mop[1], dict):
                for k, recs in mop[1].items():
                    offs = {r[0] for r in recs}
                    seen.setdefault(k, set()).update(offs)
                    if op.get("member"):
                        by_members.setdefault(k, set()).update(offs)
    return ({k: len(by_members.get(k, ())) for k in sorted(seen)}, {k: len(v) for k, v in sorted(seen.items())})


def check(events: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The checker result of the group checks (module docstring)."""
    ops = [_flat(op) for op in pair_ops(events)]
    commits = _commits(ops)
    found = {"group-commit-backwards": commits_backwards(commits), "group-skip": group_skips(ops, commits),
             "group-overlap": overlaps(ops), "group-never-read": never_read(ops)}
    types = [t for t, xs in found.items() if xs]
    gens = {op.get("generation") for op in ops if op.get("generation") is not None}
    read, in_log = progress(ops)
    members = {op.get("member") for op in ops if op.get("member")}
    return {"valid": not types, "anomaly_types": types, "anomalies": {t: xs[:SHOWN] for t, xs in found.items() if xs},
            "anomaly_counts": {t: len(xs) for t, xs in found.items() if xs},
            "commits": sum(len(c) for c in commits.values()), "generations": len(gens), "members": len(members),
            "keys_committed": sorted(commits), "records_read_by_members": read, "records_in_log": in_log,
            "max_generation": max(gens, default=None)}
