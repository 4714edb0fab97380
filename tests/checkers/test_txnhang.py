"""Hanging transactions (checkers/txnhang.py) through the liveness check: a partition whose
last stable offset stayed below its high watermark after the final phase (the observer's
last `txn-state` event) is a `hanging-txn`; LSOs that met, or no such event, are none."""

from __future__ import annotations

from checkers import liveness
from checkers.txnhang import hanging

S = 1_000_000_000


def history(*states: dict) -> list[dict]:
    evs = [{"process": "nemesis", "type": "info", "f": "final-heal", "value": {"healed": True}, "time": 2 * S}]
    for k in ("q-0", "q-1"):
        evs += [{"process": 1, "type": "invoke", "f": "send", "value": [["send", k, 1]], "time": 3 * S},
                {"process": 1, "type": "ok", "f": "send", "value": [["send", k, [0, 1]]], "time": 3 * S + 1},
                {"process": 1, "type": "invoke", "f": "poll", "value": [["poll"]], "time": 4 * S},
                {"process": 1, "type": "ok", "f": "poll", "value": [["poll", {k: [[0, 1]]}]], "time": 4 * S + 1}]
    evs += [{"process": 2, "type": "invoke", "f": "txn", "value": [["poll"]], "time": 5 * S},
            {"process": 2, "type": "ok", "f": "txn", "value": [["poll", {}]], "time": 5 * S + 1}]
    for i, st in enumerate(states):
        evs.append({"process": "nemesis", "type": "info", "f": "txn-state", "value": st, "time": (10 + i) * S})
    return evs


def test_a_partition_whose_lso_never_reached_its_hwm_holds_a_hanging_transaction():
    stuck = {"partitions": {"q-0": {"lso": 40, "hwm": 57}, "q-1": {"lso": 9, "hwm": 9}}, "open": ["q-0"],
             "waited_s": 30.0}
    r = liveness.check(history(stuck), keys=["q-0", "q-1"], bound_s=30)
    assert r["valid"] is False and r["anomaly_types"] == ["hanging-txn"]
    assert r["anomalies"]["hanging-txn"] == [{"key": "q-0", "lso": 40, "hwm": 57, "waited_s": 30.0, "time": 10 * S}]
    assert r["anomaly_counts"] == {"hanging-txn": 1}


def test_runs_without_transactions_are_not_judged():
    stuck = {"partitions": {"q-0": {"lso": 40, "hwm": 57}}, "open": ["q-0"], "waited_s": 30.0}
    evs = [e for e in history(stuck) if e.get("f") != "txn"]
    assert liveness.check(evs, keys=["q-0", "q-1"], bound_s=30)["valid"] is True


def test_settled_transactions_and_runs_without_the_observation_are_fine():
    settled = {"partitions": {"q-0": {"lso": 57, "hwm": 57}}, "open": [], "waited_s": 1.5}
    assert liveness.check(history(settled), keys=["q-0", "q-1"], bound_s=30)["valid"] is True
    assert liveness.check(history(), keys=["q-0", "q-1"], bound_s=30)["valid"] is True
    # only the last observation counts
    stuck = {"partitions": {"q-0": {"lso": 1, "hwm": 5}}, "open": ["q-0"], "waited_s": 30.0}
    assert hanging(history(stuck, settled)) == [] and len(hanging(history(settled, stuck))) == 1
