"""`SSHNode`: a Node reached over SSH with paramiko (the `ssh` backend and `--transport ssh`).

Contracts
- Host keys are verified against `known_hosts` (RejectPolicy: an unknown or changed key
  raises `NodeError` naming the host); `insecure=True` (an explicit flag) accepts any key.
- One paramiko transport per node, reconnected when it died (after a partition, say).
- `exec` reads stdout and stderr concurrently to EOF before the exit status (paramiko's
  window deadlock), and enforces the deadline remotely (`timeout -s KILL`) and locally
  (closing the channel); commands run as root: prefixed with `sudo -n` when `user` is not root.
"""

from __future__ import annotations

import os
import shlex
import socket
import threading
import time
from collections.abc import Mapping
from typing import Any

from clusters.node import Command, ExecResult, Node, NodeError, NodeTimeout, command_str, env_prefix
from clusters.wheel import build_wheel


class SSHNode(Node):
    """A node behind sshd; see the module docstring."""

    def __init__(self, name: str, address: str, *, user: str = "root", port: int = 22,
                 key_file: str | None = None, known_hosts: str | None = None, insecure: bool = False,
                 root: str = "/var/lib/wrack", connect_timeout: float = 10.0):
        super().__init__(name, address, root)
        self.user = user
        self.port = port
        self.key_file = key_file
        self.known_hosts = known_hosts
        self.insecure = insecure
        self.connect_timeout = connect_timeout
        self._client: Any = None
        self._lock = threading.Lock()

    def _connect(self) -> Any:
        # lazy: paramiko (harness extra) takes ~0.15 s; clusters.local imports this module, nsenter nodes never connect
        import paramiko

        with self._lock:
            c = self._client
            if c is not None and c.get_transport() is not None and c.get_transport().is_active():
                return c
            client = paramiko.SSHClient()
            if self.insecure:
                client.set_missing_host_key_policy(paramiko.AutoAddPolicy())
            else:
                if self.known_hosts:
                    client.load_host_keys(self.known_hosts)
                else:
                    client.load_system_host_keys()
                client.set_missing_host_key_policy(paramiko.RejectPolicy())
            try:
                sock = socket.create_connection((self.address, self.port), timeout=self.connect_timeout)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # no 40 ms delayed-ACK stalls
                client.connect(self.address, port=self.port, username=self.user, key_filename=self.key_file,
                               sock=sock,
                               timeout=self.connect_timeout, banner_timeout=self.connect_timeout,
                               auth_timeout=self.connect_timeout, allow_agent=False, look_for_keys=False)
            except paramiko.SSHException as e:
                client.close()
                raise NodeError(f"{self.name}: ssh to {self.user}@{self.address}:{self.port} refused: {e}") from e
            except OSError as e:
                client.close()
                raise NodeError(f"{self.name}: cannot reach {self.address}:{self.port}: {e}") from e
            t = client.get_transport()
            if t is not None:
                t.set_keepalive(30)
            self._client = client
            return client

    def close(self) -> None:
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None

    def exec(self, cmd: Command, *, timeout: float = 60.0, env: Mapping[str, str] | None = None,
             check: bool = True, input: bytes | None = None) -> ExecResult:
        argv: list[str] = ["sh", "-c", cmd] if isinstance(cmd, str) else list(cmd)
        full = ["timeout", "-s", "KILL", str(max(1, int(timeout + 0.999))), *env_prefix(env), *argv]
        line = shlex.join(full)
        if self.user != "root":
            line = "sudo -n " + line
        client = self._connect()
        try:
            chan = client.get_transport().open_session(timeout=self.connect_timeout)
        except Exception as e:  # noqa: BLE001 - a dead transport: reconnect once
            self.close()
            client = self._connect()
            try:
                chan = client.get_transport().open_session(timeout=self.connect_timeout)
            except Exception as e2:  # noqa: BLE001
                raise NodeError(f"{self.name}: ssh session failed: {e2}") from e
        started = time.monotonic()
        chan.exec_command(line)
        out: list[bytes] = []
        err: list[bytes] = []

        def pump_err() -> None:
            f = chan.makefile_stderr("rb")
            while True:
                b = f.read(65536)
                if not b:
                    break
                err.append(b)

        t = threading.Thread(target=pump_err, daemon=True)
        t.start()
        if input is not None:
            chan.sendall(input)
        chan.shutdown_write()
        deadline = time.monotonic() + timeout + 5
        chan.settimeout(1.0)
        while True:
            try:
                b = chan.recv(65536)
            except TimeoutError:
                if time.monotonic() > deadline:
                    chan.close()
                    raise NodeTimeout(f"{self.name}: `{command_str(cmd)}` ran over {timeout:g} s") from None
                continue
            if not b:
                break
            out.append(b)
        t.join(max(0.1, deadline - time.monotonic()))
        code = chan.recv_exit_status()
        chan.close()
        if code in (137, -1) and time.monotonic() - started >= timeout - 0.5:
            raise NodeTimeout(f"{self.name}: `{command_str(cmd)}` ran over {timeout:g} s")
        res = ExecResult(self.name, command_str(cmd), code, b"".join(out).decode(errors="replace"),
                         b"".join(err).decode(errors="replace"))
        return res.check() if check else res

    def install_project(self, wheel: str | None = None) -> None:
        """Install the project on the host from a wheel (built with `pip wheel --no-deps`)."""
        path = wheel or build_wheel()
        remote = self.path("dist", os.path.basename(path))
        self.upload(path, remote)
        venv = self.path("venv")
        self.sh(f"[ -x {venv}/bin/python ] || python3 -m venv --system-site-packages {venv}; "
                f"{venv}/bin/pip install -q --no-deps --force-reinstall {remote}", timeout=600)
