"""checkers/producers.py: idempotent producers' order and gaps, on histories built from a model
log (several producer instances interleaved on one key, each in the order it was handed its
records), then broken on purpose."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from checkers import producers
from checkers.verdict import judge
from suites.wrack.rules import choose


def history(log: list[tuple[str, int, int]], outcome: dict[int, str], read: bool = True) -> list[dict]:
    """Events for records `log` [(instance, n, value)] at offsets 0.. of key q-0: each record's
    send completion (`outcome[value]`: ok with its offset, or info), then one ok poll of the
    whole log (when `read`)."""
    events: list[dict] = []
    for off, (inst, n, v) in enumerate(log):
        ok = outcome.get(v, "ok") == "ok"
        events.append({"index": len(events), "time": 10 * off, "process": 100 + off, "type": "ok" if ok else "info",
                       "f": "send", "value": [["send", "q-0", [off, v] if ok else v]], "producer": [[inst, n]]})
    if read:
        events.append({"index": len(events), "time": 10_000, "process": 0, "type": "ok", "f": "poll",
                       "value": [["poll", {"q-0": [[off, v] for off, (_, _, v) in enumerate(log)]}]]})
    return events


@st.composite
def interleaved(draw):
    """Two to four instances, each handed 1-12 records, merged into one log in a random
    interleaving that keeps each instance's order; some sends indeterminate."""
    sizes = draw(st.lists(st.integers(1, 12), min_size=2, max_size=4))
    rng = random.Random(draw(st.integers(0, 2**32)))
    queues = [[(f"p/{i}", n, 1000 * i + n) for n in range(size)] for i, size in enumerate(sizes)]
    log: list[tuple[str, int, int]] = []
    while any(queues):
        q = rng.choice([q for q in queues if q])
        log.append(q.pop(0))
    outcome = {v: rng.choice(["ok", "ok", "info"]) for _, _, v in log}
    return log, outcome


@settings(max_examples=150, deadline=None)
@given(interleaved())
def test_each_instance_in_its_order_without_gaps_is_valid(case):
    log, outcome = case
    res = producers.check(history(log, outcome))
    assert res["valid"] is True, res["anomalies"]
    assert res["producers"]["records"] == len(log)


@settings(max_examples=150, deadline=None)
@given(interleaved(), st.data())
def test_two_records_of_one_instance_swapped_in_the_log_are_a_reorder(case, data):
    log, outcome = case
    inst = data.draw(st.sampled_from(sorted({i for i, _, _ in log if sum(1 for j, _, _ in log if j == i) >= 2}
                                            or ["none"])))
    if inst == "none":
        return
    where = [k for k, (i, _, _) in enumerate(log) if i == inst]
    a, b = sorted(data.draw(st.lists(st.sampled_from(where), min_size=2, max_size=2, unique=True)))
    log[a], log[b] = log[b], log[a]
    res = producers.check(history(log, outcome))
    assert res["valid"] is False and producers.PRODUCER_REORDER in res["anomaly_types"]
    ex = res["anomalies"][producers.PRODUCER_REORDER][0]
    assert ex["producer"] == inst and ex["earlier"]["n"] < ex["later"]["n"]
    assert ex["earlier"]["offset"] > ex["later"]["offset"]


@settings(max_examples=150, deadline=None)
@given(interleaved(), st.data())
def test_a_record_missing_before_an_acknowledged_one_of_its_instance_is_a_gap(case, data):
    log, outcome = case
    k = data.draw(st.integers(0, len(log) - 1))
    inst, n, v = log[k]
    later = [w for i, m, w in log if i == inst and m > n and outcome.get(w, "ok") == "ok"]
    shown = history(log, outcome)
    # the record never reached the log: its send indeterminate, no poll returned it
    sends = [e for e in shown if not (e["f"] == "send" and e["producer"] == [[inst, n]])]
    sends.append({"index": 999, "time": 5, "process": 999, "type": "info", "f": "send",
                  "value": [["send", "q-0", v]], "producer": [[inst, n]]})
    poll = sends[-2] if sends[-2]["f"] == "poll" else next(e for e in sends if e["f"] == "poll")
    poll["value"][0][1]["q-0"] = [[o, w] for o, w in poll["value"][0][1]["q-0"] if w != v]
    res = producers.check(sends)
    if later:
        assert producers.PRODUCER_GAP in res["anomaly_types"], res
        ex = res["anomalies"][producers.PRODUCER_GAP][0]
        assert ex["missing"] == {"value": v, "n": n} and ex["acknowledged"]["value"] == later[0]
    else:  # nothing of its instance acknowledged after it: it may simply not have been written
        assert producers.PRODUCER_GAP not in res["anomaly_types"], res


def test_a_gap_needs_reads_up_to_the_acknowledged_offset():
    log = [("p/1", 0, 10), ("p/1", 1, 11)]
    events = history(log, {10: "info"}, read=False)
    events[0]["value"] = [["send", "q-0", 10]]
    assert producers.check(events)["valid"] is True  # nothing was read: no evidence
    events.append({"index": 5, "time": 99, "process": 0, "type": "ok", "f": "poll",
                   "value": [["poll", {"q-0": [[1, 11]]}]]})
    res = producers.check(events)
    assert res["anomaly_types"] == [producers.PRODUCER_GAP] and res["anomaly_times"] == {producers.PRODUCER_GAP: 10}


def test_records_without_stamps_are_not_judged():
    events = history([("p/1", 1, 11), ("p/1", 0, 10)], {})
    for e in events:
        e.pop("producer", None)
    res = producers.check(events)
    assert res["valid"] is True and res["producers"] == {"instances": 0, "records": 0}


def test_the_strict_rules_allow_neither_and_loss_rules_allow_both():
    res = producers.check(history([("p/1", 1, 11), ("p/1", 0, 10)], {}))
    assert res["anomaly_types"] == [producers.PRODUCER_REORDER]
    opts = {"workload": "queue", "nodes": 3, "acks": "all", "min_isr": 2, "rf": 3}
    parts = {"queue": {**res, "complete": True}}
    assert judge(parts, choose(opts, events=[])).valid is False
    assert judge(parts, choose({**opts, "min_isr": 1}, events=[])).valid is True


def test_an_acknowledgement_without_an_offset_places_nothing():
    # -1: acknowledged, offset unknown (a retried batch answered as a duplicate): not a
    # position, and, never read before a later acknowledged one, a gap
    events = history([("p/1", 0, 10), ("p/1", 1, 11)], {})
    events[0]["value"] = [["send", "q-0", [-1, 10]]]
    events[2]["value"] = [["poll", {"q-0": [[1, 11]]}]]
    res = producers.check(events)
    assert res["anomaly_types"] == [producers.PRODUCER_GAP], res
