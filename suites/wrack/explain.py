"""Why an offset was lost: the story of each anomalous offset, from the history and node events.

`explain(events, node_events, result, options)` is a pure function. For every offset the
queue checker's examples cite as lost or inconsistent (lost-write, inconsistent-offsets,
unseen, nonmonotonic-poll and -send and their `int-` forms) it tells:

- the ack: the send op that was told the offset, when, and which node acknowledged it (the
  node that led the partition in its own view at that time, from `became-leader` events,
  a node that was killed, paused or restarted since counting as no longer leading; when
  two nodes both believed they led, the one that later truncated the offset; without node
  events, the leader of the observed metadata, `cluster-state`), in which leader epoch,
  and the ISR then;
- what followed: the faults (nemesis events), elections of the partition (`partition-change`
  at the controller, `became-leader` at the new leader, which says where its log ended:
  a leader whose log ended at or below the offset never had the record), truncations of the
  offset (`truncated`, or a node that held it coming back from a restart with a shorter log),
  and later acks of other values at the same offset;
- the rules that bear on it: the run's loss rules that allow its anomaly in its partition
  (the verdict's picks, results.json `policy.policies`, in the one wording of
  checkers/queue/policy.py's table) and the safeguards switched off
  (`broker.core.safeguards.REGISTRY`), each with the evidence the story shows, or that no
  rule allows the loss (a bug).

Inputs. `events`: history event dicts in order (docs/ARCHITECTURE.md), including nemesis events and
the observer's `cluster-state` events (`{"controller", "partitions": {tp: {"leader",
"isr", "replicas"}}}`). `node_events`: dicts `{"time": ns on the history's clock, "node":
name, "event": kind, ...}` with the fields of broker/server/eventlog.py, broker ids
already turned into node names (suites/wrack/nodelogs.py reads them). `result`: the run's
results.json (the queue checker's result with the verdict). `options`: the run's test options (`acks`, `min_isr`,
`safeguards_off`, `unclean_election`, `flush_policy`).

Output: `{"explained": [...], "counts": {...}, "first_anomaly_time": s}`; at most `limit`
offsets are explained (round-robin over anomaly types, so each type gets some), the rest
are counted. Times are seconds since the workload started.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from broker.core.safeguards import REGISTRY
from checkers.queue.policy import WHY, type_order
from contracts.history import fault_windows, read_events
from suites.wrack.explain_story import Ack, Story, Target, election_dict, names_text, nodes_of, seconds
from suites.wrack.explain_text import fault_text, summary_text, timeline
from suites.wrack.nodelogs import read_node_events

LIMIT = 20  # stories shown
SCAN = 200  # offsets whose stories are told (the rest are counted)
SAME_SHOWN = 50  # offsets listed under a story they share
KIND_ORDER = ("lost-write", "inconsistent-offsets", "nonmonotonic-poll", "int-nonmonotonic-poll",
              "nonmonotonic-send", "int-nonmonotonic-send", "unseen")

NO_RULE = ("No configuration rule or switched-off safeguard explains this loss: with what this run's "
           "configuration and fault history were, the protocol promises an acknowledged record survives. "
           "This is a bug.")


# ------------------------------------------------------------------------- targets
def targets_of(result: dict[str, Any]) -> tuple[list[Target], int]:
    """The offsets to explain, in explanation order (round-robin over anomaly types), and
    how many distinct ones the examples cite in all."""
    per_kind: dict[str, list[Target]] = {}
    for kind in KIND_ORDER:
        for ex in (result.get("anomalies") or {}).get(kind) or []:
            per_kind.setdefault(kind, []).extend(_example_targets(kind, ex))
    merged: dict[tuple[str, str, Any], Target] = {}
    order: list[tuple[str, str, Any]] = []
    queues = [list(per_kind.get(k, [])) for k in KIND_ORDER]
    while any(queues):
        for q in queues:
            if not q:
                continue
            t = q.pop(0)
            ident = (t.key, "o", t.offset) if t.offset is not None else (t.key, "v", t.value)
            if ident in merged:
                m = merged[ident]
                m.kinds += [k for k in t.kinds if k not in m.kinds]
                m.ops += [i for i in t.ops if i not in m.ops]
                m.value = m.value if m.value is not None else t.value
                m.send_op = m.send_op if m.send_op is not None else t.send_op
            else:
                merged[ident] = t
                order.append(ident)
    return [merged[i] for i in order], len(order)


def _example_targets(kind: str, ex: dict[str, Any]) -> list[Target]:
    key, ops = ex.get("key"), [i for i in ex.get("ops") or [] if isinstance(i, int)]
    if not isinstance(key, str):
        return []
    if kind == "lost-write":
        return [Target(key, ex.get("offset"), ex.get("value"), [kind], ops, ops[0] if ops else None)]
    if kind == "inconsistent-offsets":
        return [Target(key, ex.get("offset"), None, [kind], ops)]
    if kind == "unseen":
        return [Target(key, None, v, [kind], [op], op) for v, op in zip(ex.get("values") or [], ops, strict=False)]
    offs = ex.get("offsets") or []
    if not offs:
        return []
    send_op = ops[0] if kind.endswith("send") and ops else None
    return [Target(key, offs[0], None, [kind], ops, send_op)]


# ------------------------------------------------------------------------- the pass
@dataclass
class _Seen:
    acks: list[Ack] = field(default_factory=list)
    op_time: dict[int, int] = field(default_factory=dict)
    faults: list[dict[str, Any]] = field(default_factory=list)
    states: list[tuple[int, dict[str, Any]]] = field(default_factory=list)  # (time, cluster-state value)


def _scan(events: Iterable[dict[str, Any]], targets: list[Target]) -> _Seen:
    """One pass: the sends to the targets' offsets or values, cited op times, nemesis events."""
    want_off = {(t.key, t.offset) for t in targets if t.offset is not None}
    want_val = {(t.key, t.value) for t in targets if t.value is not None}
    want_ops = {i for t in targets for i in t.ops}
    seen = _Seen()
    for ev in events:
        if ev.get("process") == "nemesis":
            if ev.get("f") == "cluster-state":
                if isinstance(ev.get("value"), dict):
                    seen.states.append((ev["time"], ev["value"]))
            else:
                seen.faults.append(ev)
            continue
        typ = ev.get("type")
        if typ == "invoke":
            continue
        idx = ev.get("index")
        if idx in want_ops:
            seen.op_time[idx] = ev["time"]
        if ev.get("f") not in ("send", "txn") or typ not in ("ok", "info") or not isinstance(ev.get("value"), list):
            continue
        for mop in ev["value"]:
            a = _send_mop(mop, ev)
            if a is not None and ((a.key, a.offset) in want_off or (a.key, a.value) in want_val or a.op in want_ops):
                seen.acks.append(a)
    return seen


