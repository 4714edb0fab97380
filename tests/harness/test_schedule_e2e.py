"""End to end on the local backend: a run writes schedule.json, and `wrack test --schedule`
replays an edited one: the same fault ops, in order, at their times, roles resolved again.
Bad input costs no cluster: a broken schedule file and shrinking a valid run are one line,
exit 254. Root only; two short runs, about 2 minutes."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from harness_testlib import run_wrack

from clusters.testing import can_run_local

pytestmark = [
    pytest.mark.root, pytest.mark.slow,
    pytest.mark.skipif(not can_run_local(), reason="needs root and network namespaces"),
]

SHORT = ("--nodes", "3", "--nemesis-interval", "3", "--rate", "80", "--in-flight", "4", "--final-time-limit", "10")


def wrack(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return run_wrack(list(args), timeout)


def played(run: Path) -> list[dict]:
    return json.loads((run / "schedule.json").read_text())["actions"]


def test_a_run_writes_its_schedule_and_an_edited_one_replays(tmp_path):
    p = wrack("test", "--results", str(tmp_path), "--quiet", "--json", *SHORT, "--nemesis", "kill-leader,partition",
              "--time-limit", "12", "--seed", "5")
    assert p.returncode in (0, 1, 2), p.stderr[-2000:]
    run = Path(json.loads(p.stdout.strip().splitlines()[-1])["run"])
    sched = json.loads((run / "schedule.json").read_text())
    assert sched["packages"] == ["kill-leader", "partition"] and sched["seed"] == 5
    assert sched["options"]["time_limit"] == 12.0 and sched["options"]["nodes"] == 3
    acts = sched["actions"]
    assert len(acts) >= 3 and {a["package"] for a in acts} == {"kill-leader", "partition"}
    kills = [a for a in acts if a["f"] == "kill"]
    assert kills and all(a["value"]["role"] == "leader" for a in kills)  # named by role...
    assert any(a["ok"] and len(a["nodes"]) == 1 for a in kills)  # ...and by the node it was
    kills = [a for a in kills if a["ok"]]

    # keep the first kill of the leader and the start that undoes it, moved to 2 s and 5 s
    first = acts.index(kills[0])
    undo = next(a for a in acts[first + 1:] if a["f"] == "start")
    edited = {**sched, "actions": [{**kills[0], "at_s": 2.0}, {**undo, "at_s": 5.0}],
              "options": {**sched["options"], "time_limit": 8.0}}
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(edited))
    p = wrack("test", "--results", str(tmp_path), "--quiet", "--json", "--name", "replay", *SHORT,
              "--schedule", str(path))
    assert p.returncode in (0, 1, 2), p.stderr[-2000:]
    replay = Path(json.loads(p.stdout.strip().splitlines()[-1])["run"])
    test = json.loads((replay / "test.json").read_text())
    assert test["options"]["time_limit"] == 8.0 and test["seed"] == 5  # the file's options and seed
    again = played(replay)
    assert [(a["package"], a["f"], a["value"]) for a in again] == [
        (a["package"], a["f"], a["value"]) for a in edited["actions"]]
    assert all(b["at_s"] >= a["at_s"] - 0.05 and b["at_s"] < a["at_s"] + 3 for a, b in zip(edited["actions"], again,
                                                                                           strict=True))
    assert len(again[0]["nodes"]) == 1  # the leader, resolved when it played
    events = [json.loads(x) for x in (replay / "history.jsonl").read_text().splitlines()]
    faults = [e["f"] for e in events if e["process"] == "nemesis" and e["f"] in ("kill", "start")]
    assert faults[:2] == ["kill", "start"]

    if p.returncode == 0:  # a valid run has no bug to shrink: one line, exit 254
        s = wrack("shrink", str(replay), "--json")
        assert s.returncode == 254 and "not invalid" in s.stderr and len(s.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("text, says", [("[1, 2", "not a schedule file (JSON)"),
                                        ('{"actions": [{"package": "kill", "f": "nuke"}]}', "unknown fault 'nuke'")])
def test_a_bad_schedule_file_is_one_line_and_no_cluster(tmp_path, text, says):
    bad = tmp_path / "bad.json"
    bad.write_text(text)
    p = wrack("test", "--results", str(tmp_path), "--schedule", str(bad), timeout=60)
    assert p.returncode == 254 and says in p.stderr and len(p.stderr.strip().splitlines()) == 1
    assert not any(tmp_path.glob("*/*/test.json"))  # nothing was created
