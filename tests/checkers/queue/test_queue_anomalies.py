"""One small hand-written history per anomaly type, each detected as exactly that type,
plus the cases Jepsen's kafka_test covers (empty polls, crashed clients, reassignment,
info sends that later appear, aborted txn polls)."""

from __future__ import annotations

import pytest
from queue_testlib import H, judged

from checkers.queue import ANOMALY_TYPES, POLICIES, check, resolve_allowed
from contracts.errors import InputError


def types(h: H, **kw) -> list[str]:
    return check(h.events, **kw)["anomaly_types"]


def test_clean_history_is_valid():
    h = (H().send(0, "x", 1, 0).send(0, "x", 2, 1).send(2, "x", 3, 2)
         .poll(1, {"x": [[0, 1], [1, 2]]}).poll(1, {"x": [[2, 3]]}))
    r = check(h.events)
    assert r["valid"] is True and r["anomaly_types"] == [] and r["anomalies"] == {}
    assert r["checked"]["sends_acked"] == 3 and r["checked"]["values_read"] == 3


def test_inconsistent_offsets():
    # offset 0 of x is acknowledged as 1, and a poll reads 2 (sent by an indeterminate op) there
    h = (H().send(0, "x", 1, 0).send(3, "x", 2, None, "info")
         .poll(1, {"x": [[0, 1]]}).poll(2, {"x": [[0, 2]]}))
    r = check(h.events)
    assert r["anomaly_types"] == ["inconsistent-offsets"]
    ex = r["anomalies"]["inconsistent-offsets"][0]
    assert ex["key"] == "x" and ex["offset"] == 0 and sorted(ex["values"]) == [1, 2]
    assert ex["ops"] == [1, 5, 9][:len(ex["ops"])] or set(ex["ops"]) <= {1, 5, 7, 9}
    assert "offset 0 of key x" in ex["explanation"]


def test_inconsistent_offsets_info_send_not_proven_committed():
    # Jepsen: an info send whose offset conflicts is assumed not to have committed ...
    h = (H().sends(0, [("x", 1, 0), ("y", 1, None)], "info").send(1, "x", 2, 0)
         .poll(2, {"x": [[0, 2]]}))
    assert "inconsistent-offsets" not in types(h)
    # ... until a poll proves it committed (its send to y was read)
    h.poll(3, {"y": [[5, 1]]})
    assert "inconsistent-offsets" in types(h)


def test_duplicate():
    h = (H().send(0, "x", "a", 1).send(1, "x", "b", None, "info")
         .poll(2, {"x": [[2, "b"], [3, "a"]]}))
    r = check(h.events)
    assert r["anomaly_types"] == ["duplicate"]
    ex = r["anomalies"]["duplicate"][0]
    assert ex["value"] == "a" and ex["offsets"] == [1, 3]


def test_duplicate_seen_by_aborted_poll():
    # Jepsen: a failed poll's data still counts; a failed send's offset does not
    h = (H().send(0, "x", 0, 1).send(0, "x", 1, 2, "fail")
         .poll(1, {"x": [[11, 0], [12, 1]]}, "fail"))
    r = check(h.events)
    assert r["anomalies"]["duplicate"][0]["offsets"] == [1, 11]
    assert all(e["value"] == 0 for e in r["anomalies"]["duplicate"])


def test_lost_write():
    h = H().send(0, "x", "a", 0).send(0, "x", "b", 1).poll(1, {"x": [[1, "b"]]})
    r = check(h.events)
    assert r["anomaly_types"] == ["lost-write"]
    ex = r["anomalies"]["lost-write"][0]
    assert ex["value"] == "a" and ex["max_read_offset"] == 1 and ex["ops"] == [1, 5]


def test_lost_write_inconsistent_offsets():
    # Jepsen "inconsistent": a at 0 is overwritten by b; reading b and c means a was lost
    h = (H().send(0, "x", "a", 0).sends(0, [("x", "b", 0), ("x", "c", 2)])
         .poll(0, {"x": [[0, "b"], [2, "c"]]}))
    r = check(h.events)
    assert [e["value"] for e in r["anomalies"]["lost-write"]] == ["a"]