def _send_mop(mop: Any, ev: dict[str, Any]) -> Ack | None:
    if not (isinstance(mop, list) and len(mop) == 3 and mop[0] == "send"):
        return None
    x = mop[2]
    if isinstance(x, list) and len(x) == 2:
        off = x[0] if isinstance(x[0], int) and x[0] >= 0 else None
        return Ack(ev["index"], ev.get("process"), ev["time"], ev["type"], mop[1], off, x[1])
    return Ack(ev["index"], ev.get("process"), ev["time"], ev["type"], mop[1], None, x)


# ------------------------------------------------------------------------- one offset
def explain(events: Iterable[dict[str, Any]], node_events: list[dict[str, Any]], result: dict[str, Any],
            options: dict[str, Any], *, limit: int = LIMIT, scan: int = SCAN) -> dict[str, Any]:
    """The explanations of a checked run (see the module docstring): the stories of the first
    `scan` offsets, offsets with the same story shown as one (`same_story`), at most `limit`."""
    targets, total = targets_of(result)
    chosen = targets[:max(limit, scan)]
    seen = _scan(events, chosen) if chosen else _Seen()  # nothing to explain: the history is not read
    story = Story(node_events, seen.faults, seen.states)
    groups: dict[tuple[Any, ...], dict[str, Any]] = {}
    covered = 0
    for t in chosen:
        x = _explain_one(t, seen, story, result, options)
        g = groups.get(_signature(x))
        if g is None and len(groups) < limit:
            groups[_signature(x)] = {**x, "same_story": [], "same_story_count": 0}
        elif g is not None:
            g["same_story_count"] += 1
            if len(g["same_story"]) < SAME_SHOWN:
                g["same_story"].append(x["offset"])
        else:
            continue
        covered += 1
    fat = result.get("first_anomaly_time")
    return {
        "explained": list(groups.values()),
        "counts": {"offsets": total, "explained": covered, "not_explained": total - covered,
                   "stories": len(groups), "anomalies": dict(result.get("anomaly_counts") or {})},
        "first_anomaly_time": None if fat is None else round(fat / 1e9, 3),
        "sources": {"node_events": len(node_events), "cluster_states": len(seen.states),
                    "faults": len(seen.faults)},
    }


