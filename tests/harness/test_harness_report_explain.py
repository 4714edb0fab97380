"""The run report explains lost offsets: a stored queue run (history, node logs with event lines,
test.json) is analysed; results.json gets `explanations` and `first_anomaly_time`, and
report.html shows them (headline, one story per offset), also in headless Chromium."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import suites
from broker.server.eventlog import format_event
from contracts import store
from contracts.history import clock_anchor, write_history
from harness.analysis import analyze_run

TP = "queue0-0"
MARKUP = "<b>v</b>"
MS = 1_000_000


def make_queue_run(root: Path) -> Path:
    """acks=1: n1 (broker 0) leads epoch 0 and acknowledges offsets 0..2; it is killed; n2 is
    elected in epoch 1 with its log ending at 1 and acknowledges another value at offset 1;
    n1 restarts and truncates 3 -> 1. One event every 100 ms."""
    run = store.new_run(root, "queue-acks1-kill")
    anchor = clock_anchor(5_000_000_000)
    store.write_json(run / "test.json", {
        "name": "queue-acks1-kill", "start": "2026-01-01T00:00:00+00:00", "end": "2026-01-01T00:01:00+00:00",
        "options": {"workload": "queue", "acks": "1", "nodes": 3, "rf": 3, "min_isr": 2, "topics": 1,
                    "partitions": 1, "nemesis": ["kill-leader"], "safeguards_off": [], "flush_policy": "none"},
        "history_start": anchor})
    evs: list[dict] = []

    def ev(p, typ, f, value):
        evs.append({"process": p, "type": typ, "f": f, "value": value, "time": (len(evs) + 1) * 100 * MS})

    ev(0, "invoke", "assign", [TP]); ev(0, "ok", "assign", [TP])  # noqa: E702
    for off, v in enumerate([1, MARKUP, 3]):
        ev(1, "invoke", "send", [["send", TP, v]]); ev(1, "ok", "send", [["send", TP, [off, v]]])  # noqa: E702
    ev("nemesis", "info", "kill", {"nodes": ["n1"]})                 # 0.9 s
    ev(2, "invoke", "send", [["send", TP, 9]]); ev(2, "ok", "send", [["send", TP, [1, 9]]])  # noqa: E702
    ev("nemesis", "info", "start", {"nodes": ["n1"]})                # 1.2 s
    ev(0, "invoke", "poll", [["poll"]]); ev(0, "ok", "poll", [["poll", {TP: [[0, 1], [1, 9]]}]])  # noqa: E702
    write_history(run / "history.jsonl", evs)
    boot = anchor["boot_id"]

    def line(node: int, at_ms: int, kind: str, **fields) -> str:
        mono = anchor["mono_ns"] + at_ms * MS
        return (f"2026-01-01 00:00:00.000 INFO [node {node}] wrack.broker.events: "
                + format_event(kind, {"node": node, **fields}, mono, anchor["wall"] + at_ms / 1000) + "\n")

    logs = {
        "n1": (0, [line(0, 0, "clock", boot_id=boot),
                   line(0, 10, "became-leader", tp=TP, epoch=0, from_offset=0, hwm=0, isr=[0, 1, 2]),
                   line(0, 1150, "clock", boot_id=boot), line(0, 1160, "replica-opened", tp=TP, leo=3, hwm=1),
                   line(0, 1170, "became-follower", tp=TP, epoch=1, leader=1, leo=3, hwm=1),
                   line(0, 1180, "truncated", tp=TP, epoch=1, role="follower", from_leo=3, to=1,
                        reason="diverging-epoch")]),
        "n2": (1, [line(1, 0, "clock", boot_id=boot),
                   line(1, 10, "became-follower", tp=TP, epoch=0, leader=0, leo=0, hwm=0),
                   line(1, 950, "became-leader", tp=TP, epoch=1, from_offset=1, hwm=1, isr=[1, 2])]),
        "n3": (2, [line(2, 0, "clock", boot_id=boot),
                   line(2, 940, "partition-change", tp=TP, leader=1, epoch=1, prev_leader=0, prev_epoch=0,
                        election="clean", isr=[1, 2], elr=[])]),
    }
    for name, (nid, lines) in logs.items():
        d = run / "nodes" / name
        d.mkdir(parents=True)
        (d / "server.properties").write_text(f"node.id={nid}\n")
        (d / "broker.log").write_text("2026-01-01 00:00:00.000 INFO [node 0] wrack.broker: started\n" + "".join(lines))
    return run


def test_results_and_report_explain_the_lost_offset(tmp_path):
    run = make_queue_run(tmp_path)
    res = analyze_run(run)
    assert {"lost-write", "inconsistent-offsets"} <= set(res["anomaly_types"])
    ex = json.loads((run / "results.json").read_text())["explanations"]
    assert ex["clock"] == "monotonic"
    (x,) = [e for e in ex["explained"] if e["offset"] == 1]
    assert x["value"] == MARKUP and x["ack"]["node"] == "n1" and x["ack"]["epoch"] == 0
    assert x["ack"]["time"] == 0.6 and x["elected_without"]["node"] == "n2"
    assert x["elected_without"]["time"] == 0.94  # the controller's event, on the history clock by mono_ns
    assert x["truncated_by"][0]["node"] == "n1" and x["truncated_by"][0]["time"] == 1.18
    assert [r["name"] for r in x["rules"] if r["matched"]] == ["acks1"]
    assert ex["first_anomaly_time"] == res["first_anomaly_time"] / 1e9
    html = (run / "report.html").read_text()
    assert 'id="first-anomaly"' in html and f"{res['first_anomaly_time'] / 1e9:.2f} s" in html
    sec = html[html.index('<section id="explanations">'):html.index('<section id="policy">')]
    assert "queue0-0 offset 1" in sec and "n1 truncated its log of queue0-0 from 3 to 1 (diverging-epoch)" in sec
    assert "became leader of queue0-0 in epoch 1 (a clean election from the ISR)" in sec
    assert "by the monotonic clock" in sec and "distinct stor" in sec and "<b>v</b>" not in sec and "&lt;b&gt;v&lt;/b&gt;" in sec
    assert html.index('id="anomalies"') < html.index('id="explanations"')


def test_a_valid_run_has_no_explanations_section(tmp_path):
    run = make_queue_run(tmp_path)
    lines = [json.loads(s) for s in (run / "history.jsonl").read_text().splitlines()]
    write_history(run / "history.jsonl", [e for e in lines if e.get("process") not in (1, 2, 0)
                                          or e["f"] == "assign"])
    res = analyze_run(run)
    assert "explanations" not in res
    html = (run / "report.html").read_text()
    assert 'id="explanations"' not in html and 'id="first-anomaly"' not in html


@pytest.mark.chromium
def test_the_explanations_render_in_chromium(tmp_path, headless_chromium):
    run = make_queue_run(tmp_path)
    analyze_run(run)
    url = (run / "report.html").resolve().as_uri()
    dom = headless_chromium("--window-size=1400,3000", "--dump-dom", "--virtual-time-budget=5000", url).stdout
    assert 'id="explanations"' in dom and "Why the offsets were lost" in dom
    assert "Time to the first anomaly" in dom and "n2 became leader of queue0-0 in epoch 1" in dom
    shot = tmp_path / "shot.png"
    headless_chromium("--window-size=1400,3000", f"--screenshot={shot}", url)
    from PIL import Image

    img = Image.open(shot).convert("RGB")
    assert len(img.getcolors(maxcolors=1 << 20) or []) > 50, "screenshot is (nearly) blank"


def test_a_failed_or_ambiguous_explanation_still_renders(tmp_path):
    from harness.report import RunData
    from harness.report import render_report as render_plain

    def render_report(data):  # with the wrack suite's own sections, as load_run adds them
        data.system_sections = suites.get("wrack").report_sections(data.results or {}, data.test)
        return render_plain(data)

    amb = {"key": TP, "offset": 4, "value": 7, "anomalies": ["lost-write"], "not_allowed": ["lost-write"],
           "allowed_by": [], "ops": [1], "during": [], "elected_without": None, "truncated_by": [], "reused_by": [],
           "ack": {"op": 1, "process": 0, "time": 1.0, "node": None, "epoch": None, "source": "node logs",
                   "candidates": [{"node": "n1", "epoch": 0}, {"node": "n2", "epoch": 1}], "isr": None},
           "timeline": [{"time": 1.0, "kind": "ack", "node": None, "text": "n1 or n2 acknowledged offset 4"}],
           "rules": [{"name": "none", "kind": "none", "rule": "No rule allows it.", "evidence": None, "matched": True}],
           "summary": "Offset 4 was acknowledged at 1.00 s by n1 or n2."}
    for ex in ({"error": "ValueError: boom", "explained": [], "counts": {}},
               {"explained": [amb], "counts": {"offsets": 1, "explained": 1, "not_explained": 0}, "clock": "none"}):
        html = render_report(RunData(test={"name": "t"}, results={"valid": False, "anomaly_types": ["lost-write"],
                                                                   "explanations": ex, "first_anomaly_time": 10**9,
                                                                   "first_bad_anomaly_time": 3 * 10**9}))
        assert 'id="explanations"' in html and "1.00 s</strong> after the workload started (when the history" in html
        assert "the first one the policy does not allow: <strong>3.00 s</strong>" in html
    assert "The explanation failed: ValueError: boom" in render_report(RunData(
        test={"name": "t"}, results={"valid": False, "explanations": {"error": "ValueError: boom"}}))
    assert "n1 or n2 acknowledged offset 4" in html and "but none were found" in html
