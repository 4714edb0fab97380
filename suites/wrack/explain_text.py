"""The words of an explanation (suites/wrack/explain.py): one offset's timeline of acks,
faults, elections, truncations and reuses, and its one-paragraph summary."""

from __future__ import annotations

from typing import Any

from suites.wrack.explain_story import Ack, Story, Target, names_text, nodes_of, seconds

TIMELINE_MAX = 14


def timeline(t: Target, ack: Ack | None, info: dict[str, Any] | None, story: Story,
              elections: list[dict[str, Any]], truncs: list[dict[str, Any]], reuses: list[Ack],
              t0: int, t_end: int) -> list[dict[str, Any]]:
    items: list[tuple[int, str, str | None, str]] = []  # (time, kind, node, text)
    if ack is not None and info is not None:
        who = info["node"] or " or ".join(c["node"] for c in info["candidates"]) or "an unknown node"
        ep = f" in epoch {info['epoch']}" if info.get("epoch") is not None else ""
        items.append((ack.time, "ack", info["node"],
                      f"{who} acknowledged offset {t.offset} (value {ack.value!r}) to process {ack.process}{ep}"))
    involved = {n for n in [info["node"] if info else None, *(e["node"] for e in elections),
                            *(x["node"] for x in truncs)] if n}
    for f in story.faults:
        if t0 < f["time"] <= t_end:
            items.append((f["time"], "fault" if set(nodes_of(f.get("value"))) & involved else "other fault", None,
                          fault_text(f)))
    for e in elections:
        if e["time"] <= t_end:
            items.append((e["time"], "election", e["node"], _election_text(t, e)))
    for x in truncs:
        if x["time"] <= t_end:
            items.append((x["time"], "truncation", x["node"], _trunc_text(t, x)))
    for a in reuses[:3]:
        items.append((a.time, "reuse", None, f"value {a.value!r} acknowledged at offset {a.offset} to process "
                                              f"{a.process} (op {a.op})"))
    rank = {"ack": 0, "truncation": 1, "election": 2, "fault": 2, "reuse": 3, "other fault": 4}
    kept = sorted(items, key=lambda x: (rank[x[1]], x[0]))[:TIMELINE_MAX]  # the latest of a rank go first
    return [{"time": seconds(tm), "kind": "fault" if k == "other fault" else k, "node": n, "text": s}
            for tm, k, n, s in sorted(kept, key=lambda x: x[0])]


def _election_text(t: Target, e: dict[str, Any]) -> str:
    how = {"clean": "a clean election from the ISR", "elr": "from the ELR", "unclean": "an unclean election",
           "leaderless": "no leader left"}.get(e.get("election") or "", "")
    if e.get("node") is None:
        return f"{t.key} has no leader" + (f" ({how})" if how and e.get("election") != "leaderless" else "")
    s = f"{e['node']} became leader of {t.key}"
    s += f" in epoch {e['epoch']}" if e.get("epoch") is not None else ""
    s += f" ({how})" if how else ""
    fo = e.get("from_offset")
    if fo is not None and t.offset is not None:
        s += (f"; its log ended at {fo}, at or below {t.offset}: it never had the record" if fo <= t.offset
              else f"; its log ended at {fo}, past {t.offset}")
    return s


def _trunc_text(t: Target, x: dict[str, Any]) -> str:
    if x.get("from_leo") is None:
        return f"{x['node']} came back ({x['reason']}) with its log ending at {x['to']}: offset {t.offset} gone from it"
    return (f"{x['node']} truncated its log of {t.key} from {x['from_leo']} to {x['to']} ({x['reason']}): "
            f"offset {t.offset} gone from it")


def fault_text(f: dict[str, Any]) -> str:
    v = f.get("value")
    name = f.get("f", "?")
    if isinstance(v, dict) and isinstance(v.get("grudge"), dict):
        cut = "; ".join(f"{k} from {', '.join(map(str, vs))}" for k, vs in sorted(v["grudge"].items()))
        return f"{name}: {cut}"
    if isinstance(v, dict) and v.get("story") and v.get("step"):  # a fault story's progress (suites/wrack/stories.py)
        return f"{v['story']} story: {v['step']}" + ("" if v.get("ok", True) else " (did not happen)")
    nodes = nodes_of(v)
    return f"{name} {', '.join(nodes)}" if nodes else name


def summary_text(x: dict[str, Any]) -> str:
    """One paragraph: what happened to this offset."""
    parts = [f"Offset {x['offset']} of {x['key']}" + (f" (value {x['value']!r})" if x["value"] is not None else "")
             + f" ({', '.join(x['anomalies'])})"]
    a = x["ack"]
    if a:
        who = a["node"] or " or ".join(c["node"] for c in a["candidates"]) or "an unknown node"
        ep = f" in leader epoch {a['epoch']}" if a.get("epoch") is not None else ""
        isr = f", ISR {names_text(a['isr'])}" if a.get("isr") is not None else ""
        parts.append(f"was acknowledged at {a['time']:.2f} s by {who}{ep}{isr}")
    else:
        parts.append("has no acknowledged send in the history")
    s = " ".join(parts) + "."
    if x["elected_without"]:
        e = x["elected_without"]
        s += f" {e['node']} was then elected leader" + (f" in epoch {e['epoch']}" if e.get("epoch") is not None else "")
        s += f" at {e['time']:.2f} s without it (log ending at {e['from_offset']})."
    if x["truncated_by"]:
        first = {r["node"]: r for r in reversed(x["truncated_by"])}  # each node's first
        tr = sorted(first.values(), key=lambda r: r["time"])
        s += " Truncated by " + ", ".join(f"{r['node']} at {r['time']:.2f} s ({r['reason']})" for r in tr) + "."
    elif x["offset"] is not None:
        s += " No node log shows it truncated."
    if x["reused_by"]:
        r = x["reused_by"][0]
        s += f" The offset was reused by value {r['value']!r} at {r['time']:.2f} s."
    matched = [r["name"] for r in x["rules"] if r["matched"]]
    s += f" Matches: {', '.join(matched)}." if matched else " No rule's sign found in the story."
    return s
