"""A local cluster of `wrack-broker` processes on loopback for the suites.

`LocalCluster(n, settings)` starts n nodes on 127.0.0.1, each a broker and a voter of the
controller quorum (combined mode), on distinct random ports in 20000-60000 with their own
log dirs under one temp dir; it returns once every client port accepts connections (a
broker opens it once registered and unfenced). `close()` kills every process and removes
the temp dir, keeping the broker logs in `keep_logs` if given. Use it as a context manager.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HOST = "127.0.0.1"

# What both suites expect of the broker (kafka-python's own test config and the issue's
# measurements): fast group rebalances, 4 partitions for auto-created topics.
SUITE_SETTINGS = {
    "num.partitions": "4",
    "auto.create.topics.enable": "true",
    "group.min.session.timeout.ms": "1000",
    "group.initial.rebalance.delay.ms": "0",
    "wrack.log.level": "WARNING",
}


def pick_port(taken: set[int], lo: int = 20000, hi: int = 60000) -> int:
    """A random port in [lo, hi) that is not in `taken` and can be bound now."""
    while True:
        port = random.randrange(lo, hi)
        if port in taken:
            continue
        with socket.socket() as s:
            try:
                s.bind((HOST, port))
            except OSError:
                continue
        taken.add(port)
        return port


def wait_port(port: int, proc: subprocess.Popen, timeout: float) -> None:
    """Return once HOST:port accepts; RuntimeError if `proc` exits, TimeoutError after `timeout` s."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection((HOST, port), 0.5).close()
            return
        except OSError:
            pass
        if proc.poll() is not None:
            raise RuntimeError(f"broker exited with {proc.returncode} before listening on {HOST}:{port}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"nothing listens on {HOST}:{port} after {timeout} s")
        time.sleep(0.1)


class LocalCluster:
    """n combined broker+controller processes on loopback (see the module docstring)."""

    def __init__(self, nodes: int, settings: dict[str, str] | None = None, keep_logs: Path | None = None) -> None:
        self.nodes = nodes
        self.settings = {**SUITE_SETTINGS, **(settings or {})}
        self.keep_logs = keep_logs
        self.base = Path(tempfile.mkdtemp(prefix="wrack-compat-"))
        taken: set[int] = set()
        self.ports = [pick_port(taken) for _ in range(nodes)]
        self.controller_ports = [pick_port(taken) for _ in range(nodes)]
        self.procs: list[subprocess.Popen] = []

    @property
    def bootstrap(self) -> str:
        return ",".join(f"{HOST}:{p}" for p in self.ports)

    def node_args(self, i: int) -> list[str]:
        voters = ",".join(f"{j}@{HOST}:{p}" for j, p in enumerate(self.controller_ports))
        props = {"node.id": str(i), "process.roles": "broker,controller",
                 "listeners": f"PLAINTEXT://{HOST}:{self.ports[i]},CONTROLLER://{HOST}:{self.controller_ports[i]}",
                 "controller.quorum.voters": voters, "log.dirs": str(self.base / f"n{i}"),
                 "wrack.log.file": "", **self.settings}
        args = [sys.executable, "-m", "broker.main"]
        for k, v in props.items():
            args += ["--override", f"{k}={v}"]
        return args

    def start(self, timeout: float = 60.0) -> LocalCluster:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        for i in range(self.nodes):
            with open(self.base / f"n{i}.out", "wb") as out:
                self.procs.append(subprocess.Popen(self.node_args(i), cwd=ROOT, env=env, stdout=out,
                                                   stderr=subprocess.STDOUT, start_new_session=True))
        for port, proc in zip(self.ports, self.procs, strict=True):
            wait_port(port, proc, timeout)
        return self

    def crashed(self) -> list[int]:
        """Node ids whose process exited while it should be serving."""
        return [i for i, p in enumerate(self.procs) if p.poll() is not None]

    def close(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except OSError:
                    p.kill()
            p.wait(10)
        if self.keep_logs is not None:
            self.keep_logs.mkdir(parents=True, exist_ok=True)
            for f in self.base.glob("n*.out"):
                shutil.copy(f, self.keep_logs / f.name)
        shutil.rmtree(self.base, ignore_errors=True)

    def __enter__(self) -> LocalCluster:
        try:
            return self.start()
        except BaseException:
            self.close()
            raise

    def __exit__(self, *exc: object) -> None:
        self.close()
