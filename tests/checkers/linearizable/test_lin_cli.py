"""`wrack check --checker linearizable`: exit codes, bad input, several files, HTML output."""

from __future__ import annotations

import json
from html.parser import HTMLParser

import pytest
from lin_testlib import check, stale_read_history, wrack

GOOD = [
    {"process": 0, "type": "invoke", "f": "write", "value": 1},
    {"process": 0, "type": "ok", "f": "write", "value": 1},
    {"process": 1, "type": "invoke", "f": "read", "value": None},
    {"process": 1, "type": "ok", "f": "read", "value": 1},
]
BAD = GOOD[:2] + [
    {"process": 1, "type": "invoke", "f": "read", "value": None},
    {"process": 1, "type": "ok", "f": "read", "value": 2},
]


def _write(path, events) -> str:
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    return str(path)


def _tags(page: str) -> list[tuple[str, list[tuple[str, str | None]]]]:
    tags: list = []

    class P(HTMLParser):
        def handle_starttag(self, tag, attrs):
            tags.append((tag, attrs))

    P().feed(page)
    return tags


def _one_line_error(r, where: str) -> None:
    assert r.returncode == 254, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert "Traceback" not in r.stderr
    assert lines[0].startswith("wrack: error: ") and where in lines[0], lines[0]


def test_exit_codes_valid_invalid(tmp_path):
    r = check("--model", "register", _write(tmp_path / "g.jsonl", GOOD))
    assert r.returncode == 0 and json.loads(r.stdout)["valid"] is True
    r = check("--model", "register", _write(tmp_path / "b.jsonl", BAD))
    assert r.returncode == 1
    res = json.loads(r.stdout)
    assert res["valid"] is False and res["anomaly_types"] == ["nonlinearizable"]
    ce = res["anomalies"]["nonlinearizable"][0]
    # the window: the read alone (no op ever wrote 2), decided without a search
    w = ce["window"]
    assert (w["from"]["line"], w["to"]["line"], w["ops"], w["decided_by"]) == (3, 4, 1, "rule 6")
    assert [x["op"] for x in w["listed"]] == ["read 2"] and ce["linearized"] == []
    assert ce["cannot_follow"]["op"] == "read 2" and ce["cannot_follow"]["line"] == 3


def test_several_files_one_json_line_each(tmp_path):
    g, b = _write(tmp_path / "g.jsonl", GOOD), _write(tmp_path / "b.jsonl", BAD)
    r = check("--model", "cas-register", g, b, g)
    assert r.returncode == 1
    lines = [json.loads(x) for x in r.stdout.splitlines()]
    assert [(x["file"], x["valid"]) for x in lines] == [(g, True), (b, False), (g, True)]


def test_unknown_verdict_on_time_limit_says_how_far_it_got(shared):
    # 120k configurations without partitioning: far more than the first slices allow
    path = str(shared / "data" / "porcupine" / "kv" / "c10-bad.txt")
    r = check("--model", "kv", "--no-partition", "--time-limit", "0", path)
    assert r.returncode == 2, r.stderr
    res = json.loads(r.stdout)
    assert res["valid"] == "unknown" and "time limit" in res["reason"]
    assert res["decided"] == 0 and res["undecided"] == [None]
    (o,) = res["open"]
    w = o["window"]
    assert o["stage"] == "exact" and o["configs"] > 0
    assert 1 <= w["from"]["line"] <= w["to"]["line"] and w["ops"] >= 1


def test_the_counterexample_is_the_smallest_window(tmp_path):
    out = tmp_path / "vis.html"
    r = check("--model", "cas-register", "--html", str(out), _write(tmp_path / "h.jsonl", stale_read_history()))
    assert r.returncode == 1, r.stderr
    (ce,) = json.loads(r.stdout)["anomalies"]["nonlinearizable"]
    w = ce["window"]
    # from the overwriting write of 3 to the stale read's return; the crashed write of 1 is
    # carried in (it may still take effect), the write of 5 is before the window
    assert ce["key"] == "a" and w["decided_by"] == "rule 6"
    assert [x["op"] for x in w["listed"]] == ["write 3", "read 1", "read 5", "write 4 (indeterminate)"]
    assert w["carried"] == 1 and w["carried_ops"] == {"write 1 (indeterminate)": 1}
    assert w["from"]["line"] == 6 and w["to"]["line"] == 14 and "5" in w["start_states"]
    assert "write 3 (line 6)" in w["why"] and ce["cannot_follow"]["op"] == "read 5"
    page = out.read_text()
    assert "Counterexample window" in page and "Rule 6: read 5 (line 10) needs the state 5" in page
    assert "write 1 &times;1" in page


