"""The run report renders offline in headless Chromium (non-blank, no network request, payload
markup stays text), and `wrack serve` answers a real HTTP client."""

from __future__ import annotations

import json
import re
import subprocess
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from contracts import store
from contracts.history import write_history
from harness.analysis import analyze_run
from harness.netutil import free_port
from harness.report import load_run, render_report

PAYLOAD = "<script>document.title='PWNED'</script><img src=x onerror=alert(1)>"


def make_run(root: Path, name: str = "queue-acksall-partition") -> Path:
    """A stored run of the no-op workload whose history carries markup in values and errors."""
    run = store.new_run(root, name)
    store.write_json(run / "test.json", {
        "name": name, "run_id": store.run_id(run), "start": "2026-01-01T00:00:00+00:00",
        "end": "2026-01-01T00:01:00+00:00", "seed": 7,
        "options": {"workload": "noop", "acks": "all", "nodes": 3, "nemesis": ["partition", "kill"],
                    "min_isr": 2, "rf": 3, "note": PAYLOAD},
        "versions": {"python": "3"}, "git": {"rev": "abc", "dirty": False}})
    evs = []
    t = 0
    for i in range(300):
        t += 10_000_000
        evs.append({"process": i % 3, "type": "invoke", "f": "noop", "value": PAYLOAD if i == 5 else i, "time": t})
        evs.append({"process": i % 3, "type": "fail" if i == 5 else "ok", "f": "noop",
                    "value": PAYLOAD if i == 5 else i, "time": t + 3_000_000 + (i % 7) * 1_000_000,
                    **({"error": PAYLOAD} if i == 5 else {})})
        if i == 50:
            evs.append({"process": "nemesis", "type": "info", "f": "start-partition",
                        "value": {"spec": "halves", "grudge": {"n1": ["n2"]}}, "time": t})
        if i == 150:
            evs.append({"process": "nemesis", "type": "info", "f": "stop-partition", "value": {}, "time": t})
    write_history(run / "history.jsonl", evs)
    (run / "nodes" / "n1").mkdir(parents=True)
    (run / "nodes" / "n1" / "broker.log").write_text(f"INFO started\nERROR {PAYLOAD}\n")
    return run


def test_payload_markup_stays_text(tmp_path):
    run = make_run(tmp_path)
    res = analyze_run(run)
    assert res["valid"] is False and res["anomaly_types"] == ["not-ok"]  # the failed no-op
    html = (run / "report.html").read_text()
    assert "<script>document.title" not in html and "onerror=alert" not in html.replace("onerror=alert(1)&gt;", "")
    assert "&lt;script&gt;document.title=" in html
    # the only scripts are the timeline's (its data and its code), inside its section
    assert html.count("<script") == 2 and html.index("<script") > html.index('<section id="timeline">')
    assert "<iframe" not in html and "srcdoc" not in html
    data = load_run(run)
    assert data.faults and data.faults[0]["kind"] == "partition" and data.ops
    assert "#10 " in render_report(data) or "#1" in render_report(data)  # the failed op is shown in full


def run_chromium(chromium, url: str, *extra: str):
    """The page at `url` in headless Chromium (the `headless_chromium` fixture), 1400x2000."""
    return chromium("--window-size=1400,2000", *extra, url)


def external_refs(html: str) -> list[str]:
    """src/href values that are neither data: URIs nor in-page fragments."""
    refs = re.findall(r'\b(?:src|href)\s*=\s*"([^"]*)"', html)
    return [r for r in refs if not r.startswith(("data:", "#")) and r]


