"""A run that stopped before its read-back ended (killed, interrupted, crashed) may leave
acknowledged records unpolled: the verdict allows `unseen` there (final-read-deadline) and
nowhere else, so an interrupted run is not reported as a lost write (its verdict is unknown)."""

from __future__ import annotations

from pathlib import Path

import pytest

from contracts import store
from contracts.history import clock_anchor, write_history
from harness.analysis import analyze_run, stopped_early

TP = "queue0-0"
MS = 1_000_000


def unpolled_send_run(root: Path, **test: object) -> Path:
    """acks=all, no faults: one send acknowledged at offset 0 and never polled."""
    run = store.new_run(root, "queue-acksall")
    store.write_json(run / "test.json", {
        "name": "queue-acksall", "start": "2026-01-01T00:00:00+00:00", "end": "2026-01-01T00:01:00+00:00",
        "options": {"workload": "queue", "acks": "all", "nodes": 3, "rf": 3, "min_isr": 2, "topics": 1,
                    "partitions": 1, "nemesis": [], "safeguards_off": [], "flush_policy": "none"},
        "history_start": clock_anchor(5_000_000_000), **test})
    evs = [{"process": 0, "type": "invoke", "f": "assign", "value": [TP]},
           {"process": 0, "type": "ok", "f": "assign", "value": [TP]},
           {"process": 1, "type": "invoke", "f": "send", "value": [["send", TP, 7]]},
           {"process": 1, "type": "ok", "f": "send", "value": [["send", TP, [0, 7]]]}]
    write_history(run / "history.jsonl", [{**e, "time": (i + 1) * 100 * MS} for i, e in enumerate(evs)])
    return run


@pytest.mark.parametrize(("test", "early"), [
    ({}, True),
    ({"end": None}, True),
    ({"end": "t", "error": "interrupted", "timings": {"setup": 1.0, "teardown": 2.0}}, True),
    ({"end": "t", "error": "interrupted", "timings": {"setup": 1.0, "workload": 9.0, "final": 3.0}}, False),
    ({"end": "t", "error": None, "timings": {"setup": 1.0}}, False),
    ({"end": "t", "error": "boom", "timings": {"heal": 1.0}}, False),
])
def test_stopped_early_is_no_end_or_an_error_before_the_last_phase(test, early):
    assert stopped_early(test) is early


def test_an_interrupted_run_allows_unseen_and_a_finished_one_does_not(tmp_path):
    cut = analyze_run(unpolled_send_run(tmp_path / "cut", error="interrupted", timings={"setup": 1.0}))
    assert cut["valid"] == "unknown" and cut["incomplete_run"] is True and cut["bad_anomaly_types"] == []
    assert "final-read-deadline" in cut["policy"]["name"] and cut["anomaly_types"] == ["unseen"]
    done = analyze_run(unpolled_send_run(tmp_path / "done", error=None, timings={"setup": 1.0, "final": 2.0}))
    assert done["valid"] is False and done["bad_anomaly_types"] == ["unseen"]
