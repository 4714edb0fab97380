"""The synthetic run generator (pipeline.synth) that the pipeline's tests and bench share.

Checked with the single-process checkers: correct runs are valid, a planted anomaly is
always found as its type, run folders follow RUN_LAYOUT.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import checkers.queue as cq
from checkers.linearizable import check_events
from contracts.history import read_events
from pipeline import synth

FAST = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@FAST
@given(seed=st.integers(0, 10_000), keys=st.integers(1, 6), concurrency=st.integers(1, 12),
       crash=st.sampled_from([0.0, 0.01, 0.05]), assign=st.sampled_from([0.01, 0.05, 0.2]),
       nemesis=st.sampled_from([(), ("partition",), ("kill", "pause")]))
def test_correct_queue_runs_are_valid(tmp_path_factory, seed, keys, concurrency, crash, assign, nemesis):
    cfg = synth.SynthConfig(ops=800, keys=keys, concurrency=concurrency, seed=seed, p_crash=crash,
                            p_assign=assign, nemesis=nemesis, nemesis_interval_s=0.05)
    run = synth.write_run(tmp_path_factory.mktemp("r"), cfg)
    res = cq.check_file(run.path / "history.jsonl")
    assert res["valid"] is True, res["anomaly_counts"]
    assert res["anomaly_types"] == []
    assert run.planted == {}


@FAST
@given(seed=st.integers(0, 10_000), kind=st.sampled_from(synth.PLANTABLE))
def test_a_planted_anomaly_is_found_as_its_type(tmp_path_factory, seed, kind):
    cfg = synth.SynthConfig(ops=2500, seed=seed, plant={kind: 1})
    run = synth.write_run(tmp_path_factory.mktemp("r"), cfg)
    assert list(run.planted) == [kind]
    res = cq.check_file(run.path / "history.jsonl")
    assert kind in res["anomaly_types"]
    assert res["valid"] is False


@pytest.mark.parametrize("plant", [{}, {"nonlinearizable": 1}])
def test_log_workload_runs(tmp_path, plant):
    run = synth.write_run(tmp_path, synth.SynthConfig(ops=1500, keys=3, workload="log", plant=plant))
    res = check_events(read_events(run.path / "history.jsonl"), "log")
    assert res["valid"] is (not plant)
    assert run.planted.keys() == plant.keys()


def test_run_folder_layout_and_damage(tmp_path):
    run = synth.write_run(tmp_path / "results", synth.SynthConfig(ops=300, options={"acks": "1"}), name="t",
                          stamp=5, torn_tail=True)
    assert run.run_id == "t/20260101T000005.000"
    test = json.loads((run.path / "test.json").read_text())
    assert test["run_id"] == run.run_id and test["options"]["acks"] == "1"
    for k in ("name", "start", "end", "seed", "options", "versions", "git"):
        assert k in test
    assert not (run.path / "history.jsonl").read_bytes().endswith(b"\n")  # torn
    bad = synth.write_run(tmp_path / "results", synth.SynthConfig(ops=300), name="g", garbage_at=0.5)
    assert b"this is not json" in (bad.path / "history.jsonl").read_bytes()


def test_campaign_cycles_through_the_matrix(tmp_path):
    runs = synth.write_campaign(tmp_path, runs=5, total_ops=1000, plant_unsafe=1.0, seed=1,
                                matrix={"acks": ["all", "1"], "min_isr": [2]})
    assert sum(r.ops for r in runs) >= 1000
    cells = [json.loads((r.path / "test.json").read_text())["campaign"] for r in runs]
    assert [c["cell"]["acks"] for c in cells] == ["all", "1", "all", "1", "all"]
    assert [c["repeat"] for c in cells] == [0, 0, 1, 1, 2]
    # only the unsafe cell (acks=1) got a planted lost write
    assert [bool(r.planted) for r in runs] == [False, True, False, True, False]


def test_unknown_plant_type_is_refused_before_anything_is_written(tmp_path):
    with pytest.raises(ValueError, match="cannot plant"):
        synth.write_run(tmp_path / "results", synth.SynthConfig(plant={"G0": 1}))
    assert not (tmp_path / "results").exists()
