"""`wrack cluster up|status|down`: exit codes and one-line errors, state seen from other processes."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from clusters import local
from clusters.testing import can_run_local

WRACK = str(Path(sys.executable).parent / "wrack")


def wrack(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([WRACK, *args], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("args", [["cluster", "up", "--nodes", "x"], ["cluster", "up", "--backend", "nope"],
                                  ["cluster", "frob"], ["cluster", "up", "--name", "Bad Name"],
                                  ["cluster", "down", "--name", "no-such-cluster-zz"],
                                  ["cluster", "up", "--backend", "ssh", "--inventory", "/nonexistent.yaml"]])
def test_bad_arguments_exit_254_with_one_line(args):
    r = wrack(*args)
    assert r.returncode == 254, r.stderr
    assert "Traceback" not in r.stderr
    assert "error: " in r.stderr.strip().splitlines()[-1]


@pytest.mark.root
def test_up_status_down_json():
    if not can_run_local():
        pytest.skip("needs root")
    name = f"cli{uuid.uuid4().hex[:6]}"
    try:
        r = wrack("cluster", "up", "--name", name, "--nodes", "2", "--json")
        assert r.returncode == 0, r.stderr
        up = json.loads(r.stdout)
        assert up["name"] == name and len(up["nodes"]) == 2
        r = wrack("cluster", "status", "--name", name, "--json")
        st = json.loads(r.stdout)
        assert r.returncode == 0 and [n["address"] for n in st["nodes"]] == [n["address"] for n in up["nodes"]]
        assert all(n["up"] for n in st["nodes"])
        assert wrack("cluster", "up", "--name", name).returncode == 254  # exists already
        assert name in wrack("cluster", "status").stdout
        assert wrack("cluster", "down", "--name", name).returncode == 0
        assert wrack("cluster", "status", "--name", name).returncode == 254
    finally:
        local.force_down(name)
