"""`wrack check --checker queue` through the real CLI: verdict exit codes, policies,
bad input as FILE:LINE with exit 254, torn last lines, time limits, --plots."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import orjson
import pytest
from queue_testlib import H, simulate, wrack_bin


def write(path: Path, events: list[dict]) -> Path:
    path.write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in events))
    return path


def wrack(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([wrack_bin(), "check", "--checker", "queue", *args], capture_output=True, text=True,
                          timeout=120)


def lost(tmp_path: Path) -> Path:
    return write(tmp_path / "lost.jsonl", H().send(0, "x", "a", 0).send(0, "x", "b", 1)
                 .poll(1, {"x": [[1, "b"]]}).events)


def test_valid_history_exits_0(tmp_path):
    p = write(tmp_path / "h.jsonl", simulate(3, n_ops=200).h.events)
    r = wrack("--json", str(p))
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    assert res["valid"] is True and res["anomaly_types"] == [] and res["allowed"] == []


def test_invalid_history_exits_1_and_policy_allows(tmp_path):
    p = lost(tmp_path)
    r = wrack(str(p))
    assert r.returncode == 1
    res = json.loads(r.stdout)
    assert res["anomaly_types"] == ["lost-write"] and res["bad_anomaly_types"] == ["lost-write"]
    assert res["anomalies"]["lost-write"][0]["explanation"]
    r = wrack("--allow", "lost-write", "--json", str(p))
    assert r.returncode == 0 and json.loads(r.stdout)["allowed"] == ["lost-write"]
    r = wrack("--policy", "acks1", "--json", str(p))
    assert r.returncode == 0 and json.loads(r.stdout)["policy"]["name"] == "acks1"


def test_unknown_allow_or_policy_is_bad_argument(tmp_path):
    p = lost(tmp_path)
    r = wrack("--allow", "lost-writes", str(p))
    assert r.returncode == 254 and "unknown anomaly type 'lost-writes'" in r.stderr
    r = wrack("--policy", "nope", str(p))
    assert r.returncode == 254 and "unknown policy 'nope'" in r.stderr


@pytest.mark.parametrize("bad_line, expect", [
    (b'{"process": 1, "type": "ok", "f": "poll", "value": [["poll", {"x": [[-3, "a"]]}]]}', "bad offset -3"),
    (b'{"process": 1, "type": "ok", "f": "poll", "value": [["poll", {"x": 7}]]}', "bad records 7"),
    (b'{"process": 1, "type": "ok", "f": "poll", "value": [["poll", {"x": [[0, "a"]]}]]', "malformed JSON"),
    (b'[1, 2, 3]', "not a JSON object"),
    (b'{"process": 1, "type": "okay", "f": "poll", "value": null}', "bad type 'okay'"),
    (b'{"process": 1.5, "type": "invoke", "f": "poll", "value": null}', "bad process 1.5"),
])
def test_bad_input_names_file_and_line(tmp_path, bad_line, expect):
    good = H().send(0, "x", "a", 0).events
    lines = [orjson.dumps(e) for e in good] + [b"", b'{"process": 1, "type": "invoke", "f": "poll", "value": null}',
                                                bad_line] + [orjson.dumps(e) for e in H().send(5, "y", 1, 0).events]
    p = tmp_path / "bad.jsonl"
    p.write_bytes(b"\n".join(lines) + b"\n")
    r = wrack(str(p))
    assert r.returncode == 254, (r.stdout, r.stderr)
    assert f"{p}:5:" in r.stderr and expect in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and r.stderr.count("\n") == 1


def test_missing_file_is_bad_input(tmp_path):
    r = wrack(str(tmp_path / "nope.jsonl"))
    assert r.returncode == 254 and "cannot read history" in r.stderr


def test_torn_last_line_is_dropped(tmp_path):
    p = lost(tmp_path)
    p.write_bytes(p.read_bytes() + b'{"process": 3, "type": "inv')
    r = wrack("--allow", "lost-write", "--json", str(p))
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    assert res["dropped_lines"] == 1 and "line 7" in res["dropped_reason"]


def test_time_limit_gives_unknown(tmp_path):
    h = H()
    for i in range(12000):
        h.send(i % 7, "x", i, i)
    h.poll(100, {"x": [[i, i] for i in range(12000)]})
    p = write(tmp_path / "big.jsonl", h.events)
    r = wrack("--time-limit", "0", "--json", str(p))
    assert r.returncode == 2, r.stderr
    res = json.loads(r.stdout)
    assert res["valid"] == "unknown" and "time limit" in res["reason"]


def test_plots_and_timeline_written(tmp_path):
    sim = simulate(11, n_ops=400, n_keys=3, n_proc=5)
    h = sim.h
    evs = h.events
    n = len(evs)
    evs.insert(n // 4, {"process": "nemesis", "type": "info", "f": "start-partition", "value": "halves"})
    evs.insert(n // 2, {"process": "nemesis", "type": "info", "f": "stop-partition", "value": None})
    evs.insert(3 * n // 4, {"process": "nemesis", "type": "info", "f": "check-clock",
                            "value": {"action": "check", "clock-offsets": {"n1": 0.25, "n2": -0.1}}})
    for i, e in enumerate(evs):
        e["index"] = i
        e["time"] = i * 1_000_000
    p = write(tmp_path / "h.jsonl", evs)
    out = tmp_path / "plots"
    r = wrack("--json", "--plots", str(out), str(p))
    assert r.returncode == 0, r.stderr
    names = sorted(x.name for x in out.iterdir())
    assert names == sorted(["latency-raw.png", "latency-quantiles.png", "rate.png", "realtime-lag.png",
                            "unseen.png", "clock-skew.png", "timeline.html"])
    for x in out.glob("*.png"):
        assert x.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and x.stat().st_size > 5000
    res = json.loads(r.stdout)
    assert [w["kind"] for w in res["stats"]["fault_windows"]] == ["partition"]


def test_clock_plot_from_the_nemesis_clock_events(tmp_path):
    from checkers.plots import write_plots

    h = H().send(0, "x", 1, 0).assign(1, ["x"]).poll(1, {"x": [[0, 1]]})
    h.nemesis("start-clock", {"action": "bump", "clock-offsets": {"n1": 90.0, "n2": 0.0}})
    h.send(0, "x", 2, 1)
    h.nemesis("stop-clock", {"action": "reset", "clock-offsets": {"n1": 0.0, "n2": 0.0}})
    p = write(tmp_path / "h.jsonl", h.events)
    assert "clock-skew" in write_plots(p, tmp_path / "a")
    assert (tmp_path / "a" / "clock-skew.png").stat().st_size > 5000
    # other shapes are not clock samples: an undocumented key, or a non-clock event
    h2 = H().send(0, "x", 1, 0)
    h2.nemesis("start-clock", {"clock_offsets": {"n1": 1.0}})
    h2.nemesis("kill", {"nodes": ["n1"], "clock-offsets": {"n1": 1.0}})
    assert "clock-skew" not in write_plots(write(tmp_path / "h2.jsonl", h2.events), tmp_path / "b")


def test_plots_draw_from_a_given_analysis_without_reading_the_history_again(tmp_path, monkeypatch):
    import checkers.plots
    from checkers.queue import analyze_file

    sim = simulate(5, n_ops=200)
    p = write(tmp_path / "h.jsonl", sim.h.events)
    an = analyze_file(p)

    def no_second_pass(path):
        raise AssertionError("the history was analysed again")

    monkeypatch.setattr(checkers.plots, "_load", no_second_pass)
    names = checkers.plots.write_plots(p, tmp_path / "plots", analysis=an)
    assert {"latency-raw", "rate", "realtime-lag", "unseen"} <= set(names)
