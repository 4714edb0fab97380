"""Leave no trace: cluster up/fault/down cycles, some with the harness SIGKILLed and
`wrack cluster down --force` after it, some interrupted with SIGINT (the harness heals
itself), leave no namespace, link, mount, iptables rule, process or directory behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from clusters import local
from clusters.testing import can_run_local

pytestmark = [pytest.mark.root]

HERE = Path(__file__).resolve().parent
WRACK = str(Path(sys.executable).parent / "wrack")


def snapshot() -> dict[str, object]:
    return {
        "host_mounts": sorted(line for line in Path("/proc/mounts").read_text().splitlines()
                              if "wrack" in line or "fuse" in line),
        "iptables": subprocess.run(["iptables-save"], capture_output=True, text=True).stdout.count("\n-A "),
    }


def cluster_pids(name: str) -> list[int]:
    inodes = {local._netns_inode(ns) for ns in local._netns_list() if ns.startswith(f"wrack-{name}-")}
    return local._pids_in_netns({i for i in inodes if i is not None})


def assert_gone(name: str, pids: list[int]) -> None:
    assert not [ns for ns in local._netns_list() if ns.startswith(f"wrack-{name}-")]
    assert f"wrack:{name}" not in subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    alive = []
    for p in pids:
        try:
            st = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if st != "Z":
            alive.append(p)
    assert alive == []
    assert not (local.STATE_ROOT / name).exists() and not (local.DATA_ROOT / name).exists()


def harness(name: str, mode: str) -> subprocess.Popen[str]:
    p = subprocess.Popen([sys.executable, str(HERE / "leak_harness.py"), name, mode], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, cwd=str(HERE.parent.parent),
                         env={**os.environ, "PYTHONPATH": str(HERE.parent.parent)})
    assert p.stdout is not None
    line = p.stdout.readline()
    assert line.strip() == "ready", p.stderr.read() if p.stderr else ""
    return p


def test_twenty_cycles_leave_nothing_behind():
    if not can_run_local():
        pytest.skip("needs root")
    before = snapshot()
    prefix = f"lk{uuid.uuid4().hex[:4]}"
    for i in range(20):
        name = f"{prefix}-{i}"
        try:
            if i % 4 == 1:  # the harness dies with SIGKILL mid-fault: down --force cleans up
                p = harness(name, "wait")
                pids = cluster_pids(name)
                assert len(pids) >= 6  # 3 holders + 3 brokers at least
                p.kill()
                p.wait(10)
                r = subprocess.run([WRACK, "cluster", "down", "--force", "--name", name],
                                   capture_output=True, text=True, timeout=60)
                assert r.returncode == 0, r.stderr
            elif i % 4 == 3:  # SIGINT: the harness heals and tears down by itself
                p = harness(name, "wait")
                pids = cluster_pids(name)
                p.send_signal(signal.SIGINT)
                p.wait(30)
                assert p.returncode != 0
            else:  # a normal run, then the CLI on a second cluster
                p = harness(name, "normal")
                pids = cluster_pids(name)
                assert p.wait(60) == 0
                r = subprocess.run([WRACK, "cluster", "up", "--name", name, "--nodes", "3"],
                                   capture_output=True, text=True, timeout=60)
                assert r.returncode == 0, r.stderr
                pids += cluster_pids(name)
                r = subprocess.run([WRACK, "cluster", "down", "--name", name], capture_output=True,
                                   text=True, timeout=60)
                assert r.returncode == 0, r.stderr
            assert_gone(name, pids)
        finally:
            local.force_down(name)
    assert snapshot() == before


def test_sigint_heals_then_second_signal_forces(tmp_path):
    if not can_run_local():
        pytest.skip("needs root")
    name = f"si{uuid.uuid4().hex[:6]}"
    try:
        p = harness(name, "wait")
        pids = cluster_pids(name)
        p.send_signal(signal.SIGTERM)
        p.send_signal(signal.SIGTERM)
        p.wait(30)
        assert_gone(name, pids)
    finally:
        local.force_down(name)
