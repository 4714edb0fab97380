"""End to end with etcd 3.4 (Debian's etcd-server) as the system under test: `wrack test --db
etcd` deploys a member per node, drives the register workload (read / write / compare-and-set
through etcd's v3 API) and checks it for linearizability per key.

- on 5 local nodes under partitions, kills and pauses: valid, with thousands of ok ops, and
  nothing left behind (namespaces, processes);
- with serializable reads while a minority is cut off: the members on the minority side
  answer reads from their own stale state, and the checker finds the nonlinearizable
  history, whose counterexample the report renders;
- on docker containers (whose image carries etcd-server): valid under kills.
Root only; about 3 minutes."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from harness_testlib import run_wrack

from clusters.testing import can_run_docker, can_run_local

pytestmark = [
    pytest.mark.root, pytest.mark.slow,
    pytest.mark.skipif(not can_run_local(), reason="needs root and network namespaces"),
]


def wrack_test(tmp_path: Path, *args: str, timeout: float = 400) -> tuple[int, dict, Path]:
    p = run_wrack(["test", "--db", "etcd", "--results", str(tmp_path), "--quiet", "--json", *args], timeout)
    assert p.returncode != 255 and p.stdout.strip(), f"rc {p.returncode}\n{p.stdout}\n{p.stderr[-3000:]}"
    line = json.loads(p.stdout.strip().splitlines()[-1])
    return p.returncode, line, Path(line["run"])


def leftovers(cluster: str) -> list[str]:
    """Namespaces and etcd processes of `cluster` still on this machine."""
    ns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    ps = subprocess.run(["pgrep", "-af", f"initial-cluster-token|{cluster}"], capture_output=True, text=True).stdout
    return [x for x in ns.splitlines() if cluster in x] + [x for x in ps.splitlines() if cluster in x]


def test_etcd_is_linearizable_under_partitions_kills_and_pauses(tmp_path):
    rc, line, run = wrack_test(tmp_path, "--nodes", "5", "--nemesis", "partition,kill,pause,kill-leader",
                               "--nemesis-interval", "8", "--time-limit", "20", "--seed", "1")
    res = json.loads((run / "results.json").read_text())
    test = json.loads((run / "test.json").read_text())
    assert rc == 0 and line["verdict"] == "valid", res.get("anomaly_types")
    assert res["checker"] == "linearizable" and test["options"]["workload"] == "register"
    ok = sum(n for k, n in test["ops"].items() if k.endswith(":ok"))
    assert ok >= 1000, test["ops"]
    assert {"read:ok", "write:ok", "cas:ok", "cas:fail"} <= set(test["ops"]), test["ops"]
    faults = {e["f"] for e in map(json.loads, (run / "history.jsonl").read_text().splitlines())
              if e.get("process") == "nemesis"}
    assert {"start-partition", "kill", "final-heal"} <= faults, faults
    assert (run / "nodes" / "n1" / "etcd.log").stat().st_size > 0
    assert leftovers(test["cluster"]["name"]) == []


def test_serializable_reads_on_a_cut_off_minority_are_caught_stale(tmp_path):
    # a 1 s request timeout: with 5 s, a client on the minority spends the partition's few
    # seconds on writes that time out, and reads little (seed 2 was valid once in CI, invalid
    # in 3 of 3 runs here); with 1 s, seeds 2-7 were all invalid
    rc, line, run = wrack_test(tmp_path, "--nodes", "5", "--etcd-reads", "serializable", "--nemesis", "partition",
                               "--nemesis-interval", "5", "--time-limit", "20", "--request-timeout", "1",
                               "--seed", "2")
    res = json.loads((run / "results.json").read_text())
    assert rc == 1 and line["verdict"] == "invalid", res.get("anomaly_types")
    assert res["anomaly_types"] == ["nonlinearizable"]
    html = (run / "report.html").read_text()
    assert "nonlinearizable" in html and "counterexample" in html.lower()


@pytest.mark.skipif(not can_run_docker(), reason="no Docker daemon answers")
def test_etcd_on_docker_is_linearizable_under_kills(tmp_path):
    rc, line, run = wrack_test(tmp_path, "--backend", "docker", "--nodes", "3", "--nemesis", "kill",
                               "--nemesis-interval", "4", "--time-limit", "10", "--seed", "3", timeout=900)
    res = json.loads((run / "results.json").read_text())
    assert rc == 0 and line["verdict"] == "valid", res.get("anomaly_types")
    test = json.loads((run / "test.json").read_text())
    assert sum(n for k, n in test["ops"].items() if k.endswith(":ok")) > 100, test["ops"]
