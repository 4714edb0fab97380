"""suites/wrack/explain.py on hand-built histories and node events: who acknowledged a lost
offset, in which epoch, what followed, who truncated it, which rule it matches."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st
from queue_testlib import PLANTS, H, judged, simulate

from checkers.queue import check
from suites.wrack.explain import explain, targets_of

TP = "t-0"
ACKS1 = {"acks": "1", "min_isr": 2, "safeguards_off": [], "flush_policy": "none"}
STRICT = {"acks": "all", "min_isr": 2, "safeguards_off": [], "flush_policy": "none"}


def ne(time: int, node: str, event: str, **fields) -> dict:
    return {"time": time, "node": node, "event": event, **fields}


def failover_history() -> tuple[list[dict], list[dict]]:
    """acks=1: n1 leads epoch 0 and acknowledges offsets 0..2; only offset 0 reached n2; n1 is
    killed, n2 is elected in epoch 1 from offset 1 and acknowledges value 9 at offset 1; n1
    comes back and truncates 3 -> 1. The history's times are index * 1000 ns."""
    h = H().assign(0, [TP])                                   # 0, 1
    h.send(1, TP, "a", 0).send(1, TP, "b", 1).send(1, TP, "c", 2)  # 2..7 (acks at 3, 5, 7)
    h.nemesis("kill", {"nodes": ["n1"]})                      # 8
    h.send(2, TP, 9, 1)                                       # 9, 10
    h.nemesis("start", {"nodes": ["n1"]})                     # 11
    h.poll(0, {TP: [[0, "a"], [1, 9]]})                       # 12, 13
    nodes = [
        ne(0, "n1", "became-leader", tp=TP, epoch=0, from_offset=0, hwm=0, isr=["n1", "n2", "n3"]),
        ne(0, "n2", "became-follower", tp=TP, epoch=0, leader="n1", leo=0, hwm=0),
        ne(8500, "n3", "partition-change", tp=TP, leader="n2", epoch=1, prev_leader="n1", prev_epoch=0,
           election="clean", isr=["n2", "n3"], elr=[]),
        ne(8600, "n2", "became-leader", tp=TP, epoch=1, from_offset=1, hwm=1, isr=["n2", "n3"]),
        ne(11100, "n1", "clock", boot_id="b"),
        ne(11200, "n1", "replica-opened", tp=TP, leo=3, hwm=1),
        ne(11300, "n1", "became-follower", tp=TP, epoch=1, leader="n2", leo=3, hwm=1),
        ne(11400, "n1", "truncated", tp=TP, epoch=1, role="follower", from_leo=3, to=1, reason="diverging-epoch"),
    ]
    return h.events, nodes


def by_offset(out: dict, offset: int) -> dict:
    (x,) = [e for e in out["explained"] if e["offset"] == offset]
    return x


def test_an_acks1_loss_names_the_acknowledging_leader_the_election_and_the_truncating_node():
    events, nodes = failover_history()
    result = judged(events, policies=["acks1"])
    assert {"lost-write", "inconsistent-offsets"} <= set(result["anomaly_types"])
    out = explain(events, nodes, result, ACKS1)
    x = by_offset(out, 1)
    assert set(x["anomalies"]) >= {"lost-write", "inconsistent-offsets"} and x["value"] == "b"
    assert x["ack"]["node"] == "n1" and x["ack"]["epoch"] == 0 and x["ack"]["op"] == 5
    assert x["ack"]["isr"] == ["n1", "n2", "n3"]
    assert x["elected_without"]["node"] == "n2" and x["elected_without"]["epoch"] == 1
    assert x["elected_without"]["from_offset"] == 1 and x["elected_without"]["election"] == "clean"
    assert [(t["node"], t["reason"], t["from_leo"], t["to"]) for t in x["truncated_by"]] == [
        ("n1", "diverging-epoch", 3, 1)]
    assert x["reused_by"][0]["value"] == 9 and x["reused_by"][0]["node"] == "n2"
    (rule,) = [r for r in x["rules"] if r["matched"]]
    assert rule["name"] == "acks1" and "n2" in rule["evidence"]
    assert x["allowed_by"] == ["acks1"] and x["not_allowed"] == []
    kinds = [i["kind"] for i in x["timeline"]]
    assert kinds == ["ack", "fault", "election", "reuse", "fault", "truncation"]
    assert "n1" in x["summary"] and "n2" in x["summary"] and "diverging-epoch" in x["summary"]
    assert out["first_anomaly_time"] == round(result["first_anomaly_time"] / 1e9, 3)
    json.dumps(out)  # results.json material


