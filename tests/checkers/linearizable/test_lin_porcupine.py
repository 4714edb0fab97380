"""Every Porcupine conformance file gets its expected verdict through `wrack check`.

data/porcupine/expected.csv of the shared data (the `shared` fixture): 102 etcd logs (cas-register, Jepsen format) and six
kv files (EDN), each true/false (etcd_095 is empty and skipped). The etcd suite runs in
one process (several files: one JSON line per file with a `file` field), the kv files
one by one, the small kv files also with partitioning switched off.
"""

from __future__ import annotations

import csv
import json

import pytest
from lin_testlib import check as _check


def _expected(shared) -> dict[str, bool]:
    d = shared / "data" / "porcupine"
    with open(d / "expected.csv") as f:
        return {r["file"]: r["linearizable"] == "true" for r in csv.DictReader(f)
                if r["linearizable"] != "skip-empty"}


def test_etcd_suite_in_one_process(shared):
    exp = {f: v for f, v in _expected(shared).items() if f.startswith("etcd/")}
    assert len(exp) == 102 and sum(exp.values()) == 23
    d = shared / "data" / "porcupine"
    files = [str(d / f) for f in sorted(exp)]
    r = _check("--model", "cas-register", *files)
    assert r.returncode == 1, r.stderr  # some are invalid: the worst verdict is the exit code
    lines = [json.loads(x) for x in r.stdout.splitlines()]
    assert len(lines) == 102
    got = {str(x["file"]).split("porcupine/")[1]: x["valid"] for x in lines}
    assert got == exp
    for x in lines:
        if x["valid"] is False:  # a counterexample: the op that cannot follow a partial linearization
            ce = x["anomalies"]["nonlinearizable"][0]
            assert x["anomaly_types"] == ["nonlinearizable"]
            assert ce["cannot_follow"]["line"] > 0 and "state" in ce


@pytest.mark.parametrize("name", ["c01-ok", "c01-bad", "c10-ok", "c10-bad", "c50-ok", "c50-bad"])
def test_kv_files(shared, name):
    exp = _expected(shared)[f"kv/{name}.txt"]
    path = str(shared / "data" / "porcupine" / "kv" / f"{name}.txt")
    r = _check("--model", "kv", path)
    assert r.returncode == (0 if exp else 1), r.stderr
    res = json.loads(r.stdout)
    assert res["valid"] is exp and res["model"] == "kv" and res["partitions"] >= 1
    if name.startswith(("c01", "c10")):
        r = _check("--model", "kv", "--no-partition", path)
        assert r.returncode == (0 if exp else 1), r.stderr
        assert json.loads(r.stdout)["partitions"] == 1


def test_format_is_recognised_and_can_be_forced(shared):
    d = shared / "data" / "porcupine"
    r = _check("--model", "cas-register", "--format", "etcd-log", str(d / "etcd" / "etcd_002.log"))
    assert r.returncode == 0, r.stderr
    r = _check("--model", "kv", "--format", "kv-edn", str(d / "kv" / "c01-bad.txt"))
    assert r.returncode == 1, r.stderr
    # the wrong format is bad input, named with file and line
    r = _check("--model", "kv", "--format", "kv-edn", str(d / "etcd" / "etcd_002.log"))
    assert r.returncode == 254
    assert "etcd_002.log:1:" in r.stderr and len(r.stderr.strip().splitlines()) == 1
