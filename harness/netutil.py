"""Loopback port helpers of the tests and the benchmarks: a free port to listen on, whether
something listens on a port, and waiting until something does (or its process exits)."""

from __future__ import annotations

import socket
import subprocess
import time


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on at `host` now (the kernel's pick; free until someone binds it)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def port_open(port: int, host: str = "127.0.0.1", timeout: float = 1.0) -> bool:
    """Whether a TCP connection to `host:port` succeeds within `timeout` seconds."""
    try:
        socket.create_connection((host, port), timeout).close()
    except OSError:
        return False
    return True


def wait_port(host: str, port: int, timeout: float, proc: subprocess.Popen | None = None) -> None:
    """Return once `host:port` accepts a connection. RuntimeError if `proc` exits first,
    TimeoutError after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not port_open(port, host, 0.5):
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"process {proc.pid} exited with {proc.returncode} before listening on {host}:{port}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"nothing listens on {host}:{port} after {timeout} s")
        time.sleep(0.05)