def test_lost_write_needs_proof_that_an_info_send_committed():
    # Jepsen "atomic": the info send of [x a, y b@0] only counts once a poll read its a
    base = (H().sends(0, [("x", "a", None), ("y", "b", 0)], "info").send(1, "y", "c", None, "info"))
    without = H()
    without.events = [dict(e) for e in base.events]
    without.poll(3, {"y": [[1, "c"]]})
    assert "lost-write" not in types(without)
    base.poll(2, {"x": [[0, "a"]]}).poll(3, {"y": [[1, "c"]]})
    r = check(base.events)
    assert r["anomaly_types"] == ["lost-write"]
    assert r["anomalies"]["lost-write"][0]["value"] == "b"


def test_unseen():
    h = H().send(0, "x", 1, 0).send(0, "y", 7, 0).poll(1, {"y": [[0, 7]]}).poll(1, {})
    r = check(h.events)
    assert r["anomaly_types"] == ["unseen"]
    assert r["anomaly_counts"]["unseen"] == 1
    assert r["anomalies"]["unseen"][0]["values"] == [1]
    assert judged(h.events, policies=["final-read-deadline"])["valid"] is True


def test_g1a():
    h = H().sends(0, [("x", 2, None), ("y", 3, None)], "fail").poll(1, {"x": [[0, 2]]})
    r = check(h.events)
    assert r["anomaly_types"] == ["G1a"]
    assert r["anomalies"]["G1a"][0]["ops"] == [1, 3]


def test_garbage_read():
    r = check(H().poll(1, {"x": [[0, 99]]}).events)
    assert r["anomaly_types"] == ["garbage-read"]


def test_precommitted_read():
    h = H().txn(0, [["send", "x", "a"], ["poll"]], [["send", "x", [0, "a"]], ["poll", {"x": [[0, "a"]]}]])
    assert types(h) == ["precommitted-read"]


def _abcd(h: H) -> H:
    for o, v in enumerate("abcd"):
        h.send(0, "x", v, o)
    return h


def test_poll_skip():
    h = _abcd(H()).poll(1, {"x": [[0, "a"], [1, "b"]]}).poll(1, {"x": [[3, "d"]]}).poll(2, {"x": [[2, "c"]]})
    r = check(h.events)
    assert r["anomaly_types"] == ["poll-skip"]
    ex = r["anomalies"]["poll-skip"][0]
    assert ex["skipped"] == ["c"] and ex["delta"] == 2 and ex["process"] == 1 and ex["offsets"] == [1, 3]


def test_poll_skip_not_without_known_gap():
    # offset 2 is not known to exist: no skip (Jepsen: gaps may be txn markers)
    h = (H().send(0, "x", "a", 0).send(0, "x", "b", 1).send(0, "x", "d", 3)
         .poll(1, {"x": [[0, "a"], [1, "b"]]}).poll(1, {"x": [[3, "d"]]}))
    assert types(h) == []


def test_nonmonotonic_poll():
    h = (_abcd(H()).poll(1, {"x": [[0, "a"], [1, "b"], [2, "c"]]}).poll(1, {"x": [[1, "b"], [2, "c"], [3, "d"]]}))
    r = check(h.events)
    assert r["anomaly_types"] == ["nonmonotonic-poll"]
    ex = r["anomalies"]["nonmonotonic-poll"][0]
    assert ex["offsets"] == [2, 1] and ex["delta"] == -1


@pytest.mark.parametrize("between, expect", [
    (("assign", ["y"]), []), (("assign", ["x", "y"]), []), (("subscribe", ["x"]), []),
    (("assign-fail", ["y"]), ["nonmonotonic-poll"]),
])
def test_reassignment_resets_consecutive_polls(between, expect):
    h = _abcd(H()).poll(1, {"x": [[0, "a"], [1, "b"], [2, "c"]]})
    f, keys = between
    if f == "assign-fail":
        h.assign(1, keys, "fail")
    else:
        h.op(1, f, keys, "ok", keys)
    h.poll(1, {"x": [[0, "a"], [1, "b"], [2, "c"], [3, "d"]]})
    assert types(h) == expect


def test_int_poll_skip():
    h = (H().sends(1, [("x", "a", None), ("x", "b", None), ("x", "d", None)], "info")
         .poll(0, {"x": [[1, "a"], [4, "d"]]}).polls(5, [{"x": [[1, "a"]]}, {"x": [[4, "d"]]}])
         .poll(6, {"x": [[2, "b"]]}))
    r = check(h.events)
    assert r["anomaly_types"] == ["int-poll-skip"]
    assert r["anomaly_counts"]["int-poll-skip"] == 2
    assert [e["skipped"] for e in r["anomalies"]["int-poll-skip"]] == [["b"], ["b"]]


