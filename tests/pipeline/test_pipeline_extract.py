"""History -> `ops` rows, damaged histories, `runs` rows, run discovery (no Spark)."""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pytest

from contracts.errors import InputError
from contracts.history import write_history
from pipeline.extract import HistoryStats, read_history, result_anomaly_rows, runs_row, string_value_id
from pipeline.runfolders import find_runs
from pipeline.schemas import ARROW, OPS

EVENTS = [
    {"process": 0, "type": "invoke", "f": "assign", "value": ["a", "b"]},
    {"process": 0, "type": "ok", "f": "assign", "value": ["a", "b"]},
    {"process": 1, "type": "invoke", "f": "send", "value": [["send", "a", 1]]},
    {"process": 1, "type": "ok", "f": "send", "value": [["send", "a", [0, 1]]]},
    {"process": "nemesis", "type": "info", "f": "start-partition", "value": {"grudge": "x"}},
    {"process": 0, "type": "invoke", "f": "poll", "value": [["poll"]]},
    {"process": 0, "type": "ok", "f": "poll", "value": [["poll", {"a": [[0, 1], [1, 7]], "b": [[4, "s"]]}]],
     "rebalance-log": [{"keys": ["b"]}]},
    {"process": 1, "type": "invoke", "f": "send", "value": [["send", "b", 2]]},
    {"process": 1, "type": "info", "f": "send", "value": [["send", "b", 2]], "error": {"code": 7}},
    {"process": "nemesis", "type": "info", "f": "stop-partition", "value": None},
    {"process": 2, "type": "invoke", "f": "read", "value": ["a", 0]},
    {"process": 2, "type": "ok", "f": "read", "value": ["a", [0, 1]]},
    {"process": 3, "type": "invoke", "f": "crash", "value": None},
    {"process": 4, "type": "invoke", "f": "send", "value": [["send", "a", 9]]},  # never completes
]


def _rows(path: str, **kw) -> tuple[list[dict], HistoryStats]:
    st = HistoryStats()
    batches = list(read_history(path, "t/1", st, **kw))
    rows = pa.Table.from_batches(batches, schema=OPS).to_pylist() if batches else []
    return rows, st


def test_ops_rows_of_every_kind_of_op(tmp_path):
    p = tmp_path / "h.jsonl"
    write_history(p, [dict(e) for e in EVENTS])
    rows, st = _rows(str(p))
    assert st.events == len(EVENTS) and st.nemesis_events == 2 and st.damage is None
    assert st.ops == 7  # assign, send, poll, info send, read, crash (never completed), send (never completed)
    by = {}
    for r in rows:
        by.setdefault((r["f"], r["index"]), []).append(r)
    assign = by[("assign", 0)]
    assert [(r["mop"], r["key"], r["mop_index"]) for r in assign] == [("assign", "a", 0), ("assign", "b", 1)]
    (send,) = by[("send", 2)]
    assert (send["mop"], send["key"], send["offset"], send["value"], send["ret_index"]) == ("send", "a", 0, 1, 3)
    poll = by[("poll", 5)]
    assert [(r["key"], r["offset"], r["value"], r["rebalanced"]) for r in poll] == [
        ("a", 0, 1, None), ("a", 1, 7, None), ("b", 4, string_value_id("s"), True)]
    assert poll[2]["value_str"] == "s"
    (info,) = by[("send", 7)]
    assert (info["type"], info["offset"], info["value"], info["error"]) == ("info", None, 2, '{"code": 7}')
    (read,) = by[("read", 10)]
    assert (read["mop"], read["key"], read["offset"], read["value"]) == (None, "a", 0, 1)
    assert json.loads(read["raw"]) == {"invoke": ["a", 0], "value": ["a", [0, 1]]}
    (crash,) = by[("crash", 12)]
    assert (crash["type"], crash["ret_index"], crash["ret_time"]) == ("info", None, None)
    (never,) = by[("send", 13)]
    assert (never["type"], never["value"], never["ret_index"]) == ("info", 9, None)
    assert [(f["kind"], f["start"], f["stop"]) for f in st.faults] == [("partition", 4, 9)]
    assert string_value_id("s") < 0  # strings never collide with the (non-negative) integer values


def test_small_batches_split_rows_without_loss(tmp_path):
    p = tmp_path / "h.jsonl"
    write_history(p, [dict(e) for e in EVENTS])
    whole, _ = _rows(str(p))
    split, _ = _rows(str(p), batch_rows=2)
    assert sorted(map(str, whole)) == sorted(map(str, split))


