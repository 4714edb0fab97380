"""The real `wrack-broker` on a local and a docker cluster: configured, started, reachable, killed, restarted.
Skipped while the broker is the placeholder that refuses to start."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from suites.wrack.db import BrokerDB, BrokerOptions

pytestmark = pytest.mark.root

BROKER = str(Path(sys.executable).parent / "wrack-broker")


def broker_available() -> bool:
    exe = BROKER if Path(BROKER).exists() else shutil.which("wrack-broker")
    if exe is None:
        return False
    r = subprocess.run([exe, "--help"], capture_output=True, text=True, timeout=30)
    return r.returncode == 0 and "--config" in r.stdout + r.stderr


def test_broker_lifecycle_on_real_nodes(make_backend_cluster, tmp_path):
    if not broker_available():
        pytest.skip("wrack-broker is not built yet")
    c = make_backend_cluster(1)
    # local nodes share the host's venv; containers have the project's wheel on PATH
    command = [BROKER] if c.backend == "local" else ["wrack-broker"]
    db = BrokerDB(c, BrokerOptions(command=command, replication_factor=1, min_insync_replicas=1))
    n = c.nodes[0]
    db.setup(n)
    db.start(n)
    db.wait_ready(n, timeout=30)
    db.kill(n)
    assert not db.running(n)
    db.start(n)
    db.wait_ready(n, timeout=30)
    db.stop(n)
    assert not db.running(n)
    out = db.collect(n, tmp_path / "run")
    assert (out / "broker.log").exists()
