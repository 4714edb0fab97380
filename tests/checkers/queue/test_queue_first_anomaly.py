"""`first_anomaly_time`: when the history first witnessed an anomaly, the earliest example
once the last of the ops it cites has happened; `anomaly_times` the same per type, and
`first_bad_anomaly_time` (the verdict's) the earliest of the types the policy does not allow.

Each cited op is timed by the event that names it (its completion; its invoke if it never
completed). The property test recomputes that from the raw events of simulated histories
with one planted anomaly and irregular clocks.
"""

from __future__ import annotations

import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from queue_testlib import PLANTS, H, judged, simulate

from checkers.queue import check


def test_lost_write_is_witnessed_at_the_read_that_skipped_it():
    h = H().send(0, "x", "a", 0).send(0, "x", "b", 1).poll(1, {"x": [[1, "b"]]})
    r = check(h.events)
    assert r["anomalies"]["lost-write"][0]["ops"] == [1, 5]
    assert r["first_anomaly_time"] == h.events[5]["time"] > h.events[1]["time"]


def test_no_anomaly_no_time():
    h = H().send(0, "x", 1, 0).poll(1, {"x": [[0, 1]]})
    assert check(h.events)["first_anomaly_time"] is None


def test_allowed_anomalies_have_a_time_too():
    h = H().send(0, "x", 1, 0).send(0, "y", 7, 0).poll(1, {"y": [[0, 7]]})
    r = judged(h.events, policies=["final-read-deadline"])
    assert r["valid"] is True and r["anomaly_types"] == ["unseen"]
    assert r["first_anomaly_time"] == h.events[1]["time"]


def test_the_first_bad_anomaly_is_the_first_one_the_policy_does_not_allow():
    # x's value is never read (unseen, allowed by the deadline), then y is read out of order
    h = H().send(0, "x", 1, 0).send(0, "y", 7, 0).send(0, "y", 8, 1).poll(1, {"y": [[0, 7], [1, 8]]})
    h.poll(1, {"y": [[0, 7]]})
    r = judged(h.events, policies=["final-read-deadline"])
    assert r["valid"] is False and r["allowed"] == ["unseen"] and r["bad_anomaly_types"] == ["nonmonotonic-poll"]
    assert r["anomaly_times"]["unseen"] == r["first_anomaly_time"] < r["anomaly_times"]["nonmonotonic-poll"]
    assert r["first_bad_anomaly_time"] == r["anomaly_times"]["nonmonotonic-poll"] == h.events[-1]["time"]
    assert judged(h.events[:-2], policies=["final-read-deadline"])["first_bad_anomaly_time"] is None


def test_an_op_never_completed_is_timed_by_its_invoke():
    h = H().send(0, "x", "a", 0).poll(1, {"x": [[0, "a"]]}).ev(2, "invoke", "send", [["send", "x", "b"]])
    h.poll(1, {"x": [[1, "b"]]})  # reads b, so the open send committed; then a poll reads 0 again
    h.poll(1, {"x": [[0, "a"]]})
    r = check(h.events)
    assert r["anomaly_types"] == ["nonmonotonic-poll"]
    assert r["first_anomaly_time"] == min(max(h.events[i]["time"] for i in ex["ops"])
                                          for ex in r["anomalies"]["nonmonotonic-poll"])


def naming_times(events: list[dict]) -> dict[int, int]:
    """op name -> time of the event naming it, straight from the events."""
    out: dict[int, int] = {}
    open_: dict[int, dict] = {}
    for ev in events:
        if ev["process"] == "nemesis":
            continue
        if ev["type"] == "invoke":
            open_[ev["process"]] = ev
        else:
            open_.pop(ev["process"])
            out[ev["index"]] = ev["time"]
    for inv in open_.values():
        out[inv["index"]] = inv["time"]
    return out


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), n_ops=st.integers(0, 120), plant=st.sampled_from(PLANTS))
def test_first_anomaly_time_is_the_earliest_example_once_its_last_op_happened(seed, n_ops, plant):
    events = simulate(seed, n_ops=n_ops, plant=plant).h.events
    rng = random.Random(seed)
    t = 0
    for ev in events:  # an irregular clock, so times are not a function of the index
        t += rng.choice((0, 1, 7, 1000, 123456))
        ev["time"] = t
    r = check(events)
    assert r["anomaly_types"]
    times = naming_times(events)
    assert r["first_anomaly_time"] == min(max(times[i] for i in ex["ops"])
                                          for exs in r["anomalies"].values() for ex in exs if ex["ops"])
    assert r["anomaly_times"] == {t: min(max(times[i] for i in ex["ops"]) for ex in exs if ex["ops"])
                                  for t, exs in r["anomalies"].items() if any(ex["ops"] for ex in exs)}