@pytest.mark.parametrize("bad,reason", [
    (b"not json at all\n", "malformed JSON"),
    (b'{"process": 1, "type": "ok", "f": "poll", "value": null}\n', "without an invoke"),
    (b'{"process": 0, "type": "weird", "f": "poll"}\n', "bad type"),
    (b'[1, 2]\n', "not a JSON object"),
])
def test_a_damaged_history_is_ingested_up_to_its_last_good_line(tmp_path, bad, reason):
    p = tmp_path / "h.jsonl"
    write_history(p, [dict(e) for e in EVENTS[:4]])
    good = p.read_bytes()
    tail = b"".join(json.dumps(e).encode() + b"\n" for e in EVENTS[5:8])
    p.write_bytes(good + bad + tail)
    rows, st = _rows(str(p))
    assert st.damage is not None and "history.jsonl:5:" in st.damage and reason in st.damage
    assert "damaged line" in st.damage and "ingested up to line 4" in st.damage
    assert st.dropped_lines == 4 and st.events == 4
    assert {(r["f"], r["type"]) for r in rows} == {("assign", "ok"), ("send", "ok")}


def test_a_torn_last_line_is_damage_too(tmp_path):
    p = tmp_path / "h.jsonl"
    write_history(p, [dict(e) for e in EVENTS[:6]])
    p.write_bytes(p.read_bytes() + b'{"process": 0, "type": "ok", "f": "po')
    rows, st = _rows(str(p))
    assert "torn last line" in st.damage and st.dropped_lines == 1
    # the poll whose completion was torn off counts as indeterminate
    assert [r["type"] for r in rows if r["f"] == "poll"] == ["info"]


def test_runs_row_types_every_option_and_flags_bad_files():
    st = HistoryStats(ops=3, events=6, first_time=0, last_time=2_000_000_000)
    test = {"name": "t", "run_id": "t/1", "start": "2026-01-01T00:00:00+00:00", "end": "2026-01-01T00:01:00+00:00",
            "seed": 7, "options": {"nemesis": "partition,kill", "nodes": ["n1", "n2", "n3"], "acks": 1,
                                   "min_isr": "2", "safeguards_off": ["elr"], "time_limit": 60, "extra": [1]},
            "versions": {"wrack": "0.1"}, "git": {"rev": "abc", "dirty": True},
            "campaign": {"name": "c", "cell": {"acks": "1"}, "repeat": 2}}
    results = {"valid": False, "anomaly_types": ["lost-write"], "anomaly_counts": {"lost-write": 2},
               "allowed": ["unseen"]}
    row = runs_row("t/1", "/x", test, results, st)
    assert row["nemesis"] == ["partition", "kill"] and row["nodes"] == 3 and row["acks"] == "1"
    assert row["min_isr"] == 2 and row["time_limit"] == 60.0 and row["duration_s"] == 60.0
    assert row["history_span_s"] == 2.0 and row["valid"] == "false" and row["anomaly_counts"] == {"lost-write": 2}
    assert json.loads(row["options_json"])["extra"] == [1]
    assert row["config"] == "nemesis=kill+partition acks=1 min_isr=2 flush=None safeguards=off:elr"
    assert row["campaign"] == "c" and row["campaign_repeat"] == 2 and not row["damaged"]
    pa.Table.from_pylist([row], schema=ARROW["runs"])  # fits the explicit schema
    bad = runs_row("t/1", "/x", {"_error": "test.json: malformed JSON (x)"}, None, st)
    assert bad["damaged"] and "test.json" in bad["damage"] and bad["name"] == "t"


def test_result_examples_become_anomaly_rows():
    res = {"allowed": ["unseen"], "anomalies": {
        "lost-write": [{"ops": [5, 9], "key": "a", "value": 3, "explanation": "..."}],
        "unseen": [{"ops": [7], "key": "b", "count": 1, "values": [4]}]}}
    rows = result_anomaly_rows("t/1", res, op_time={5: 50, 7: 70, 9: 90}.get)
    # timed when the history witnessed it: the last op it names (the lost write's read, op 9)
    assert [(r["type"], r["key"], r["value"], r["op_index"], r["time"], r["allowed"]) for r in rows] == [
        ("lost-write", "a", 3, 5, 90, False), ("unseen", "b", None, 7, 70, True)]
    assert result_anomaly_rows("t/1", res, op_time={5: 50, 7: 70}.get)[0]["time"] == 50  # op 9 untimed


def test_find_runs_skips_latest_links_and_counts_linked_runs_once(tmp_path):
    root = tmp_path / "results" / "t"
    for ts in ("20260101T000000.000", "20260101T000001.000"):
        (root / ts).mkdir(parents=True)
        (root / ts / "history.jsonl").write_text("")
    os.symlink("20260101T000001.000", root / "latest")
    camp = tmp_path / "campaign" / "runs" / "t"
    camp.mkdir(parents=True)
    os.symlink(root / "20260101T000000.000", camp / "20260101T000000.000")
    runs = find_runs([str(tmp_path / "results"), str(tmp_path / "campaign")])
    assert [r.run_id for r in runs] == ["t/20260101T000000.000", "t/20260101T000001.000"]
    with pytest.raises(InputError, match="no such file"):
        find_runs([str(tmp_path / "nope")])
    with pytest.raises(InputError, match="not a directory"):
        find_runs([str(root / "20260101T000000.000" / "history.jsonl")])
