"""A system under test's lifecycle on any node: install, configure, start, stop, kill, pause,
wipe, collect (Jepsen's DB protocol, ducktape's Service).

`ServiceDB` is that lifecycle for one daemon per node (its pid file, log, data directory and
hooks); a system under test says how to configure and run it (each folder of suites/ has
its own, e.g. suites/wrack/db.py for the project's broker, suites/etcd/db.py for etcd).

Hooks (`NodeHook`) switch node-level features on per node without the DB knowing them:
- `setup(db, node)` runs after configure and before the first start (e.g. nemesis/lazyfs
  mounts its FUSE filesystem at `db.data_dir(node)`);
- `start_env(db, node) -> dict` adds environment variables to every start (e.g.
  nemesis/clock returns the LD_PRELOAD libfaketime variables);
- `after_kill(db, node)` runs right after the broker was SIGKILLed (power loss: drop
  unsynced data);
- `after_wipe(db, node)` runs after `wipe` (power loss: make the wipe durable);
- `teardown(db, node)` runs before `wipe`/collect at the end (unmount; must be idempotent).
Register hooks with `db.hooks.append(hook)`; every method of a hook is optional.

Contracts: `start` returns once the daemon runs (not once it serves: use `wait_ready`);
`stop` sends SIGTERM and waits (then SIGKILL); `kill`/`pause`/`resume` signal the process
and never wait for its cooperation; all of them are safe on a node where it is not running.
A DB also names, for the runner and the nemesis: `client_address(node)` (what a client
connects to), `leader_address()` (the node that leads now, for role-targeted faults; None
when none is known) and `prepare()` (after every node is ready: e.g. wait for a leader).
"""

from __future__ import annotations

import os
import signal
import socket
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol

from clusters.node import Cluster, DaemonSpec, Node, NodeError


class NodeHook(Protocol):
    """Per-node feature switched into the DB lifecycle; all methods optional (see module doc)."""