@pytest.mark.parametrize("content, where, what", [
    ('{"process":0,"type":"invoke","f":"write","value":1}\n{"process":0,"type":"ok",\n'
     '{"process":1,"type":"invoke","f":"read","value":null}\n', ":2:", "malformed JSON"),
    ('{"process":0,"type":"ok","f":"write","value":1}\n{"process":1,"type":"invoke","f":"read","value":null}\n',
     ":1:", "without an invoke"),
    ('{"process":0,"type":"invoke","f":"cas","value":"abc"}\n{"process":0,"type":"ok","f":"cas","value":"abc"}\n'
     '{"process":1,"type":"invoke","f":"read","value":null}\n', ":2:", "not a pair"),
    ('{"process":0,"type":"invoke","f":"write","value":{"a":1}}\n{"process":0,"type":"ok","f":"write","value":1}\n'
     '{"process":1,"type":"invoke","f":"read","value":null}\n', ":2:", "not a scalar"),
    ('{"process":0,"type":"invoke","f":"dance","value":1}\n{"process":0,"type":"ok","f":"dance","value":1}\n'
     '{"process":1,"type":"invoke","f":"read","value":null}\n', ":2:", "unknown f"),
    ('{"process":0,"type":"begin","f":"write","value":1}\n{"process":1,"type":"invoke","f":"read","value":null}\n',
     ":1:", "bad type"),
    ('{"process":0,"type":"invoke","f":"write","value":1,"time":10}\n'
     '{"process":0,"type":"ok","f":"write","value":1,"time":5}\n'
     '{"process":1,"type":"invoke","f":"read","value":null,"time":11}\n', ":2:", "before its invocation"),
    ('{"process":0,"type":"invoke","f":"write","value":["a",1]}\n{"process":0,"type":"ok","f":"write","value":["a",1]}\n'
     '{"process":1,"type":"invoke","f":"write","value":3}\n{"process":1,"type":"ok","f":"write","value":3}\n', ":4:",
     "a history uses one form"),
    ('{"process":0,"type":"invoke","f":"read","value":["a",null]}\n'
     '{"process":0,"type":"ok","f":"read","value":["b",1]}\n', ":2:", "differs from the invoked key"),
])
def test_bad_jsonl_input_is_one_line_with_file_and_line(tmp_path, content, where, what):
    p = tmp_path / "h.jsonl"
    p.write_text(content)
    r = check("--model", "cas-register", str(p))
    _one_line_error(r, f"{p}{where}")
    assert what in r.stderr


def test_bad_etcd_and_kv_lines(tmp_path):
    p = tmp_path / "etcd.log"
    p.write_text("INFO  jepsen.util - 0\t:invoke\t:read\tnil\nINFO  jepsen.util - 0\t:ok\t:read\tbanana\n")
    _one_line_error(check("--model", "cas-register", str(p)), f"{p}:2:")
    p = tmp_path / "kv.edn"
    p.write_text('{:process 0, :type :invoke, :f :get, :key "0", :value nil}\n{:process 0, :type :ok, :f :get, :key}\n')
    _one_line_error(check("--model", "kv", str(p)), f"{p}:2:")


def test_unknown_model_missing_file_bad_option(tmp_path):
    g = _write(tmp_path / "g.jsonl", GOOD)
    r = check("--model", "queue-of-doom", g)
    _one_line_error(r, "unknown model 'queue-of-doom'")
    r = check("--model", "register", str(tmp_path / "absent.jsonl"))
    _one_line_error(r, "absent.jsonl")
    r = check("--model", "register", "--format", "yaml", g)
    assert r.returncode == 254 and "Traceback" not in r.stderr


def test_torn_last_line_is_dropped_and_reported(tmp_path):
    p = tmp_path / "h.jsonl"
    p.write_text("".join(json.dumps(e) + "\n" for e in GOOD) + '{"process": 2, "type": "inv')
    r = check("--model", "register", str(p))
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    assert res["dropped_lines"] == 1 and "line 5" in res["dropped_reason"]


def test_html_is_self_contained_and_escapes_values(tmp_path):
    evil = '<script>alert("x")</script>&amp;'
    events = [
        {"process": 0, "type": "invoke", "f": "put", "value": ["k<b>", evil]},
        {"process": 0, "type": "ok", "f": "put", "value": ["k<b>", evil]},
        {"process": 1, "type": "invoke", "f": "get", "value": ["k<b>", None]},
        {"process": 1, "type": "ok", "f": "get", "value": ["k<b>", "<img src=http://example.com/x>"]},
        {"process": 2, "type": "invoke", "f": "append", "value": ["k<b>", "z"]},
    ]
    out = tmp_path / "vis.html"
    r = check("--model", "kv", "--html", str(out), _write(tmp_path / "h.jsonl", events))
    assert r.returncode == 1, r.stderr
    assert json.loads(r.stdout)["html"] == str(out)
    page = out.read_text()
    assert page.startswith("<!DOCTYPE html>") and "</html>" in page
    assert "<script" not in page and "<img" not in page and "k<b>" not in page and "k&lt;b&gt;" in page
    assert "&lt;script&gt;" in page and "&lt;img src=" in page
    tags = _tags(page)  # nothing is fetched from anywhere: no such tags, no URL attributes
    assert not {t for t, _ in tags} & {"script", "link", "img", "iframe", "object", "embed", "base"}
    assert not [a for _, attrs in tags for a, v in attrs if a in ("src", "href", "xmlns") or "//" in (v or "")]
    assert "@import" not in page and "url(" not in page
    assert "cannot follow" in page and "<svg" in page


def test_html_for_several_files_goes_into_a_folder(tmp_path):
    g, b = _write(tmp_path / "g.jsonl", GOOD), _write(tmp_path / "b.jsonl", BAD)
    out = tmp_path / "html"
    r = check("--model", "register", "--html", str(out), g, b)
    assert r.returncode == 1
    assert sorted(p.name for p in out.iterdir()) == ["b.jsonl.html", "g.jsonl.html"]
    assert "NOT linearizable" in (out / "b.jsonl.html").read_text()
    assert "linearizable" in (out / "g.jsonl.html").read_text()


def test_help_mentions_the_options():
    r = wrack("check", "--help")
    assert r.returncode == 0
    for opt in ("--model", "--format", "--html", "--no-partition", "--time-limit"):
        assert opt in r.stdout