def test_int_poll_skip_exempt_under_rebalance():
    h = (H().sends(1, [("x", "a", 1), ("x", "b", 2), ("x", "d", 4)])
         .poll(0, {"x": [[1, "a"], [4, "d"]]}, **{"rebalance-log": [{"keys": ["x"]}]})
         .poll(6, {"x": [[1, "a"], [2, "b"]]}))
    assert "int-poll-skip" not in types(h)


def test_int_nonmonotonic_poll():
    h = (H().sends(0, [("x", "a", None), ("x", "b", None), ("x", "c", None)], "info")
         .poll(0 + 1, {"x": [[3, "c"], [1, "a"]]})
         .polls(2, [{"x": [[2, "b"], [3, "c"]]}, {"x": [[3, "c"]]}]))
    r = check(h.events)
    assert r["anomaly_types"] == ["int-nonmonotonic-poll"]
    assert [e["delta"] for e in r["anomalies"]["int-nonmonotonic-poll"]] == [-2, 0]


def test_nonmonotonic_send():
    h = H().send(0, "x", "b", 1).send(0, "x", "a", 0).poll(1, {"x": [[0, "a"], [1, "b"]]})
    r = check(h.events)
    assert r["anomaly_types"] == ["nonmonotonic-send"]
    assert r["anomalies"]["nonmonotonic-send"][0]["offsets"] == [1, 0]


def test_nonmonotonic_send_with_offset_from_polls():
    # the second send is indeterminate: where it landed is known from a poll
    h = (H().send(0, "x", "b", 1).send(0, "x", "a", None, "info")
         .poll(1, {"x": [[0, "a"], [1, "b"]]}))
    assert types(h) == ["nonmonotonic-send"]


def test_int_send_skip():
    h = (H().sends(0, [("x", "a", 0), ("x", "c", 2)]).send(1, "x", "b", 1)
         .poll(2, {"x": [[0, "a"], [1, "b"], [2, "c"]]}))
    r = check(h.events)
    assert r["anomaly_types"] == ["int-send-skip"]
    assert r["anomalies"]["int-send-skip"][0]["skipped"] == ["b"]
    assert judged(h.events, policies=["txn"])["valid"] is True


def test_int_nonmonotonic_send():
    h = H().sends(0, [("x", "c", 1), ("x", "a", 0)]).poll(1, {"x": [[0, "a"], [1, "c"]]})
    assert types(h) == ["int-nonmonotonic-send"]
    # inferred from polls for an indeterminate op
    h2 = (H().sends(0, [("y", "d", None), ("y", "b", None)], "info").send(1, "y", "c", None, "info")
          .poll(0 + 2, {"y": [[2, "b"], [3, "c"], [4, "d"]]}))
    assert types(h2) == ["int-nonmonotonic-send"]


def _g0() -> H:
    h = H()
    h.ev(0, "invoke", "send", [["send", "x", "a"], ["send", "y", "a"]])
    h.ev(1, "invoke", "send", [["send", "x", "b"], ["send", "y", "b"]])
    h.ev(0, "ok", "send", [["send", "x", [0, "a"]], ["send", "y", [1, "a"]]])
    h.ev(1, "ok", "send", [["send", "x", [1, "b"]], ["send", "y", [0, "b"]]])
    return h.poll(2, {"x": [[0, "a"], [1, "b"]], "y": [[0, "b"], [1, "a"]]})


def test_g0_with_ww_deps():
    assert types(_g0()) == []
    r = check(_g0().events, ww_deps=True)
    assert r["anomaly_types"] == ["G0"]
    ex = r["anomalies"]["G0"][0]
    assert sorted(ex["ops"]) == [2, 3] and {s["type"] for s in ex["steps"]} == {"ww"}
    assert "write cycle" in ex["explanation"]