class ServiceDB:
    """One daemon per node of `cluster` (see the module docstring). A subclass sets `service`
    (its directory under the node's root, and the pid and log files' name) and `port` (where
    it serves clients: `wait_ready` waits for it), and writes `configure` and `argv`."""

    service = "service"
    port = 0

    def __init__(self, cluster: Cluster):
        self.cluster = cluster
        self.hooks: list[Any] = []

    # what a system under test defines
    def configure(self, node: Node) -> Any:
        """Write the node's configuration (the data directory exists afterwards)."""
        raise NotImplementedError

    def argv(self, node: Node) -> list[str]:
        """The daemon's command line on `node`."""
        raise NotImplementedError

    def prepare(self, timeout: float = 60.0) -> None:
        """After every node is ready, before the workload starts: wait until the cluster
        serves (nothing by default; the runner creates the workload's topics)."""

    def leader_address(self) -> str | None:
        """The address of the node that leads now (None: no leader, or the DB has none)."""
        return None

    def client_address(self, node: Node) -> str:
        return f"{node.address}:{self.port}"

    # paths on a node
    def dir(self, node: Node) -> str:
        return node.path(self.service)

    def data_dir(self, node: Node) -> str:
        return node.data_dir(self.service)

    def config_path(self, node: Node) -> str:
        raise NotImplementedError

    def pidfile(self, node: Node) -> str:
        return node.path(self.service, f"{self.service}.pid")

    def logfile(self, node: Node) -> str:
        return node.path(self.service, f"{self.service}.log")

    def _hook(self, name: str, node: Node) -> list[Any]:
        out = []
        for h in self.hooks:
            fn = getattr(h, name, None)
            if fn is not None:
                out.append(fn(self, node))
        return out

    # lifecycle
    def install(self, node: Node) -> None:
        """Make the project runnable on the node (a backend with remote hosts installs a wheel)."""
        inst = getattr(node, "install_project", None)
        if inst is not None:
            inst()

    def setup(self, node: Node) -> None:
        """install + configure + hooks' setup."""
        self.install(node)
        self.configure(node)
        self._hook("setup", node)

    def start(self, node: Node, env: Mapping[str, str] | None = None) -> int:
        """Start the daemon (no-op if running); returns its pid."""
        if node.daemon_running(self.pidfile(node)):
            pid = node.daemon_pid(self.pidfile(node))
            assert pid is not None
            return pid
        full_env: dict[str, str] = {}
        for e in self._hook("start_env", node):
            full_env.update(e or {})
        full_env.update(env or {})
        return node.start_daemon(DaemonSpec(
            name=self.service, argv=self.argv(node), pidfile=self.pidfile(node), logfile=self.logfile(node),
            env=full_env, cwd=self.dir(node)))

    def stop(self, node: Node, timeout: float = 10.0) -> None:
        """SIGTERM (resuming a paused daemon first), wait, then SIGKILL."""
        pf = self.pidfile(node)
        if not node.daemon_running(pf):
            return
        node.signal_daemon(pf, signal.SIGCONT)
        node.signal_daemon(pf, signal.SIGTERM)
        if not node.wait_daemon_exit(pf, timeout):
            node.signal_daemon(pf, signal.SIGKILL)
            node.wait_daemon_exit(pf, 5)

    def kill(self, node: Node) -> None:
        """SIGKILL, then the hooks' after_kill (power loss)."""
        pf = self.pidfile(node)
        if node.signal_daemon(pf, signal.SIGKILL):
            node.wait_daemon_exit(pf, 5)
        self._hook("after_kill", node)

    def pause(self, node: Node) -> None:
        node.signal_daemon(self.pidfile(node), signal.SIGSTOP)

    def resume(self, node: Node) -> None:
        node.signal_daemon(self.pidfile(node), signal.SIGCONT)

    def running(self, node: Node) -> bool:
        return node.daemon_running(self.pidfile(node))

    def wipe(self, node: Node) -> None:
        """Remove the daemon's data (the data dir's content; it may be a mountpoint)."""
        node.sh(f"rm -rf {self.data_dir(node)}/* {self.data_dir(node)}/.[!.]* 2>/dev/null; true")
        self._hook("after_wipe", node)

    def teardown(self, node: Node) -> None:
        """Stop the daemon and run the hooks' teardown."""
        self.stop(node)
        self._hook("teardown", node)

    def collect(self, node: Node, run_dir: str | os.PathLike[str], data: bool = True) -> Path:
        """Copy the node's log, config and (optionally) data into `run_dir/<node>/`."""
        dest = Path(run_dir) / node.name
        dest.mkdir(parents=True, exist_ok=True)
        for remote in (self.logfile(node), self.config_path(node)):
            try:
                node.fetch(remote, dest / os.path.basename(remote))
            except NodeError:
                pass
        if data:
            node.fetch_tree(self.data_dir(node), dest / "data")
        return dest

    def wait_ready(self, node: Node, timeout: float = 30.0) -> None:
        """Wait until the daemon accepts TCP connections on `port`."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                with socket.create_connection((node.address, self.port), timeout=1):
                    return
            except OSError as e:
                if not self.running(node):
                    raise NodeError(f"{node.name}: {self.service} exited; see {self.logfile(node)}") from e
                if time.monotonic() > deadline:
                    raise NodeError(f"{node.name}: {self.service} not reachable on {node.address}:{self.port}"
                                    f" after {timeout:g} s") from e
                time.sleep(0.1)

    def start_all(self, timeout: float = 60.0) -> None:
        """Set up and start the daemon on every node (in parallel), wait until each is ready
        (`wait_ready`, `timeout` s each), then until the cluster serves (`prepare`)."""
        nodes = self.cluster.nodes
        with ThreadPoolExecutor(max_workers=min(8, len(nodes))) as ex:
            list(ex.map(self.setup, nodes))
            list(ex.map(self.start, nodes))
            list(ex.map(lambda n: self.wait_ready(n, timeout), nodes))
        self.prepare(timeout)

    def kill_all(self) -> None:
        """SIGKILL the daemon on every node and run the hooks' teardown, in parallel: the end
        of a test whose logs are collected (one SIGTERM at a time, the brokers left without
        a controller quorum each waited out their controlled shutdown: 30 s for five)."""
        nodes = self.cluster.nodes
        with ThreadPoolExecutor(max_workers=min(8, len(nodes))) as ex:
            list(ex.map(lambda n: (self.kill(n), self.teardown(n)), nodes))
