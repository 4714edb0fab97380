"""`wrack demo` checks the bundled example histories and every verdict is the promised one."""

from __future__ import annotations

import json

from lin_testlib import wrack


def test_demo_prints_expected_verdicts(tmp_path):
    r = wrack("demo", "--html", str(tmp_path))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "every verdict as expected" in r.stdout
    assert "cas-register__invalid__stale-read.jsonl" in r.stdout and "cannot follow" in r.stdout
    htmls = sorted(p.name for p in tmp_path.iterdir())
    assert "log__valid__sends-and-reads.html" in htmls and len(htmls) >= 6


def test_demo_json_and_a_wrong_promise(tmp_path):
    r = wrack("demo", "--json")
    lines = [json.loads(x) for x in r.stdout.splitlines()]
    assert r.returncode == 0 and all(x["valid"] is x["expected"] for x in lines)
    assert {x["model"] for x in lines} == {"register", "cas-register", "kv", "log"}
    # an example whose name promises the wrong verdict makes the demo fail
    (tmp_path / "register__valid__oops.jsonl").write_text(
        '{"process":0,"type":"invoke","f":"read","value":null}\n{"process":0,"type":"ok","f":"read","value":5}\n')
    r = wrack("demo", "--examples", str(tmp_path))
    assert r.returncode == 1 and "UNEXPECTED" in r.stdout
    (tmp_path / "badname.jsonl").write_text("")
    r = wrack("demo", "--examples", str(tmp_path))
    assert r.returncode == 254 and "badname.jsonl" in r.stderr