def test_g1c_pure_wr():
    h = H()
    h.ev(0, "invoke", "txn", [["send", "x", "a"], ["poll"]])
    h.ev(1, "invoke", "txn", [["send", "y", "b"], ["poll"]])
    h.ev(0, "ok", "txn", [["send", "x", [0, "a"]], ["poll", {"y": [[0, "b"]]}]])
    h.ev(1, "ok", "txn", [["send", "y", [0, "b"]], ["poll", {"x": [[0, "a"]]}]])
    r = check(h.events)
    assert r["anomaly_types"] == ["G1c"]
    ex = r["anomalies"]["G1c"][0]
    assert sorted(ex["ops"]) == [2, 3] and {s["type"] for s in ex["steps"]} == {"wr"}


def test_g1c_ww_wr_needs_ww_deps():
    h = H()
    h.ev(0, "invoke", "txn", [["send", "x", "a"], ["send", "y", "c"]])
    h.ev(1, "invoke", "txn", [["poll"], ["send", "y", "b"]])
    h.ev(0, "ok", "txn", [["send", "x", [0, "a"]], ["send", "y", [2, "c"]]])
    h.ev(1, "ok", "txn", [["poll", {"x": [[0, "a"]]}], ["send", "y", [1, "b"]]])
    h.poll(2, {"y": [[1, "b"], [2, "c"]]})
    assert types(h) == []
    r = check(h.events, ww_deps=True)
    assert r["anomaly_types"] == ["G1c"]
    assert {s["type"] for s in r["anomalies"]["G1c"][0]["steps"]} == {"ww", "wr"}
    assert judged(h.events, ww_deps=True, policies=["txn-ww-deps"])["valid"] is True


# ------------------------------------------------------------------- Jepsen's other cases

def test_empty_polls_and_polls_without_result():
    h = (H().assign(1, ["x"]).poll(1, {}).poll(1, {"x": []}).poll(1, None)
         .send(0, "x", 1, 0).poll(1, {"x": [[0, 1]]}).poll(1, {"x": []}))
    assert check(h.events)["valid"] is True


def test_assign_only_history_is_unknown():
    r = check(H().assign(0, ["x"]).events)
    assert r["valid"] == "unknown" and r["anomaly_types"] == [] and "reason" in r


def test_crashed_clients():
    h = (H().send(0, "x", 1, 0).assign(0, ["x"]).poll(0, {"x": [[0, 1]]}).crash(0)
         .send(1, "x", 2, None, "info").send(2, "x", 3, 2).assign(2, ["x"])
         .poll(2, {"x": [[0, 1], [1, 2], [2, 3]]}))
    h.ev(3, "invoke", "poll", [["poll"]])  # never completes: indeterminate
    r = check(h.events)
    assert r["valid"] is True, r["anomaly_types"]
    assert r["stats"]["by_f"]["crash"]["info"] == 1


def test_negative_send_offset_means_unknown():
    h = H().op(0, "send", [["send", "x", 1]], "ok", [["send", "x", [-1, 1]]]).poll(1, {"x": [[0, 1]]})
    assert check(h.events)["valid"] is True


def test_info_send_that_later_appears_is_not_unseen_or_lost():
    h = (H().send(0, "x", 1, None, "info").send(1, "x", 2, 1).poll(2, {"x": [[0, 1], [1, 2]]}))
    assert check(h.events)["valid"] is True
    # and an info send never read is neither lost nor unseen
    h2 = H().send(0, "x", 1, None, "info").send(1, "x", 2, 1).poll(2, {"x": [[1, 2]]})
    assert check(h2.events)["valid"] is True


def _txn_abort(third_type: str, fourth: bool) -> H:
    h = H().sends(0, [("x", i, i) for i in range(6)])
    h.txn(1, [["poll"]], [["poll", {"x": [[0, 0]]}]])
    h.txn(1, [["poll"]], [["poll", {"x": [[1, 1], [2, 2]]}]], "fail")
    h.txn(1, [["poll"]], [["poll", {"x": [[3, 3], [4, 4]]}]], third_type)
    if fourth:
        h.txn(1, [["poll"]], [["poll", {"x": [[5, 5]]}]])
    return h


def test_aborted_polls_must_rewind():
    # Jepsen "abort doesn't roll back": both later polls skip what the failed one saw
    r = check(_txn_abort("fail", True).events)
    ps = r["anomalies"]["poll-skip"]
    assert [(e["ops"], e["delta"]) for e in ps] == [([3, 7], 3), ([3, 9], 5)]
    # Jepsen "info can be a poll-skip"
    r = check(_txn_abort("info", False).events)
    assert [e["ops"] for e in r["anomalies"]["poll-skip"]] == [[3, 7]]