def test_the_unseen_offset_2_is_explained_by_the_same_truncation():
    events, nodes = failover_history()
    result = judged(events, policies=["acks1"])
    x = by_offset(explain(events, nodes, result, ACKS1), 2)
    assert "unseen" in x["anomalies"] or "lost-write" in x["anomalies"]
    assert x["ack"]["node"] == "n1" and x["truncated_by"][0]["node"] == "n1"


def test_two_nodes_believing_they_lead_the_one_that_truncated_acknowledged():
    """n1 is cut off (it still leads in its own view) while n2 is elected: n1's ack of offset 1
    after n2's election is attributed to n1, which later truncates it."""
    h = H().assign(0, [TP]).send(1, TP, "a", 0)              # 0..3
    h.nemesis("start-partition", {"grudge": {"n1": ["n2", "n3"]}})  # 4
    h.send(1, TP, "b", 1)                                     # 5, 6 (n1 acks, acks=1)
    h.send(2, TP, "x", 1)                                     # 7, 8 (n2 acks)
    h.nemesis("stop-partition", {"healed": "network"})        # 9
    h.poll(0, {TP: [[0, "a"], [1, "x"]]})                     # 10, 11
    nodes = [
        ne(0, "n1", "became-leader", tp=TP, epoch=0, from_offset=0, hwm=0, isr=["n1", "n2", "n3"]),
        ne(4500, "n2", "became-leader", tp=TP, epoch=1, from_offset=1, hwm=1, isr=["n2", "n3"]),
        ne(9500, "n1", "became-follower", tp=TP, epoch=1, leader="n2", leo=2, hwm=1),
        ne(9600, "n1", "truncated", tp=TP, epoch=1, role="follower", from_leo=2, to=1, reason="diverging-epoch"),
    ]
    result = judged(h.events, policies=["acks1"])
    x = by_offset(explain(h.events, nodes, result, ACKS1), 1)
    assert x["value"] == "b" and x["ack"]["node"] == "n1" and x["ack"]["epoch"] == 0
    assert x["reused_by"][0]["value"] == "x"
    assert any("partition" in d for d in x["during"])


def test_without_node_events_the_observed_metadata_names_the_leader():
    events, _nodes = failover_history()
    cs = {"process": "nemesis", "type": "info", "f": "cluster-state",
          "value": {"controller": "n3", "partitions": {TP: {"leader": "n1", "isr": ["n1", "n2"],
                                                            "replicas": ["n1", "n2", "n3"]}}}}
    cs2 = {**cs, "value": {"controller": "n3", "partitions": {TP: {"leader": "n2", "isr": ["n2"],
                                                                  "replicas": ["n1", "n2", "n3"]}}}}
    evs = [dict(cs, index=-1, time=1)] + events[:9] + [dict(cs2, index=-2, time=8800)] + events[9:]
    result = judged(evs, policies=["acks1"])
    x = by_offset(explain(evs, [], result, ACKS1), 1)
    assert x["ack"]["node"] == "n1" and x["ack"]["source"] == "cluster state" and x["ack"]["epoch"] is None
    assert x["ack"]["isr"] == ["n1", "n2"]
    assert [(e["kind"], e["node"]) for e in x["timeline"] if e["kind"] == "election"] == [("election", "n2")]
    assert x["truncated_by"] == [] and "No node log shows it truncated" in x["summary"]


def test_a_strict_configuration_matches_no_rule():
    events, nodes = failover_history()
    result = check(events)
    x = by_offset(explain(events, nodes, result, STRICT), 1)
    assert [r["name"] for r in x["rules"]] == ["none"] and "bug" in x["rules"][0]["rule"]
    assert set(x["not_allowed"]) == set(x["anomalies"])


def test_switched_off_safeguards_are_matched_by_their_sign():
    events, nodes = failover_history()
    hwm = [dict(n, reason="hwm-on-become-follower") if n["event"] == "truncated" else n for n in nodes]
    unclean = [dict(n, election="unclean") if n["event"] == "partition-change" else n for n in hwm]
    result = check(events)
    opts = {**STRICT, "safeguards_off": ["epoch-truncation", "clean-election-only", "leso-check"]}
    x = by_offset(explain(events, unclean, result, opts), 1)
    rules = {r["name"]: r for r in x["rules"]}
    assert rules["epoch-truncation"]["matched"] and "high watermark" in rules["epoch-truncation"]["evidence"]
    assert rules["clean-election-only"]["matched"] and "uncleanly" in rules["clean-election-only"]["evidence"]
    assert rules["clean-election-only"]["kind"] == "safeguard" and "KIP-106" in rules["clean-election-only"]["rule"]
    assert not rules["leso-check"]["matched"]  # the losing election was unclean, not from the ISR
    clean = explain(events, hwm, result, opts)
    assert {r["name"]: r["matched"] for r in by_offset(clean, 1)["rules"]}["leso-check"]


