"""checkers.compose: merge_valid as Jepsen's (False > "unknown" > True), and compose running named
checkers, keeping each result under its name and merging verdicts and anomalies; a checker
that raises is an unknown part, never a crash. Also: every workload offers the same checker
interface (`analyze`, `check`, `summary`)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import suites
from checkers.compose import MERGED_KEYS, check_safe, compose, merge_results, merge_valid
from contracts.errors import InputError
from workloads.base import WorkloadAnalysis

VERDICTS = st.sampled_from([True, False, "unknown"])
KINDS = st.sampled_from(["lost-write", "duplicate", "unseen", "no-recovery", "G0"])


class Fixed:
    """A checker answering `result` (or raising `error`)."""

    def __init__(self, result=None, error: Exception | None = None):
        self.result, self.error, self.runs = result, error, []

    def check(self, run):
        self.runs.append(run)
        if self.error is not None:
            raise self.error
        return self.result


def result_of(valid, kinds=(), checked=None) -> dict:
    kinds = list(dict.fromkeys(kinds))
    out = {"valid": valid, "anomaly_types": kinds, "anomalies": {k: [{"k": k}] for k in kinds},
           "anomaly_counts": {k: 1 for k in kinds}}
    if checked is not None:
        out["checked"] = checked
    return out


RESULTS = st.builds(result_of, VERDICTS, st.lists(KINDS, max_size=3), st.sampled_from([None, True, False]))


@given(VERDICTS, VERDICTS)
def test_merge_valid_is_commutative(a, b):
    assert merge_valid([a, b]) == merge_valid([b, a])


@given(VERDICTS, VERDICTS, VERDICTS)
def test_merge_valid_is_associative(a, b, c):
    assert merge_valid([merge_valid([a, b]), c]) == merge_valid([a, merge_valid([b, c])]) == merge_valid([a, b, c])


@given(st.lists(VERDICTS))
def test_false_beats_unknown_beats_true(values):
    got = merge_valid(values)
    if False in values:
        assert got is False
    elif "unknown" in values:
        assert got == "unknown"
    else:
        assert got is True  # also for no values at all, as Jepsen's reduce from true


@given(st.lists(VERDICTS))
def test_true_is_the_identity_and_merging_is_idempotent(values):
    assert merge_valid([True, *values]) == merge_valid(values) == merge_valid(values + values)


@pytest.mark.parametrize("bad", [1, 0, None, "true", "invalid"])
def test_a_value_that_is_no_verdict_is_refused(bad):
    with pytest.raises(ValueError, match="not a verdict"):
        merge_valid([True, bad])


@given(st.dictionaries(st.sampled_from(["a", "b", "c", "d"]), RESULTS, max_size=4))
def test_compose_keeps_each_result_and_merges_them(results):
    run = object()
    checkers = {name: Fixed(r) for name, r in results.items()}
    out = compose(checkers).check(run)
    assert all(c.runs == [run] for c in checkers.values())
    assert {name: out[name] for name in results} == results
    assert out["valid"] == merge_valid(r["valid"] for r in results.values() if r.get("checked") is not False)
    assert set(out["anomaly_types"]) == {t for r in results.values() for t in r["anomaly_types"]}
    assert len(out["anomaly_types"]) == len(set(out["anomaly_types"]))
    for kind, n in out.get("anomaly_counts", {}).items():
        assert n == len(out["anomalies"][kind]) == sum(kind in r["anomaly_types"] for r in results.values())


@given(RESULTS, RESULTS)
def test_merged_anomaly_types_follow_the_parts_order(a, b):
    types = merge_results({"a": a, "b": b})["anomaly_types"]
    assert types[:len(a["anomaly_types"])] == a["anomaly_types"]


@given(st.dictionaries(st.sampled_from(["a", "b", "c"]), RESULTS, max_size=3), st.sampled_from([True, False]))
def test_a_raising_checker_is_an_unknown_part_never_a_crash(results, input_first):
    checkers = {name: Fixed(r) for name, r in results.items()}
    boom = {"boom": Fixed(error=RuntimeError("disk on fire"))}
    out = compose({**boom, **checkers} if input_first else {**checkers, **boom}).check(None)
    part = out["boom"]
    assert part["valid"] == "unknown" and part["anomaly_types"] == [] and part["anomalies"] == {}
    assert part["error"] == "checker boom crashed: RuntimeError: disk on fire" and "disk on fire" in part["traceback"]
    assert out["valid"] in (False, "unknown")
    assert {name: out[name] for name in results} == results  # the others still ran


def test_a_part_that_did_not_judge_does_not_vote():
    out = compose({"queue": Fixed(result_of(True)),
                   "liveness": Fixed({"valid": "unknown", "checked": False, "reason": "no final heal"})}).check(None)
    assert out["valid"] is True and out["liveness"]["reason"] == "no final heal"


@pytest.mark.parametrize("answer", [None, {"valid": "maybe"}, {"anomalies": {}}, [True]])
def test_a_checker_answering_no_verdict_is_unknown(answer):
    part = check_safe("odd", Fixed(answer), None)
    assert part["valid"] == "unknown" and part["error"].startswith("checker odd answered no verdict")


def test_bad_input_is_not_a_verdict():
    with pytest.raises(InputError):
        compose({"a": Fixed(result_of(True)), "b": Fixed(error=InputError("torn", "history.jsonl"))}).check(None)


@pytest.mark.parametrize("name", MERGED_KEYS)
def test_a_part_may_not_take_a_merged_key_as_its_name(name):
    with pytest.raises(ValueError, match="may not be named"):
        compose({name: Fixed(result_of(True))})


def test_counts_are_merged_only_when_a_part_gives_them():
    no_counts = {"valid": False, "anomaly_types": ["x"], "anomalies": {"x": [1]}}
    assert "anomaly_counts" not in merge_results({"a": no_counts})
    both = merge_results({"a": no_counts, "b": {"valid": True, "anomalies": {"x": [2]}, "anomaly_counts": {"x": 1}}})
    assert both["anomalies"] == {"x": [1, 2]} and both["anomaly_counts"] == {"x": 1} and both["valid"] is False


@pytest.mark.parametrize("system, name", [(s, w) for s in suites.names() for w in suites.get(s).workloads])
def test_every_workload_offers_the_same_checker_interface(system, name, tmp_path: Path):
    wl = suites.get(system).make_workload(name, {})
    assert isinstance(wl.summary(), dict) and isinstance(wl.checks_recovery, bool)
    hist = tmp_path / "history.jsonl"
    hist.write_text("")
    checked = wl.analyze(hist, 5.0)
    assert isinstance(checked, WorkloadAnalysis) and checked.result["valid"] in (True, False, "unknown")
    assert wl.check(hist, 5.0) == checked.result