@dataclass
class _Facts:
    """What the story says about one target."""

    t: Target
    ack: dict[str, Any] | None
    elections: list[dict[str, Any]]
    lost_by: dict[str, Any] | None  # the first election of a leader without the record
    truncs: list[dict[str, Any]]

    @property
    def restarts(self) -> list[dict[str, Any]]:
        return [x for x in self.truncs if x["reason"] in ("restart", "power loss")]


def _signature(x: dict[str, Any]) -> tuple[Any, ...]:
    """What makes two offsets' stories the same: key, types, acknowledging node and epoch, the
    losing election, each node's first truncation, the rules matched."""
    ack, lost = x["ack"] or {}, x["elected_without"] or {}
    cuts = tuple(sorted({(r["node"], r["reason"]) for r in x["truncated_by"]}))
    return (x["key"], tuple(x["anomalies"]), ack.get("node"), ack.get("epoch"), lost.get("node"), lost.get("epoch"),
            cuts, tuple(r["name"] for r in x["rules"] if r["matched"]))


def _explain_one(t: Target, seen: _Seen, story: Story, result: dict[str, Any],
                 options: dict[str, Any]) -> dict[str, Any]:
    acks = _acks_of(t, seen.acks)
    ack = acks[0] if acks else None
    if t.offset is None and ack is not None:
        t.offset = ack.offset
    t0 = ack.time if ack else min((seen.op_time[i] for i in t.ops if i in seen.op_time), default=0)
    acks_all = str(options.get("acks", "all")).lower() in ("all", "-1")
    ack_info = _ack_info(t, ack, story, acks_all) if ack else None
    elections = story.elections(t.key, t0)
    lost_by = next((e for e in elections if t.offset is not None and e.get("from_offset") is not None
                    and e["from_offset"] <= t.offset), None)
    f = _Facts(t, ack_info, elections, lost_by, _truncations(t, story, t0, ack_info))
    reuses = [a for a in acks[1:] if a.offset == t.offset and a.value != (ack.value if ack else None)]
    first_cuts = list({x["node"]: x["time"] for x in reversed(f.truncs)}.values())  # each node's first
    t_end = max(first_cuts + ([lost_by["time"]] if lost_by else []) + [a.time for a in reuses[:1]],
                default=t0 + 10 * 10**9) + 10**9  # the story of the first loss, and a second more
    allowed = set(result.get("allowed") or [])
    policy = result.get("policy") or {}
    picks = list(policy.get("policies") or [])
    out = {
        "key": t.key, "offset": t.offset, "value": t.value if t.value is not None else (ack.value if ack else None),
        "anomalies": sorted(t.kinds, key=type_order), "not_allowed": [k for k in t.kinds if k not in allowed],
        "allowed_by": sorted({p["name"] for p in picks if set(t.kinds) & set(p.get("allows") or ())
                              and (p.get("keys") is None or t.key in p["keys"])}),
        "ops": t.ops[:8], "ack": ack_info, "elected_without": election_dict(lost_by),
        "truncated_by": [{**x, "time": seconds(x["time"])} for x in f.truncs],
        "reused_by": [{"value": a.value, "op": a.op, "time": seconds(a.time),
                       "node": _one_leader(story, t.key, a.time)} for a in reuses[:3]],
        "during": _active_faults(story.faults, t0),
        "timeline": timeline(t, ack, ack_info, story, elections, f.truncs, reuses, t0, t_end),
        "rules": _rules(f, options, picks, policy.get("durability")),
    }
    out["summary"] = summary_text(out)
    return out


