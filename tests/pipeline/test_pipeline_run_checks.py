"""The check of one run as its Spark task does it (pipeline.run_checks), without Spark.

A run folder is ingested into its ops file (pipeline.ingest.ingest_run) and checked by
`check_run`; its anomaly counts, every example, the verdict and the statistics must equal
the single-process queue checker's on the history file. Random synthetic runs with
planted anomalies (hypothesis), and the hand-made edge cases. The same comparison
through a real Spark session is tests/pipeline/test_pipeline_spark.py's.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from queue_cases import MANY, canon, edge_history, judged, queue_cfg

import checkers.queue as cq
from checkers.policy import Pick, Policy
from contracts.history import write_history
from pipeline import results, synth
from pipeline.ingest import ingest_run
from pipeline.run_checks import check_run, collect

FAST = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
ALLOWED = ["unseen"]


def _pipeline_result(run: Path, ops: Path) -> dict[str, Any]:
    got = ingest_run("r", str(run), str(ops))
    res = check_run(str(ops), True, got["faults"], MANY)
    policy = Policy([Pick("test", "allowed by the test", ALLOWED)])
    strings = {int(k): v for k, v in res["strings"].items()}
    return results.queue_result(res["examples"], res["counts"], policy, saw_queue_ops=True, stats=res["stats"],
                                strings=strings)


def _assert_agree(run: Path, ops: Path) -> dict[str, Any]:
    mine = _pipeline_result(run, ops)
    ref = judged(cq.check_file(run / "history.jsonl", max_examples=MANY), ALLOWED)
    assert mine["anomaly_counts"] == ref["anomaly_counts"]
    assert mine["valid"] == ref["valid"] and mine["anomaly_types"] == ref["anomaly_types"]
    for t in ref["anomaly_types"]:
        assert canon(mine["anomalies"][t]) == canon(ref["anomalies"][t]), t
    for k in ("by_f", "availability", "outside_faults", "fault_windows", "ops"):
        assert mine["stats"][k] == ref["stats"][k], k
    return mine


@FAST
@given(seed=st.integers(0, 100_000))
def test_a_run_checked_in_its_task_agrees_with_the_queue_checker(tmp_path_factory, seed):
    tmp = tmp_path_factory.mktemp("run")
    run = synth.write_run(tmp / "results", queue_cfg(seed, random.Random(seed)))
    mine = _assert_agree(run.path, tmp / "ops.parquet")
    for kind in run.planted:
        assert kind in mine["anomaly_types"], kind


def test_the_edge_cases_agree_with_the_queue_checker(tmp_path):
    run = tmp_path / "edge" / "20260101T000000.000"
    run.mkdir(parents=True)
    write_history(run / "history.jsonl", edge_history())
    mine = _assert_agree(run, tmp_path / "ops.parquet")
    assert set(mine["anomaly_types"]) >= {"int-send-skip", "int-nonmonotonic-send", "nonmonotonic-send",
                                          "garbage-read", "precommitted-read", "int-poll-skip", "nonmonotonic-poll"}
    assert {"key": "g", "value": "y", "ops": [23]}.items() <= mine["anomalies"]["garbage-read"][1].items()


def test_a_run_without_its_ops_file_has_no_statistics(tmp_path):
    res = check_run(str(tmp_path / "missing.parquet"), True, [], 32)
    assert res["stats"] is None and res["anomalies"] == [] and res["counts"] == {}


def test_examples_are_the_first_by_op_and_unseen_sends_are_grouped_per_key():
    rows = [{"type": "duplicate", "key": "k", "value": v, "op_index": op, "time": 1, "detail": f'{{"v":{v}}}'}
            for op, v in ((9, 1), (3, 2), (5, 3))]
    rows += [{"type": "unseen", "key": k, "value": v, "op_index": op, "time": 1,
              "detail": '{"_max_read_offset":7}' if k == "a" else "{}"}
             for k, op, v in (("b", 4, 40), ("a", 8, 80), ("a", 2, 20))]
    counts, examples = collect(rows, 2)
    assert counts == {"duplicate": 3, "unseen": 3}
    assert examples["duplicate"] == [{"v": 2}, {"v": 3}]
    assert examples["unseen"] == [
        {"ops": [2, 8], "key": "a", "count": 2, "values": [20, 80], "_max_read_offset": 7},
        {"ops": [4], "key": "b", "count": 1, "values": [40], "_max_read_offset": None}]
