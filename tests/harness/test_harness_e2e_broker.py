"""End to end on the local backend with the real broker and real clients (confluent-kafka):
partitions and kills against the safe configuration are valid; acks=1 with leader faults
is valid by its policy (lost or unseen writes allowed); a SIGKILLed harness (driving
kafka-python) leaves a history that `wrack analyze` checks; the log workload is
linearizable; power loss (LazyFS mounted under every broker's data dir by
`nemesis.schedule.prepare`) drops unsynced data and is valid by its policy; clock skew
(libfaketime preloaded into every broker) is recorded, plotted and valid under the strict
policy. No run prints librdkafka's logging. Root only.
About 5 minutes."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from harness_testlib import run_wrack, sigkilled_run, wrack_bin

from clusters.testing import can_run_local

pytestmark = [
    pytest.mark.root, pytest.mark.slow,
    pytest.mark.skipif(not can_run_local(), reason="needs root and network namespaces"),
]


def wrack_test(tmp_path: Path, *args: str, timeout: float = 400) -> tuple[int, dict, Path]:
    p = run_wrack(["test", "--results", str(tmp_path), "--quiet", "--json", *args], timeout)
    assert p.returncode != 255 and p.stdout.strip(), f"rc {p.returncode}\n{p.stdout}\n{p.stderr}"
    assert not re.search(r"(?m)^%\d\|", p.stderr), f"librdkafka logged to stderr:\n{p.stderr[-2000:]}"
    line = json.loads(p.stdout.strip().splitlines()[-1])
    return p.returncode, line, Path(line["run"])


def nemesis_events(run: Path) -> list[dict]:
    return [e for e in map(json.loads, (run / "history.jsonl").read_text().splitlines())
            if e["process"] == "nemesis"]


def ok_ops(run: Path, f: str | None = None) -> int:
    n = 0
    with open(run / "history.jsonl", "rb") as fh:
        for raw in fh:
            ev = json.loads(raw)
            if ev["type"] == "ok" and ev["process"] != "nemesis" and (f is None or ev["f"] == f):
                n += 1
    return n


def test_safe_configuration_is_valid_under_partitions_and_kills(tmp_path):
    rc, line, run = wrack_test(tmp_path, "--nodes", "5", "--workload", "queue", "--acks", "all", "--min-isr", "2",
                               "--nemesis", "partition,kill", "--nemesis-interval", "4", "--time-limit", "20",
                               "--rate", "80", "--seed", "11")
    res = json.loads((run / "results.json").read_text())
    assert rc == 0 and line["verdict"] == "valid", (res.get("anomaly_types"), res["anomalies"].get("no-recovery"))
    assert res["policy"]["name"] == "strict" and res["allowed"] == []
    live = res["liveness"]  # every key took a write and a read again after the final heal
    assert live["valid"] is True and len(live["recovered_keys"]) == 4
    assert live["availability"]["outside_faults"]["sends"]["completed"] > 0
    assert ok_ops(run, "send") >= 50 and ok_ops(run, "poll") >= 20
    nem = [json.loads(x) for x in (run / "history.jsonl").read_text().splitlines() if '"nemesis"' in x]
    assert {e["f"] for e in nem} & {"start-partition", "kill"}, "no fault was injected"
    assert all((run / "nodes" / f"n{i}" / "broker.log").stat().st_size > 0 for i in range(1, 6))


def test_acks1_with_leader_faults_is_valid_by_policy(tmp_path, record_property):
    # leader faults are the aggressive ones for acks=1: a killed or isolated leader may have
    # acknowledged records its successor never had. Whether a short run loses any depends on
    # timing; what must hold every time: the policy is acks1, every anomaly found is one it
    # allows, the verdict is valid, and the report marks lossy anomalies as allowed.
    rc, line, run = wrack_test(tmp_path, "--nodes", "3", "--workload", "queue", "--acks", "1", "--topics", "1",
                               "--partitions", "3", "--nemesis", "partition-leader,kill-leader",
                               "--nemesis-interval", "3", "--time-limit", "25", "--rate", "150",
                               "--concurrency", "2n", "--seed", "5")
    res = json.loads((run / "results.json").read_text())
    assert res["policy"]["name"] == "acks1" and {"lost-write", "unseen"} <= set(res["allowed"])
    assert rc == 0 and line["verdict"] == "valid", res.get("bad_anomaly_types") or res.get("anomaly_types")
    assert set(res["anomaly_types"]) <= set(res["allowed"])
    lossy = sorted(set(res["anomaly_types"]) & {"lost-write", "unseen"})
    record_property("lossy_anomalies", ",".join(lossy) or "none")
    html = (run / "report.html").read_text()
    assert "acks=1: the leader acknowledges a record before any follower has it" in html
    if lossy:
        assert "allowed by the loss rules" in html and "not allowed" not in html


def test_sigkilled_harness_with_real_clients_is_checkable(tmp_path):
    # the alternative client library (kafka-python) drives this run
    with sigkilled_run(tmp_path, "--nodes", "3", "--workload", "queue", "--nemesis", "partition",
                       "--nemesis-interval", "3", "--time-limit", "60", "--rate", "100", "--client", "kafka-python",
                       min_history=20_000, timeout=120) as run:
        p = subprocess.run([wrack_bin(), "analyze", str(run), "--json"], capture_output=True, text=True, timeout=120)
        assert p.returncode in (0, 1, 2), p.stderr
        line = json.loads(p.stdout)
        res = json.loads((run / "results.json").read_text())
        assert res["incomplete_run"] is True and "final-read-deadline" in res["policy"]["name"]
        assert line["history"]["ok"] > 20
        # the safe configuration, killed before its final read: still valid (unseen allowed, nothing else)
        assert line["verdict"] == "valid", res.get("anomaly_types")
        assert (run / "report.html").is_file()


def test_log_workload_is_linearizable_under_partitions(tmp_path):
    rc, line, run = wrack_test(tmp_path, "--nodes", "3", "--workload", "log", "--nemesis", "partition",
                               "--nemesis-interval", "3", "--time-limit", "12", "--rate", "60", "--seed", "3")
    res = json.loads((run / "results.json").read_text())
    assert rc == 0 and line["verdict"] == "valid", res.get("anomaly_types")
    assert res["checker"] == "linearizable" and ok_ops(run, "send") > 20 and ok_ops(run, "read") > 20


def test_power_loss_drops_unsynced_data_and_is_valid_by_its_policy(tmp_path):
    # without a flush per message every power loss drops segment data that only the LazyFS
    # cache held; the policy allows what losing committed records shows only where more than
    # min ISR - 1 replicas of a partition lost data at once (tests/harness/test_harness_e2e_policy.py).
    # At 80 ops/s the free thread that takes an op is random: with the default 64 send lanes
    # the 3 consuming threads got about 40 ops in 12 s (18 ok polls once in CI); 8 lanes leave them a third
    rc, line, run = wrack_test(tmp_path, "--nodes", "3", "--workload", "queue", "--nemesis", "power-loss",
                               "--nemesis-interval", "3", "--time-limit", "12", "--rate", "80", "--in-flight", "8",
                               "--seed", "1")
    res = json.loads((run / "results.json").read_text())
    d = res["policy"]["durability"]
    assert d["observed"] and d["losses"] and all(x["f"] == "power-loss" for x in d["losses"])
    assert res["policy"]["name"] == ("power-loss-unflushed" if d["exceeded"] else "strict"), res["policy"]
    assert rc == 0 and line["verdict"] == "valid", res.get("bad_anomaly_types") or res.get("anomaly_types")
    nem = nemesis_events(run)
    losses = [e["value"] for e in nem if e["f"] == "power-loss"]
    assert losses, [e["f"] for e in nem]
    lost_files = [f["path"] for v in losses for node in v["nodes"] for f in v["lost"][node]["files"]]
    assert any(p.startswith("/queue") and p.endswith(".log") for p in lost_files), lost_files  # segment data
    assert any(e["f"] == "lazyfs-sync" and e["value"].get("final") for e in nem)  # healed: pass-through
    assert ok_ops(run, "send") >= 20 and ok_ops(run, "poll") >= 20
    assert list((run / "nodes" / "n1" / "data").glob("queue*-*/*.log"))  # collected through the mount
    assert "Lossy shutdowns" in (run / "report.html").read_text()


def test_clock_skew_is_recorded_plotted_and_valid(tmp_path):
    rc, line, run = wrack_test(tmp_path, "--nodes", "3", "--workload", "queue", "--nemesis", "clock",
                               "--nemesis-interval", "3", "--time-limit", "12", "--rate", "80", "--seed", "1")
    res = json.loads((run / "results.json").read_text())
    assert res["policy"]["name"] == "strict" and res["allowed"] == []
    assert rc == 0 and line["verdict"] == "valid", res.get("anomaly_types")
    clock = [e for e in nemesis_events(run) if e["f"].endswith("-clock")]
    assert any(e["f"] == "start-clock" for e in clock) and clock[-1]["f"] == "stop-clock"
    for e in clock:  # every broker runs under the preload; every node's clock was sampled
        v = e["value"]
        assert v["preloaded"] == {"n1": True, "n2": True, "n3": True} and set(v["clock-offsets"]) == {"n1", "n2", "n3"}
        for node, want in (v.get("offsets_set") or {}).items():  # a bump shows on the node's clock
            assert abs(v["clock-offsets"][node] - want) < 0.05, (node, want, v["clock-offsets"])
    assert all(abs(o) < 0.05 for o in clock[-1]["value"]["clock-offsets"].values())  # reset at the end
    assert (run / "plots" / "clock-skew.png").stat().st_size > 5_000
    logs = (run / "nodes" / "n1" / "broker.log").read_text()
    assert logs.strip(), "the broker under the preload wrote no log"


def test_a_cluster_that_cannot_recover_is_invalid_with_no_recovery(tmp_path):
    # one node whose broker, once restarted, never serves again (a test-only switch): after
    # the final heal no key takes a write, so the run is invalid whatever the policy allows
    exe = str(Path(wrack_bin()).parent / "wrack-broker")
    rc, line, run = wrack_test(tmp_path, "--nodes", "1", "--rf", "1", "--min-isr", "1", "--topics", "1",
                               "--nemesis", "restart", "--nemesis-interval", "4", "--time-limit", "8",
                               "--recovery-time-limit", "4", "--final-time-limit", "2", "--seed", "3",
                               "--broker-command", f"{exe} --override wrack.test.never.serve.after.restart=true")
    res = json.loads((run / "results.json").read_text())
    assert rc == 1 and line["verdict"] == "invalid" and "no-recovery" in res["anomaly_types"]
    assert {a["key"] for a in res["anomalies"]["no-recovery"]} == {"queue0-0", "queue0-1"}
    assert all(a["sends_tried"] > 0 for a in res["anomalies"]["no-recovery"])
    assert res["liveness"]["valid"] is False and res["liveness"]["recovered_keys"] == []
    assert "Did not recover" in (run / "report.html").read_text()


def test_losing_the_active_controller_moves_it_and_sends_go_on(tmp_path):
    # three voters on n1-n3 (the default for 5 nodes): the nemesis strikes whichever is
    # active; another takes over, and every fault is followed by an acknowledged send.
    # Seed 33's schedule (each package on its own 12 s clock) kills the active controller at
    # about 9 s, starts it at 15 s, then isolates the (new) one at 18 s and heals at 28 s:
    # both packages in one run (two runs of 38 s before)
    rc, line, run = wrack_test(tmp_path, "--nodes", "5", "--nemesis", "kill-controller,partition-controller",
                               "--nemesis-interval", "12", "--time-limit", "30", "--seed", "33")
    res = json.loads((run / "results.json").read_text())
    assert rc == 0 and line["verdict"] == "valid", res.get("anomaly_types")
    events = nemesis_events(run)
    struck = [e for e in events if e["f"] in ("kill", "start-partition")]
    assert {e["f"] for e in struck} == {"kill", "start-partition"}, [e["f"] for e in events]
    controllers = [e["value"]["controller"] for e in events if e["f"] == "cluster-state"]
    assert len({c for c in controllers if c}) >= 2, f"the active controller never moved: {controllers}"
    after = res["liveness"]["first_ok_send_after_fault"]
    assert len(after) == len(struck) and all(a["seconds"] is not None for a in after), after
    assert res["liveness"]["valid"] is True