def _acks_of(t: Target, acks: list[Ack]) -> list[Ack]:
    """The acknowledged sends of this target, its own first, then others at the same offset by time."""
    mine = [a for a in acks if a.key == t.key and a.type == "ok" and (
        (t.value is not None and a.value == t.value) or (t.send_op is not None and a.op == t.send_op
                                                         and (t.offset is None or a.offset == t.offset)))]
    if t.value is None and t.send_op is None:
        mine = []
    off = t.offset if t.offset is not None else (mine[0].offset if mine else None)
    same = sorted((a for a in acks if a.key == t.key and a.type == "ok" and off is not None and a.offset == off),
                  key=lambda a: a.time)
    first = mine[:1] or same[:1]
    return first + [a for a in same if not first or a is not first[0]]


def _ack_info(t: Target, ack: Ack, story: Story, acks_all: bool) -> dict[str, Any]:
    leaders = story.leaders_at(t.key, ack.time)
    believed = leaders
    source = "node logs" if leaders else None
    if len(leaders) > 1 and t.offset is not None:
        leaders = _who_acked(t, ack, story, leaders, acks_all)
    node = leaders[0]["node"] if len(leaders) == 1 else None
    epoch = leaders[0].get("epoch") if len(leaders) == 1 else None
    if not leaders:
        st = story.state_at(t.key, ack.time)
        if st and st.get("leader"):
            node, source = st["leader"], "cluster state"
    return {"op": ack.op, "process": ack.process, "time": seconds(ack.time), "node": node, "epoch": epoch,
            "candidates": [{"node": e["node"], "epoch": e.get("epoch")} for e in believed] if len(believed) > 1 else [],
            "source": source, "isr": story.isr_at(t.key, ack.time)}


def _who_acked(t: Target, ack: Ack, story: Story, leaders: list[dict[str, Any]],
               acks_all: bool) -> list[dict[str, Any]]:
    """Of several nodes that believed they led at the ack (an old leader cut off from the
    controller still leads in its own view), those that may have acknowledged it: one whose
    epoch started at or below the offset; then, for a record that was lost or with acks=1
    (an old leader acknowledges alone), the one that later truncated the offset; else
    (acks=all: the old leader cannot reach an ISR) the newest epoch."""
    o = t.offset
    assert o is not None
    newer = [e for e in leaders if e.get("from_offset") is None or e["from_offset"] <= o] or leaders
    if {"lost-write", "unseen"} & set(t.kinds) or not acks_all:
        losers = {x["node"] for x in story.of(t.key, ("truncated",))
                  if x["time"] > ack.time and x.get("to", 0) <= o < x.get("from_leo", -1)}
        return [e for e in newer if e["node"] in losers] or newer
    top = max(e.get("epoch") or -1 for e in newer)
    return [e for e in newer if (e.get("epoch") or -1) == top]


def _one_leader(story: Story, tp: str, t: int) -> str | None:
    ls = story.leaders_at(tp, t)
    if len(ls) == 1:
        return ls[0]["node"]
    st = story.state_at(tp, t)
    return st.get("leader") if st and not ls else None