def page_requests(netlog: Path, page_url: str) -> list[str]:
    """URLs the page itself asked for (Chromium's own service requests have no origin)."""
    d = json.loads(netlog.read_text())
    start = d["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
    out = []
    for e in d["events"]:
        p = e.get("params") or {}
        if e["type"] == start and p.get("url") and p.get("initiator") != "not an origin" and p["url"] != page_url:
            out.append(p.get("url"))
    return out


@pytest.mark.chromium
def test_report_renders_offline_in_chromium(tmp_path, headless_chromium):
    from PIL import Image

    run = make_run(tmp_path)
    analyze_run(run)
    url = (run / "report.html").resolve().as_uri()
    shot, netlog = tmp_path / "shot.png", tmp_path / "net.json"
    run_chromium(headless_chromium, url, f"--screenshot={shot}", f"--log-net-log={netlog}")
    assert shot.is_file() and shot.stat().st_size > 10_000
    img = Image.open(shot).convert("RGB")
    colors = img.getcolors(maxcolors=1 << 20) or []
    assert len(colors) > 50, "screenshot is (nearly) blank"
    top = img.crop((0, 0, img.width, 150)).getcolors(maxcolors=1 << 20) or []
    assert any(c[1][0] > 150 and c[1][1] < 80 and c[0] > 1000 for c in top)  # the red (invalid) verdict banner
    assert not page_requests(netlog, url), "the report loads resources: it must be self-contained"
    # control: a page that does load resources is caught by the same check
    bad = tmp_path / "bad.html"
    bad.write_text('<html><body><img src="https://wrack.invalid/x.png"><img src="missing.png"></body></html>')
    run_chromium(headless_chromium, bad.as_uri(), f"--screenshot={tmp_path / 'bad.png'}", f"--log-net-log={tmp_path / 'bad.json'}")
    assert page_requests(tmp_path / "bad.json", bad.as_uri()) == ["https://wrack.invalid/x.png"]
    assert external_refs(bad.read_text()) == ["https://wrack.invalid/x.png", "missing.png"]
    # file:// loads bypass the network log: no src/href of the report may point outside it
    assert external_refs((run / "report.html").read_text()) == []
    # the timeline is drawn in the report itself, every time. It was a sandboxed srcdoc iframe,
    # which Chromium paints in a process of its own: screenshots caught it blank 1 time in 3,
    # also with a virtual time budget (which lets the timeline's asynchronous data decoding finish)
    for i in range(3):
        tall = tmp_path / f"tall{i}.png"
        run_chromium(headless_chromium, url, f"--screenshot={tall}", "--window-size=1400,6000", "--virtual-time-budget=10000")
        px = Image.open(tall).convert("RGB").getcolors(maxcolors=1 << 22) or []
        ok_boxes = sum(n for n, c in px if c == (0x6D, 0xB6, 0xFE))
        assert ok_boxes > 20_000, f"screenshot {i}: the timeline drew no ok boxes ({ok_boxes} px)"
    dom = run_chromium(headless_chromium, url, "--dump-dom", "--virtual-time-budget=10000").stdout
    assert 'class="op y0"' in dom and "of 602" in dom  # the timeline's boxes and status line
    assert "PWNED" not in re.search(r"<title>(.*?)</title>", dom, re.S).group(1)
    assert "&lt;script&gt;document.title='PWNED'&lt;/script&gt;" in dom


def test_serve_lists_runs_and_serves_reports(tmp_path):
    from harness.serve import make_server

    root = tmp_path / "results"
    a = make_run(root, "queue-acksall-partition")
    analyze_run(a)
    b = make_run(root, "queue-acks1-kill")  # never checked
    srv = make_server([str(root)], "127.0.0.1", 0)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    base = f"http://127.0.0.1:{srv.server_address[1]}"
    try:
        with urllib.request.urlopen(base + "/") as r:
            assert r.status == 200 and r.headers["Content-Type"].startswith("text/html")
            page = r.read().decode()
        assert "queue-acksall-partition" in page and "queue-acks1-kill" in page
        assert 'id="q"' in page and "sort" in page and "unchecked" in page  # filter, sorting, verdicts
        assert "<script>document.title" not in page  # the run's note is escaped
        with urllib.request.urlopen(base + "/api/runs") as r:
            runs = json.loads(r.read())
        by_name = {x["name"]: x for x in runs}
        assert by_name["queue-acksall-partition"]["verdict"] == "invalid"
        assert by_name["queue-acks1-kill"]["verdict"] == "unchecked" and by_name["queue-acks1-kill"]["report"] is None
        with urllib.request.urlopen(base + by_name["queue-acksall-partition"]["report"]) as r:
            assert b"INVALID" in r.read()
        with urllib.request.urlopen(base + by_name["queue-acks1-kill"]["href"] + "history.jsonl") as r:
            assert r.headers["Content-Type"].startswith("text/plain")
        for bad in ("/files/0/../../etc/passwd", "/files/0/%2e%2e/%2e%2e/etc/passwd", "/files/7/x", "/nope"):
            with pytest.raises(urllib.error.HTTPError) as e:
                urllib.request.urlopen(base + bad)
            assert e.value.code == 404
        assert b.exists()
    finally:
        srv.shutdown()
        srv.server_close()


def test_serve_command_binds_loopback(tmp_path):
    import sys
    import time

    (tmp_path / "results").mkdir()
    port = free_port()
    p = subprocess.Popen([str(Path(sys.executable).parent / "wrack"), "serve", str(tmp_path / "results"),
                          "--port", str(port)], stdout=subprocess.PIPE, text=True)
    try:
        line = p.stdout.readline()
        assert f"http://127.0.0.1:{port}/" in line
        deadline = time.monotonic() + 10
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/") as r:
                    assert b"Wrack runs" in r.read()
                break
            except urllib.error.URLError:
                assert time.monotonic() < deadline
                time.sleep(0.1)
    finally:
        p.terminate()
        p.wait(10)


def test_report_renders_whatever_is_missing(tmp_path):
    from harness.report import RunData

    for data in (RunData(test={}), RunData(test={"name": "x"}, results={}),
                 RunData(test={"options": {"acks": "1"}}, results={"valid": "unknown", "error": "boom",
                                                                     "anomalies": {"lost-write": "not a list"}})):
        html = render_report(data)
        assert "<html" in html and ("UNKNOWN" in html or "VALID" in html)
    run = tmp_path / "r"
    run.mkdir()
    (run / "history.jsonl").write_text('{"process": 0, "type": "invoke", "f": "noop", "value": 1}\n{"proc')
    from harness.report import write_report

    assert "UNKNOWN" in write_report(run).read_text()  # never checked: unknown, torn tail tolerated


def make_queue_run(root: Path, acks: str = "1") -> Path:
    """A stored queue run: two processes sending and polling one key, a clock fault."""
    name = f"queue-acks{acks}-clock"
    run = store.new_run(root, name)
    store.write_json(run / "test.json", {
        "name": name, "run_id": store.run_id(run), "start": "2026-01-01T00:00:00+00:00",
        "end": "2026-01-01T00:01:00+00:00", "seed": 1,
        "options": {"workload": "queue", "acks": acks, "nodes": 3, "nemesis": ["clock"], "min_isr": 2, "rf": 3}})
    evs, t = [], 0

    def op(p, f, inv, done):
        nonlocal t
        t += 5_000_000
        evs.append({"process": p, "type": "invoke", "f": f, "value": inv, "time": t})
        evs.append({"process": p, "type": "ok", "f": f, "value": done, "time": t + 2_000_000})

    op(1, "assign", ["q-0"], ["q-0"])
    for i in range(40):
        op(0, "send", [["send", "q-0", i]], [["send", "q-0", [i, i]]])
        op(1, "poll", [["poll"]], [["poll", {"q-0": [[i, i]]}]])
        if i in (10, 30):
            evs.append({"process": "nemesis", "type": "info", "f": "start-clock" if i == 10 else "stop-clock",
                        "value": {"clock-offsets": {"n1": 2.5 if i == 10 else 0.0, "n2": 0.0}}, "time": t})
    write_history(run / "history.jsonl", evs)
    return run


def test_analysis_checks_with_the_named_policies_and_plots_from_the_check(tmp_path, monkeypatch):
    import checkers.plots
    from checkers.queue import POLICIES

    def no_second_pass(path):
        raise AssertionError("the history was analysed twice")

    monkeypatch.setattr(checkers.plots, "_load", no_second_pass)
    run = make_queue_run(tmp_path)
    res = analyze_run(run)
    assert res["valid"] is True and "render_problems" not in res, res.get("render_problems")
    assert res["policy"]["name"] == "acks1" and res["policy"]["policies"][0]["name"] == "acks1"
    assert set(res["allowed"]) == POLICIES["acks1"]
    names = {p.stem for p in (run / "plots").glob("*.png")}
    assert {"latency-raw", "rate", "unseen", "clock-skew"} <= names
    html = (run / "report.html").read_text()
    assert "named policy" in html and "acks=1: the leader acknowledges a record before any follower" in html


def test_check_run_reads_the_history_twice(tmp_path, monkeypatch):
    """One validated pass (the history's figures, the policy's faults, liveness), then the checker's."""
    import builtins
    import os

    from harness.analysis import check_run

    run = make_queue_run(tmp_path)
    real_open = builtins.open
    reads = []

    def counting_open(file, mode="r", *args, **kwargs):
        if isinstance(file, str | os.PathLike) and Path(file).name == "history.jsonl" and "r" in mode:
            reads.append(mode)
        return real_open(file, mode, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", counting_open)
    res = check_run(run).results
    assert len(reads) == 2
    assert res["valid"] is True and res["liveness"]["checked"] is False
    assert res["history"] == {"events": 164, "dropped_lines": 0, "dropped_reason": "", "never_completed": 0,
                              "ok": 81, "fail": 0, "info": 0}


def test_report_says_whether_replication_recovered():
    from harness.report import RunData

    none = {"share": None, "ok": 0, "completed": 0}
    liveness = {"checked": False, "reason": "no final heal", "first_ok_send_after_fault": [], "first_ok_send_after_heal": [],
                "availability": {k: {"sends": none} for k in ("in_faults", "outside_faults", "after_heals")}}
    html = render_report(RunData(test={"observer": {"whole_after_s": 4.25}}, results={"liveness": liveness}))
    assert "every partition had a leader and a full ISR 4.2 s after the final phase" in html
    html = render_report(RunData(test={"observer": {"whole_after_s": None}, "options": {"recovery_time_limit": 30}},
                                 results={"liveness": liveness}))
    assert "Replication did not recover:</strong>" in html and "ISR 30 s after the final phase" in html
    assert "Replication" not in render_report(RunData(test={"observer": {"polls": 3}}, results={"liveness": liveness}))
