"""suites/tansu/inflight.py: the sends in flight under each fault, by what the fault struck."""

from __future__ import annotations

from suites.tansu.inflight import label, struck


def ev(i, t, p, typ, f, value=None):
    return {"index": i, "time": t, "process": p, "type": typ, "f": f, "value": value}


def test_sends_in_flight_are_counted_per_fault_window_by_outcome():
    s = 1_000_000_000
    events = [
        ev(0, 0, 1, "invoke", "send", [["send", "k-0", 1]]),
        ev(1, 1 * s, "nemesis", "info", "kill", {"nodes": ["n1"]}),
        ev(2, 2 * s, 1, "ok", "send", [["send", "k-0", [0, 1]]]),
        ev(3, 3 * s, 2, "invoke", "send", [["send", "k-0", 2]]),
        ev(4, 4 * s, 2, "info", "send", None),
        ev(5, 5 * s, "nemesis", "info", "start", {"nodes": ["n1", "n2"]}),
        ev(6, 6 * s, 3, "invoke", "send", [["send", "k-0", 3]]),
        ev(7, 7 * s, 3, "ok", "send", [["send", "k-0", [1, 3]]]),
        ev(8, 8 * s, "nemesis", "info", "start-partition", {"spec": {"cut": [["n1"], ["n2"]]}}),
    ]
    out = struck(events)
    assert out[0] == {"fault": "kill database", "start_s": 1.0, "end_s": 5.0, "ok": 1, "fail": 0, "info": 1}
    assert out[1]["fault"] == "partition brokers-database" and out[1]["ok"] == 0  # never healed: 2 s, no send


def test_labels_say_what_was_struck():
    assert label("partition", {"spec": {"clients": ["n2"]}}) == "partition clients-brokers"
    assert label("partition", {"spec": {"isolate": {"role": "controller"}}}) == "partition database isolated"
    assert label("pause", {"nodes": ["n3"]}) == "pause broker"
    assert label("clock", {"action": "bump"}) == "clock"
