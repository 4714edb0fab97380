"""A system under test's lifecycle on any node: install, configure, start, stop, kill, pause,
wipe, collect (Jepsen's DB protocol, ducktape's Service).

`ServiceDB` is that lifecycle for one daemon per node (its pid file, log, data directory and
hooks); a system under test says how to configure and run it. `BrokerDB` drives
`wrack-broker --config FILE`, one Kafka-style properties file per node built from the
test's options (`broker_properties`); `clusters.etcd.EtcdDB` drives etcd.

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

import json
import os
import signal
import socket
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from broker.wire import internal
from clusters.node import Cluster, DaemonSpec, Node, NodeError

TEST_REPLICA_LAG_TIME_MAX_MS = 6_000
BROKER_PORT = 9092
CONTROLLER_PORT = 9093


class NodeHook(Protocol):
    """Per-node feature switched into the DB lifecycle; all methods optional (see module doc)."""


@dataclass
class BrokerOptions:
    """The test's options for the broker. `extra` are further properties, verbatim."""

    controllers: int | None = None  # controller quorum voters; None: default_controllers(nodes)
    replication_factor: int = 3
    min_insync_replicas: int = 2
    flush_interval_messages: int | None = None
    extra: dict[str, str] = field(default_factory=dict)
    command: list[str] = field(default_factory=lambda: ["wrack-broker"])


def default_controllers(nodes: int) -> int:
    """Three voters (a quorum that survives one loss) from 3 nodes on, else one."""
    return 3 if nodes >= 3 else 1


def broker_properties(cluster: Cluster, node: Node, opts: BrokerOptions, data_dir: str,
                      node_ids: Mapping[str, int] | None = None) -> dict[str, str]:
    """The properties of `node`'s broker: node.id is its position (unless `node_ids`
    overrides it: membership gives a re-added node a fresh id), the first
    `opts.controllers` nodes (default `default_controllers`) are also controllers, voters of
    the quorum (KRaft-style combined mode). `replica.lag.time.max.ms` is
    TEST_REPLICA_LAG_TIME_MAX_MS unless `opts.extra` sets it."""
    ids = {n.name: i for i, n in enumerate(cluster.nodes)}
    ids.update(node_ids or {})
    nid = ids[node.name]
    n = opts.controllers if opts.controllers is not None else default_controllers(len(cluster.nodes))
    controllers = cluster.nodes[: max(1, n)]
    is_controller = node in controllers
    listeners = f"PLAINTEXT://{node.address}:{BROKER_PORT}"
    if is_controller:
        listeners += f",CONTROLLER://{node.address}:{CONTROLLER_PORT}"
    props = {
        "node.id": str(nid),
        "process.roles": "broker,controller" if is_controller else "broker",
        "listeners": listeners,
        "advertised.listeners": f"PLAINTEXT://{node.address}:{BROKER_PORT}",
        "controller.listener.names": "CONTROLLER",
        "controller.quorum.voters": ",".join(f"{ids[c.name]}@{c.address}:{CONTROLLER_PORT}" for c in controllers),
        "log.dirs": data_dir,
        "min.insync.replicas": str(opts.min_insync_replicas),
        "default.replication.factor": str(min(opts.replication_factor, len(cluster.nodes))),
        # shorter than Kafka's defaults (10 s before 2.5, 30 s since, KIP-537): a lagging
        # follower leaves the ISR within a test's fault window, so that the stories built on an
        # ISR shrink fit a one-minute run (with 10 s, a run played 3-4 of the five: a shrink
        # took 8-15 s, and stale-alter-partition 31-38 s)
        "replica.lag.time.max.ms": str(TEST_REPLICA_LAG_TIME_MAX_MS),
    }
    if opts.flush_interval_messages is not None:
        props["log.flush.interval.messages"] = str(opts.flush_interval_messages)
    props.update(opts.extra)
    return props


def render_properties(props: Mapping[str, str]) -> str:
    return "".join(f"{k}={v}\n" for k, v in props.items())


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


class BrokerDB(ServiceDB):
    """The broker on every node of `cluster`; see the module docstring."""

    service = "broker"
    port = BROKER_PORT

    def __init__(self, cluster: Cluster, opts: BrokerOptions | None = None):
        super().__init__(cluster)
        self.opts = opts or BrokerOptions()
        self.node_ids: dict[str, int] = {}  # node.id overrides (nemesis/membership.py)

    def controller_nodes(self) -> list[Node]:
        """The nodes that run a controller (the quorum's voters)."""
        n = self.opts.controllers if self.opts.controllers is not None else default_controllers(len(self.cluster.nodes))
        return list(self.cluster.nodes[: max(1, n)])

    def quorum_states(self) -> dict[str, tuple[int, int]]:
        """Each voter's (epoch, leader id) from its quorum-state file
        (broker/server/quorum_store.py); a voter whose file cannot be read is left out."""
        out = {}
        for node in self.controller_nodes():
            try:
                state = json.loads(node.read_file(os.path.join(self.data_dir(node), "quorum-state")))
                out[node.name] = (int(state["epoch"]), int(state["leader_id"]))
            except (NodeError, OSError, ValueError, KeyError, TypeError):
                continue
        return out

    def active_controller(self) -> str | None:
        """The address of the node running the active controller (the quorum leader), None
        if none is known or it is not running: the leader named in the highest epoch of
        `quorum_states`."""
        by_id = {self.node_id(n): n for n in self.controller_nodes()}
        best: tuple[int, int] = (-1, -1)
        for epoch, leader in self.quorum_states().values():
            if leader in by_id and epoch > best[0]:
                best = (epoch, leader)
        node = by_id.get(best[1])
        return node.address if node is not None and self.running(node) else None

    def frame_head(self, message: str) -> bytes:
        """The head of the broker's inter-node frames carrying `message` (a class name of
        broker/wire/internal.py's MESSAGES, e.g. AlterPartitionRequest), for a fault that
        holds them in the network; ValueError if no such message travels."""
        types = {t.__name__: t for t in internal.MESSAGES}
        if message not in types:
            raise ValueError(f"no inter-node message {message!r} (known: {', '.join(sorted(types))})")
        return internal.frame_head(types[message])

    def leader_address(self) -> str | None:
        """The active controller's node (the broker's cluster-wide leader)."""
        return self.active_controller()

    def node_id(self, node: Node) -> int:
        """The broker's node.id on `node` (its position, unless membership renumbered it)."""
        return self.node_ids.get(node.name, self.cluster.nodes.index(node))

    def config_path(self, node: Node) -> str:
        return node.path(self.service, "server.properties")

    def configure(self, node: Node) -> dict[str, str]:
        """Write the node's properties file; returns the properties."""
        props = broker_properties(self.cluster, node, self.opts, self.data_dir(node), self.node_ids)
        node.exec(["mkdir", "-p", self.data_dir(node)])
        node.write_file(self.config_path(node), render_properties(props))
        return props

    def argv(self, node: Node) -> list[str]:
        return [*self.opts.command, "--config", self.config_path(node)]

    def bootstrap_servers(self) -> str:
        return ",".join(f"{n.address}:{BROKER_PORT}" for n in self.cluster.nodes)