def test_a_power_loss_that_shortened_the_acknowledging_leaders_log():
    h = H().assign(0, [TP]).send(1, TP, "a", 0).send(1, TP, "b", 1)  # 0..5
    h.nemesis("power-loss", {"nodes": ["n1"]})                # 6
    h.send(1, TP, "c", 1)                                     # 7, 8
    h.poll(0, {TP: [[0, "a"], [1, "c"]]})                     # 9, 10
    nodes = [
        ne(0, "n1", "became-leader", tp=TP, epoch=0, from_offset=0, hwm=0, isr=["n1"]),
        ne(6100, "n1", "clock", boot_id="b"),
        ne(6200, "n1", "replica-opened", tp=TP, leo=1, hwm=1),
        ne(6300, "n1", "became-leader", tp=TP, epoch=1, from_offset=1, hwm=1, isr=["n1"]),
    ]
    result = judged(h.events, policies=["min-isr1"])
    opts = {**STRICT, "min_isr": 1, "safeguards_off": ["elr"]}
    x = by_offset(explain(h.events, nodes, result, opts), 1)
    assert x["truncated_by"][0]["node"] == "n1" and x["truncated_by"][0]["reason"] == "power loss"
    rules = {r["name"]: r for r in x["rules"]}
    assert rules["min-isr1"]["matched"] and "[n1]" in rules["min-isr1"]["evidence"]
    assert "acknowledges and commits records alone" in rules["min-isr1"]["rule"]  # the table's one wording
    assert rules["elr"]["matched"] and "Last Replica Standing" in rules["elr"]["evidence"]


def test_offsets_with_one_story_are_told_once_and_at_most_limit_stories():
    h = H()
    for i in range(20):  # 20 keys, one lost write each: 20 different stories
        h.send(1, f"k-{i}", "a", 0).send(1, f"k-{i}", "b", 1).poll(0, {f"k-{i}": [[1, "b"]]})
    for i in range(2, 12):  # ten more lost writes of k-0: the same story as offset 0's
        h.send(1, "k-0", f"v{i}", i)
    h.poll(0, {"k-0": [[12, "w"]]}).send(1, "k-0", "w", 12)
    result = judged(h.events, policies=["acks1"])
    out = explain(h.events, [], result, ACKS1, limit=5)
    assert out["counts"]["stories"] == len(out["explained"]) == 5
    assert out["counts"]["offsets"] == 30 and out["counts"]["explained"] == 5 + 10
    assert out["counts"]["explained"] + out["counts"]["not_explained"] == 30
    (k0,) = [x for x in out["explained"] if x["key"] == "k-0"]
    assert k0["offset"] == 0 and k0["same_story"] == list(range(2, 12)) and k0["same_story_count"] == 10
    assert out["counts"]["anomalies"] == result["anomaly_counts"]
    few = explain(h.events, [], result, ACKS1, limit=2, scan=3)  # offsets 0, 2, 3 of k-0: one story
    assert few["counts"]["explained"] == 3 and few["counts"]["not_explained"] == 27


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), plant=st.sampled_from(PLANTS), limit=st.integers(1, 25))
def test_every_explained_offset_is_cited_and_the_output_is_bounded(seed, plant, limit):
    events = simulate(seed, plant=plant).h.events
    result = judged(events, policies=["acks1"])
    out = explain(events, [], result, ACKS1, limit=limit)
    targets, total = targets_of(result)
    assert len(out["explained"]) == out["counts"]["stories"] <= limit
    assert out["counts"]["explained"] + out["counts"]["not_explained"] == out["counts"]["offsets"] == total
    assert out["counts"]["explained"] == sum(1 + x["same_story_count"] for x in out["explained"])
    cited = {(t.key, t.offset) for t in targets} | {(t.key, t.value) for t in targets}
    for x in out["explained"]:
        assert (x["key"], x["offset"]) in cited or (x["key"], x["value"]) in cited
        assert all((x["key"], o) in cited for o in x["same_story"])
        assert x["summary"] and x["rules"]
        assert len(x["timeline"]) <= 14
    json.dumps(out)