def _truncations(t: Target, story: Story, t0: int, ack: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Truncations of the offset after t0: `truncated` events, and restarts of a node that held
    it with a log ending at or below it."""
    if t.offset is None:
        return []
    o = t.offset
    out = []
    held = {ack["node"]} if ack and ack.get("node") else set()
    held |= {c["node"] for c in (ack or {}).get("candidates") or []}
    for e in story.by_tp.get(t.key, ()):
        if e["time"] <= t0:
            continue
        ev = e["event"]
        if ev == "truncated" and e.get("to", 0) <= o < e.get("from_leo", -1):
            out.append({"node": e["node"], "time": e["time"], "from_leo": e.get("from_leo"), "to": e.get("to"),
                        "reason": e.get("reason")})
            held.discard(e["node"])
        elif ev == "replica-opened" and e["node"] in held and e.get("leo", 0) <= o:
            pl = [f for f in story.faults if f.get("f") == "power-loss" and t0 < f["time"] <= e["time"]
                  and e["node"] in nodes_of(f.get("value"))]
            out.append({"node": e["node"], "time": e["time"], "from_leo": None, "to": e.get("leo"),
                        "reason": "power loss" if pl else "restart"})
            held.discard(e["node"])
        elif _log_end(e) > o:
            held.add(e["node"])  # its log reached past the offset then
    return out


def _log_end(e: dict[str, Any]) -> int:
    """The log end offset a role event reports (-1 for other events)."""
    v = e.get("from_offset") if e["event"] == "became-leader" else e.get("leo") if e["event"] == "became-follower" else None
    return v if isinstance(v, int) else -1


def _active_faults(faults: list[dict[str, Any]], t: int) -> list[str]:
    """Faults in force at time t (started, not yet stopped)."""
    return [f"{w.kind} since {seconds(w.start):.2f} s ({fault_text(w.start_event)})"
            for w in fault_windows(faults) if w.start <= t and (w.stop is None or w.stop > t)]


# ------------------------------------------------------------------------- rules
def _rules(f: _Facts, options: dict[str, Any], picks: list[dict[str, Any]],
           durability: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The run's loss rules that allow this offset's anomalies in its partition (the policy's
    picks, results.json `policy.policies`, worded as checkers/queue/policy.py's table) and the
    safeguards switched off, each with the evidence the story shows; `none` when no rule
    allows the loss and no safeguard is off (then it is a bug)."""
    off = [s for s in options.get("safeguards_off") or [] if s in REGISTRY]
    out = [_rule(p["name"], "configuration", WHY.get(p["name"], p.get("reason", "")), _pick_evidence(p["name"], f, options))
           for p in picks if set(f.t.kinds) & set(p.get("allows") or ())
           and (p.get("keys") is None or f.t.key in p["keys"])]
    out += [_rule(n, "safeguard", _sg_text(n), _sg_evidence(n, f)) for n in off]
    if not out:
        out.append(_rule("none", "none", NO_RULE, _no_rule_evidence(f, options, durability)))
    return sorted(out, key=lambda r: not r["matched"])


def _pick_evidence(name: str, f: _Facts, options: dict[str, Any]) -> str | None:
    """The sign in this story of the rule a pick stands for, or None."""
    isr = (f.ack or {}).get("isr")
    if name == "acks1":
        return _lost_elsewhere(f) or f"acks={options.get('acks')}: the ack did not wait for the followers"
    if name == "min-isr1":
        return f"the ISR was {names_text(isr)} when the record was acknowledged" if isr is not None else None
    if name == "unclean-election":
        return _unclean_evidence(f)
    if name == "power-loss-unflushed" and f.restarts:
        r = f.restarts[0]
        return (f"{r['node']} came back ({r['reason']}) at {seconds(r['time']):.2f} s with its log ending at {r['to']}, "
                f"while more replicas of {f.t.key} had lost data at once than min.insync.replicas-1")
    if name == "final-read-deadline" and "unseen" in f.t.kinds and not f.truncs:
        return "the final read-back did not run to the end, and no node log shows the offset truncated"
    return None


def _unclean_evidence(f: _Facts) -> str | None:
    unclean = [e for e in f.elections if e.get("election") == "unclean"]
    return (f"{unclean[0]['node']} was elected uncleanly (not in the ISR) at {seconds(unclean[0]['time']):.2f} s"
            if unclean else None)


def _no_rule_evidence(f: _Facts, options: dict[str, Any], durability: dict[str, Any] | None) -> str:
    """What the story shows when no rule allows the loss: who lost it, and for a node that came
    back short from an unclean shutdown, that the ELR's bound held."""
    ev = _lost_elsewhere(f) or "the acknowledged record is gone"
    if f.restarts and str(options.get("flush_policy", "none")) != "every":
        r = f.restarts[0]
        peak = ((durability or {}).get("peak") or {}).get(f.t.key, 0)
        ev += (f"; {r['node']} came back ({r['reason']}) at {seconds(r['time']):.2f} s with its log ending at {r['to']}, "
               f"but at most {peak} replica(s) of {f.t.key} lost data at once, within min.insync.replicas-1 = "
               f"{(durability or {}).get('bound')}: the protocol promises this loss cannot happen")
    return ev


def _lost_elsewhere(f: _Facts) -> str | None:
    e = f.lost_by
    return (f"{e['node']} was elected leader in epoch {e['epoch']} with its log ending at {e['from_offset']}, "
            f"without the record") if e else None


def _sg_evidence(name: str, f: _Facts) -> str | None:
    """The sign of a safeguard's bug in this story, or None."""
    lost_by, restarts, isr = f.lost_by, f.restarts, (f.ack or {}).get("isr")
    if name == "clean-election-only":
        return _unclean_evidence(f)
    if name == "epoch-truncation":
        hw = [x for x in f.truncs if str(x.get("reason", "")).startswith("hwm")]
        return (f"{hw[0]['node']} truncated to its high watermark {hw[0]['to']} ({hw[0]['reason']}), not by leader "
                f"epoch") if hw else None
    if name == "elr":
        if restarts and lost_by and lost_by["node"] == restarts[0]["node"]:
            return (f"{lost_by['node']} lost the record in an unclean shutdown and was elected leader again "
                    f"(Last Replica Standing)")
        if isr is not None and len(isr) <= 1:
            return f"the ISR had shrunk to {names_text(isr)} when the record was acknowledged"
        return None
    if lost_by and lost_by.get("election") in ("clean", None):
        if name == "broker-epoch-check" and any(x["node"] == lost_by["node"] for x in restarts):
            return (f"{lost_by['node']} restarted with a short log and was elected from the ISR without the "
                    f"record")
        if name in ("leso-check", "partition-epoch-check", "broker-epoch-check"):
            return f"{lost_by['node']} was in the ISR without the acknowledged record and was elected leader"
    return None


def _rule(name: str, kind: str, text: str, evidence: str | None, matched: bool | None = None) -> dict[str, Any]:
    """A rule and the story's evidence for it (matched: there is evidence, unless told)."""
    return {"name": name, "kind": kind, "rule": text, "evidence": evidence,
            "matched": evidence is not None if matched is None else matched}


def _sg_text(name: str) -> str:
    s = REGISTRY[name]
    return f"Safeguard {name} switched off. Rule: {s.rule} Without it: {s.bug}"


def explain_run(run_dir: Path, results: Mapping[str, Any], test: Mapping[str, Any]) -> dict[str, Any]:
    """Why each anomalous offset of a checked run was lost (`explain` over the history and the
    nodes' event lines, suites/wrack/nodelogs.py); an explanation that fails is noted, never raised."""
    try:
        ne = read_node_events(run_dir, dict(test))
        out = explain(read_events(Path(run_dir) / "history.jsonl"), ne.events, dict(results),
                      dict(test.get("options") or {}))
        out["clock"] = ne.clock
        return out
    except Exception as e:  # noqa: BLE001 - a missing explanation must not cost the verdict
        return {"error": f"{type(e).__name__}: {e}", "explained": [], "counts": {}}


def isr_changes(run_dir: Path, test: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The controller's ISR changes from the nodes' event lines, on the history's clock, for the
    loss rules (suites/wrack/lossy.py: they see a replica's spell outside the ISR that the
    observer's polls miss). None when the logs are missing or their clock is only approximate."""
    try:
        ne = read_node_events(run_dir, dict(test))
    except Exception:  # noqa: BLE001 - without them the observer's events stand alone
        return []
    if ne.clock not in ("monotonic", "wall"):
        return []
    return [{"time": e["time"], "key": e["tp"], "isr": list(e.get("isr") or []),
             "elected": e.get("leader") if e.get("election") not in (None, "none") else None} for e in ne.events
            if e.get("event") == "partition-change" and e.get("time") is not None and e.get("tp")]