def test_good_txn_rewinds_are_valid():
    h = H().sends(0, [("x", i, i) for i in range(3)])
    h.txn(1, [["poll"]], [["poll", {"x": [[0, 0]]}]])
    h.txn(1, [["poll"]], [["poll", {"x": [[1, 1], [2, 2]]}]], "fail")
    h.txn(1, [["poll"]], [["poll", {"x": [[1, 1], [2, 2]]}]], "info")
    h.txn(2, [["poll"]], [["poll", {"x": [[1, 1], [2, 2]]}]])
    assert check(h.events)["valid"] is True


def test_realtime_lag_and_stats():
    h = H().send(0, "x", 1, 0).poll(1, {}).poll(1, {"x": [[0, 1]]})
    h.nemesis("start-partition", "halves").poll(1, {}).nemesis("stop-partition")
    r = check(h.events)
    assert r["worst_realtime_lag"]["lag"] == 5000 - 1000  # ack at t=1000, first read returned at t=5000
    lag = r["stats"]["realtime_lag"]["by_key"]["x"]
    assert lag["read"] == 1 and lag["max_ns"] == 4000
    w = r["stats"]["fault_windows"]
    assert [(x["kind"], x["ops"], x["ok"]) for x in w] == [("partition", 1, 1)]


def test_policy_resolution():
    assert resolve_allowed(["lost-write", "policy:subscribe"]) == {"lost-write", "poll-skip", "nonmonotonic-poll"}
    assert set().union(*POLICIES.values()) <= set(ANOMALY_TYPES)
    with pytest.raises(ValueError):
        resolve_allowed(["no-such-type"])
    with pytest.raises(ValueError):
        resolve_allowed([], ["no-such-policy"])
    h = H().send(0, "x", "a", 0).send(0, "x", "b", 1).poll(1, {"x": [[1, "b"]]})
    r = judged(h.events, ["lost-write"])
    assert r["valid"] is True and r["anomaly_types"] == ["lost-write"] and r["allowed"] == ["lost-write"]
    r = judged(h.events, policies=["acks1"])
    assert r["valid"] is True and r["policy"]["name"] == "acks1" and "lost-write" in r["allowed"]


@pytest.mark.parametrize("ev, msg", [
    ({"process": 0, "type": "ok", "f": "poll", "value": [["poll", {"x": [[-1, 1]]}]]}, "bad offset"),
    ({"process": 0, "type": "ok", "f": "poll", "value": [["poll", {"x": [["a", 1]]}]]}, "bad offset"),
    ({"process": 0, "type": "ok", "f": "poll", "value": [["poll", [1, 2]]]}, "bad poll result"),
    ({"process": 0, "type": "ok", "f": "poll", "value": [["poll", {"x": [[0]]}]]}, "bad record"),
    ({"process": 0, "type": "ok", "f": "poll", "value": [["send", "x", 1]]}, "not 'poll'"),
    ({"process": 0, "type": "ok", "f": "send", "value": [["send", 3, [0, 1]]]}, "bad key"),
    ({"process": 0, "type": "ok", "f": "send", "value": [["send", "x", [0, 1, 2]]]}, "bad send result"),
    ({"process": 0, "type": "ok", "f": "send", "value": "x"}, "list of micro-ops"),
    ({"process": 0, "type": "done", "f": "send", "value": None}, "bad type"),
])
def test_bad_events_are_input_errors(ev, msg):
    inv = {"process": 0, "type": "invoke", "f": ev["f"], "value": None}
    with pytest.raises(InputError) as e:
        check([inv, ev])
    assert msg in e.value.message and e.value.line == 2


def test_protocol_errors():
    with pytest.raises(InputError, match="without an invoke"):
        check([{"process": 0, "type": "ok", "f": "send", "value": None}])
    with pytest.raises(InputError, match="still open"):
        check([{"process": 0, "type": "invoke", "f": "poll"}, {"process": 0, "type": "invoke", "f": "poll"}])
    with pytest.raises(InputError, match="sent twice"):
        check(H().send(0, "x", 1, 0).send(1, "x", 1, 1).events)
