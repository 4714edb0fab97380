"""End to end: the expected-anomaly policy computed from a real run's fault history.

Power loss of one node at a time (`--nemesis power-loss`: SIGKILL, LazyFS drops the
unsynced data, restart) against the safe configuration (acks=all, min ISR 2, RF 3, three
nodes, so every node holds every partition) is judged strictly: the controller's ISR changes
(node logs) show each lossy replica leaving the ISR and coming back before the next power
loss (the cluster-state observer's 0.5 s polls may miss that 70 ms spell), so at most
min ISR - 1 = 1 replica of a partition lost data at once, the ELR promises no loss, and
the run must be valid with nothing allowed, and every replica's log, read after the final
phase, agrees with the others (checkers/replicas.py). `wrack analyze` recomputes the same policy from
the stored history, also from a copy without the observer's events (an old run). Root only;
about 1.5 minutes."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from harness_testlib import run_wrack, wrack_bin

from clusters.testing import can_run_local
from suites.wrack.nodelogs import read_node_events

pytestmark = [
    pytest.mark.root, pytest.mark.slow,
    pytest.mark.skipif(not can_run_local(), reason="needs root and network namespaces"),
]

# seed 33's schedule: power losses about 9 s and 27 s into the run, 18 s apart (the first
# replica is fenced after the 9 s broker session timeout, then catches up and rejoins)
ARGS = ["--nodes", "3", "--nemesis", "power-loss", "--nemesis-interval", "12", "--time-limit", "30",
        "--seed", "33"]


def events(run: Path) -> list[dict]:
    return [json.loads(x) for x in (run / "history.jsonl").read_text().splitlines() if '"nemesis"' in x]


def test_power_loss_of_one_node_at_a_time_is_judged_strictly(tmp_path):
    p = run_wrack(["test", "--results", str(tmp_path), "--quiet", "--json", *ARGS], 400)
    assert p.stdout.strip(), f"rc {p.returncode}\n{p.stderr[-3000:]}"
    line = json.loads(p.stdout.strip().splitlines()[-1])
    run = Path(line["run"])
    res = json.loads((run / "results.json").read_text())
    pol = res["policy"]
    d = pol["durability"]
    assert d["observed"] and d["bound"] == 1
    assert len(d["losses"]) >= 2 and {x["f"] for x in d["losses"]} == {"power-loss"}, d["losses"]
    assert not d["exceeded"] and set(d["peak"].values()) == {1}, d
    assert pol["name"] == "strict" and pol["rule"].startswith("strict: lossy shutdowns within") and res["allowed"] == []
    assert any("within min.insync.replicas-1 = 1" in n for n in pol["notes"]), pol["notes"]
    assert p.returncode == 0 and line["verdict"] == "valid", (res.get("anomaly_types"), res.get("anomaly_counts"))

    nem = events(run)
    states = [e["value"] for e in nem if e["f"] == "cluster-state"]
    keys = {"queue0-0", "queue0-1", "queue1-0", "queue1-1"}
    assert set(states[0]["partitions"]) == keys and states[0]["controller"] in ("n1", "n2", "n3")
    assert all(sorted(v["replicas"]) == ["n1", "n2", "n3"] for v in states[0]["partitions"].values())
    assert all(sorted(p["isr"]) == ["n1", "n2", "n3"] for p in states[-1]["partitions"].values())
    # the controller's ISR changes (node logs, exact times): each lossy replica left every ISR
    # after its fault and was back before the next one (a spell the 0.5 s polls may miss)
    ne = read_node_events(run, json.loads((run / "test.json").read_text()))
    assert ne.clock == "monotonic"
    changes = [e for e in ne.events if e.get("event") == "partition-change"]
    for x, nxt in zip(d["losses"], d["losses"][1:] + [None], strict=True):
        t, until = x["time_s"] * 1e9, nxt["time_s"] * 1e9 if nxt else float("inf")
        for k in keys:
            seen = [x["node"] in e["isr"] for e in changes if e["tp"] == k and t < e["time"] < until]
            assert False in seen and seen[-1] is True, (x, k, seen)
    obs = json.loads((run / "test.json").read_text())["observer"]
    assert obs["events"] == len(states) >= 1 and obs["polls"] > obs["failed"] and obs["whole_after_s"] is not None
    assert "Lossy shutdowns" in (run / "report.html").read_text()
    # after the final phase every replica's log was read and compared: they agree below the HWMs
    (rs,) = [e["value"] for e in nem if e["f"] == "replica-state"]
    assert set(rs["partitions"]) == keys and not rs["unread"], rs
    assert all(len(v["replicas"]) == 3 and v["differ"] == [] for v in rs["partitions"].values()), rs
    assert res["replicas"] == {"valid": True, "checked": True, "partitions": 4, "replicas_read": 12, "unread": {},
                               "read_s": rs["read_s"]}

    # wrack analyze recomputes it from the stored history; without the observer's events
    # (an old run) a replica counts as back once it could have rejoined: still strict
    again = subprocess.run([wrack_bin(), "analyze", str(run), "--json"], capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-2000:]
    assert json.loads((run / "results.json").read_text())["policy"] == pol
    old = tmp_path / "old-run"
    shutil.copytree(run, old, ignore=shutil.ignore_patterns("nodes"))
    (old / "history.jsonl").write_text("".join(
        x + "\n" for x in (run / "history.jsonl").read_text().splitlines() if '"cluster-state"' not in x))
    subprocess.run([wrack_bin(), "analyze", str(old), "--json"], capture_output=True, text=True, timeout=300)
    old_pol = json.loads((old / "results.json").read_text())["policy"]
    assert old_pol["name"] == "strict" and not old_pol["durability"]["observed"]
    assert len(old_pol["durability"]["losses"]) == len(d["losses"])