def test_an_unseen_send_with_an_unfinished_final_read_matches_the_deadline_rule():
    h = H().assign(0, [TP]).send(1, TP, "a", 0).send(1, TP, "b", 1).poll(0, {TP: [[0, "a"]]})
    nodes = [ne(0, "n1", "became-leader", tp=TP, epoch=0, from_offset=0, hwm=0, isr=["n1", "n2"])]
    result = judged(h.events, policies=["final-read-deadline"])
    x = by_offset(explain(h.events, nodes, result, STRICT), 1)
    assert x["anomalies"] == ["unseen"] and x["truncated_by"] == []
    assert [r["name"] for r in x["rules"]] == ["final-read-deadline"] and x["allowed_by"] == ["final-read-deadline"]


def test_a_power_loss_within_the_elr_bound_is_no_excuse():
    """One replica lost power (min ISR 2 allows 1 at once): unflushed data is no excuse, the rule
    is listed unmatched and the loss is a bug."""
    h = H().assign(0, [TP]).send(1, TP, "a", 0).send(1, TP, "b", 1)
    h.nemesis("power-loss", {"nodes": ["n1"]})
    h.send(1, TP, "c", 1).poll(0, {TP: [[0, "a"], [1, "c"]]})
    nodes = [ne(0, "n1", "became-leader", tp=TP, epoch=0, from_offset=0, hwm=0, isr=["n1", "n2"]),
             ne(6100, "n1", "clock", boot_id="b"), ne(6200, "n1", "replica-opened", tp=TP, leo=1, hwm=1),
             ne(6300, "n1", "became-leader", tp=TP, epoch=1, from_offset=1, hwm=1, isr=["n1"])]
    result = check(h.events)
    durability = {"observed": True, "bound": 1, "peak": {TP: 1}}
    over = {"name": "power-loss-unflushed", "rule": "over the bound", "reason": "", "keys": [TP],
            "allows": ["lost-write", "inconsistent-offsets", "unseen"]}
    for picks, name in (([], "none"), ([over], "power-loss-unflushed")):
        result["policy"] = {"durability": durability, "policies": picks}
        (rule,) = by_offset(explain(h.events, nodes, result, STRICT), 1)["rules"]
        assert rule["name"] == name and rule["matched"] and "n1 came back (power loss)" in rule["evidence"]
        assert ("within min.insync.replicas-1 = 1" in rule["evidence"]) == (not picks)


def test_anomalies_without_an_offset_to_explain_do_not_read_the_history():
    h = H().assign(0, [TP]).send(1, TP, "a", 0).poll(0, {TP: [[0, "a"], [1, "a"]]})
    result = check(h.events)
    assert result["anomaly_types"] == ["duplicate"]

    def no_history():
        raise AssertionError("read the history")
        yield

    out = explain(no_history(), [], result, STRICT)
    assert out["explained"] == [] and out["counts"]["offsets"] == 0


def test_with_acks_all_the_newest_of_two_believed_leaders_acknowledged():
    """n1, cut off, still leads epoch 0 in its own view and appends b at offset 1 (never
    acknowledged: it reaches no ISR); n2 leads epoch 1 and acknowledges x at offset 1; n1 later
    truncates 2 -> 1. With acks=all x's ack is n2's, though n1 is the one that truncated."""
    h = H().assign(0, [TP]).send(1, TP, "a", 0)               # 0..3
    h.nemesis("start-partition", {"grudge": {"n1": ["n2", "n3"]}})  # 4
    h.send(1, TP, "b", None, "info")                          # 5, 6
    h.send(2, TP, "x", 1)                                     # 7, 8
    h.poll(0, {TP: [[0, "a"], [1, "b"]]})                     # 9, 10: a bug shows b
    h.poll(3, {TP: [[1, "x"]]})                               # 11, 12
    nodes = [
        ne(0, "n1", "became-leader", tp=TP, epoch=0, from_offset=0, hwm=0, isr=["n1", "n2", "n3"]),
        ne(4500, "n2", "became-leader", tp=TP, epoch=1, from_offset=1, hwm=1, isr=["n2", "n3"]),
        ne(12500, "n1", "became-follower", tp=TP, epoch=1, leader="n2", leo=2, hwm=1),
        ne(12600, "n1", "truncated", tp=TP, epoch=1, role="follower", from_leo=2, to=1, reason="diverging-epoch"),
    ]
    result = check(h.events)
    assert "inconsistent-offsets" in result["anomaly_types"]
    x = by_offset(explain(h.events, nodes, result, STRICT), 1)
    assert x["ack"]["node"] == "n2" and x["ack"]["epoch"] == 1 and x["value"] == "x"
    assert {c["node"] for c in x["ack"]["candidates"]} == {"n1", "n2"}
    assert by_offset(explain(h.events, nodes, result, ACKS1), 1)["ack"]["node"] == "n1"  # acks=1: who lost it
