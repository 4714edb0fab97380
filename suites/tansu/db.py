"""A Tansu cluster: PostgreSQL on the first node, a stateless Tansu broker on each other node.

`TansuDB` is the cluster's one DB (a clusters/db.py `ServiceDB`, service `tansu`): the
nemesis, the runner and the hooks call it per node, and it does the right thing for the node's
role. The database node runs suites/tansu/postgres.py's `PostgresServer` (data in
`data_dir(node)`, where LazyFS mounts for power loss; log `postgres.log`); each broker node
runs `tansu broker` (config `tansu.env`, log `tansu.log`) with every setting on its command
line: listener and advertised listener on the node's address, port 9092, the shared cluster
id, and the storage engine URL `postgres://tansu:tansu@DBNODE:5432/tansu` (Tansu's README:
`--storage-engine postgres://postgres:postgres@localhost`), RUST_LOG `TansuConfig.rust_log`.

Process faults on the database node act on the whole server: a kill or a pause signals the
postmaster and its children at once (its backends die or stop with it, as on a host that loses power
or freezes), a clean stop is PostgreSQL's fast shutdown (SIGINT). A clock hook never reaches
PostgreSQL: the skew under test is the brokers'.

`start_all` starts the database first, creates the schema, then the brokers (a broker
registers itself in the database when it starts). `leader_address` is the database node: the
one role target (`{"role": "controller"}`, through `nemesis.targets.LeaderMetadata`).
`wait_ready` on the database node raises NodeError naming why PostgreSQL did not start
(its log's FATAL line) and where its log is.
"""

from __future__ import annotations

import os
import signal
import socket
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clusters.db import ServiceDB
from clusters.node import Cluster, DaemonSpec, Node, NodeError
from suites.tansu.postgres import PORT as PG_PORT
from suites.tansu.postgres import USER, PostgresServer, failure_cause, ready

BROKER_PORT = 9092
CLUSTER_ID = "wrack"
DATABASE_WAIT_S = 60.0  # how long a broker's start waits for a recovering database
CLOCK_ENV = ("LD_PRELOAD", "FAKETIME_TIMESTAMP_FILE", "FAKETIME_NO_CACHE", "FAKETIME_DISABLE_SHM",
             "FAKETIME_DONT_FAKE_MONOTONIC")


@dataclass
class TansuConfig:
    """The test's settings for the cluster: the broker binary, its log filter, and
    postgresql.conf settings beyond the defaults (`--postgres-setting`)."""

    binary: str = "tansu"
    rust_log: str = "warn"
    postgres: dict[str, str] = field(default_factory=dict)


def storage_url(db_address: str) -> str:
    return f"postgres://{USER}:{USER}@{db_address}:{PG_PORT}/tansu"


def broker_config(node: Node, db_address: str, rust_log: str) -> dict[str, str]:
    """A broker's settings, as Tansu 0.6.0's environment names them (tansu-cli src/cli/broker.rs)."""
    url = f"tcp://{node.address}:{BROKER_PORT}"
    return {"CLUSTER_ID": CLUSTER_ID, "LISTENER_URL": url, "ADVERTISED_LISTENER_URL": url,
            "STORAGE_ENGINE": storage_url(db_address), "RUST_LOG": rust_log}


class TansuDB(ServiceDB):
    """See the module docstring."""

    service = "tansu"
    port = BROKER_PORT

    def __init__(self, cluster: Cluster, config: TansuConfig | None = None):
        super().__init__(cluster)
        if len(cluster.nodes) < 2:
            raise NodeError("a Tansu cluster needs 2 nodes at least: PostgreSQL on one, brokers on the others")
        self.config = config or TansuConfig()
        self.pg = PostgresServer(self.config.postgres)

    # ------------------------------------------------------------------ roles
    def database_node(self) -> Node:
        return self.cluster.nodes[0]

    def brokers(self) -> list[Node]:
        return list(self.cluster.nodes[1:])

    def is_database(self, node: Node) -> bool:
        return node.name == self.database_node().name

    def leader_address(self) -> str | None:
        return self.database_node().address

    def client_address(self, node: Node) -> str:
        """A broker's address; for the database node, the first broker's (clients talk to brokers only)."""
        b = self.brokers()[0] if self.is_database(node) else node
        return f"{b.address}:{BROKER_PORT}"

    def bootstrap_servers(self) -> str:
        return ",".join(f"{n.address}:{BROKER_PORT}" for n in self.brokers())

    # ------------------------------------------------------------------ files
    def logfile(self, node: Node) -> str:
        return node.path(self.service, "postgres.log" if self.is_database(node) else "tansu.log")

    def config_path(self, node: Node) -> str:
        return self.pg.config_path(node) if self.is_database(node) else node.path(self.service, "tansu.env")

    def configure(self, node: Node) -> dict[str, str]:
        if self.is_database(node):
            self.pg.initdb(node, self.data_dir(node))
            return self.pg.write_config(node)
        conf = broker_config(node, self.database_node().address, self.config.rust_log)
        node.exec(["mkdir", "-p", self.data_dir(node)])
        node.write_file(self.config_path(node), "".join(f"{k}={v}\n" for k, v in conf.items()))
        return conf

    def argv(self, node: Node) -> list[str]:
        if self.is_database(node):
            return self.pg.argv(node, self.data_dir(node))
        conf = broker_config(node, self.database_node().address, self.config.rust_log)
        return [self.config.binary, "broker", "--cluster-id", conf["CLUSTER_ID"], "--listener-url",
                conf["LISTENER_URL"], "--advertised-listener-url", conf["ADVERTISED_LISTENER_URL"],
                "--storage-engine", conf["STORAGE_ENGINE"]]

    # ------------------------------------------------------------------ lifecycle
    def start(self, node: Node, env: Mapping[str, str] | None = None) -> int:
        if not self.is_database(node):
            if not self.running(node):
                self._await_database()
            return super().start(node, {"RUST_LOG": self.config.rust_log, "NO_COLOR": "1", **(env or {})})
        pf = self.pidfile(node)
        if node.daemon_running(pf):
            return node.daemon_pid(pf) or 0
        self.pg.own_data_dir(node, self.data_dir(node))
        full: dict[str, str] = {}
        for e in self._hook("start_env", node):
            full.update(e or {})
        full.update(env or {})
        for k in CLOCK_ENV:  # the skew under test is the brokers'
            full.pop(k, None)
        return node.start_daemon(DaemonSpec(name="postgres", argv=self.argv(node), pidfile=pf,
                                            logfile=self.logfile(node), env=full, cwd=self.dir(node)))

    def _await_database(self, timeout: float = DATABASE_WAIT_S) -> None:
        """Before a broker starts: until PostgreSQL accepts connections, if it runs (a Tansu
        broker exits at once when it cannot register in the database, e.g. while PostgreSQL
        recovers after a crash; docs/findings/tansu-0.6.0.md). A stopped or paused database
        is not waited for: the broker's start is the fault's business then."""
        db = self.database_node()
        deadline = time.monotonic() + timeout
        while self.running(db) and not self._paused(db) and not ready(db) and time.monotonic() < deadline:
            time.sleep(0.2)

    def _paused(self, node: Node) -> bool:
        st = node.daemon_state(self.pidfile(node))
        return st is not None and st.stopped

    def _signal_group(self, node: Node, sig: int) -> bool:
        """Signal the postmaster and its children, in one kill: PostgreSQL's backends and
        auxiliary processes call setsid() (a signal to the postmaster's process group does not
        reach them), so they are found as the postmaster's children. False if it is not running."""
        return node.sh(f"{self._server_pids(node)} && kill -{int(sig)} $ps", check=False, timeout=10).ok

    def _server_pids(self, node: Node) -> str:
        """Shell that sets $p to the postmaster's pid and $ps to it and its children's (fails if it
        is gone). The postmaster is stopped first, so that no backend it forks after the list
        was taken escapes the signal (one did: it outlived a kill)."""
        return (f"p=$(cat {self.pidfile(node)} 2>/dev/null) && [ -e /proc/$p ] && kill -STOP $p && "
                f"ps=\"$p $(pgrep -P $p | tr '\\n' ' ')\"")

    def kill(self, node: Node) -> None:
        """SIGKILL of the postmaster and its children at once (a power cut), waiting until every
        one is gone (reaped, at most 15 s each); then the hooks' after_kill (power loss: LazyFS
        drops the unsynced writes)."""
        if not self.is_database(node):
            return super().kill(node)
        # gone means reaped, not a zombie: a new postmaster takes a zombie's pid in postmaster.pid
        # for a live server and refuses to start ("lock file postmaster.pid already exists")
        # every process stopped before any is killed: a backend still running when the
        # postmaster died noticed it and logged "terminating connection due to unexpected
        # postmaster exit" before its own SIGKILL came (a kill that was not at once)
        node.sh(f"{self._server_pids(node)} && kill -STOP $ps; kill -9 $ps; for q in $ps; do i=0; "
                f"while [ -e /proc/$q ]; do i=$((i+1)); [ $i -gt 300 ] && break; sleep 0.05; done; done; true",
                check=False, timeout=30)
        self._hook("after_kill", node)

    def pause(self, node: Node) -> None:
        if self.is_database(node):
            self._signal_group(node, signal.SIGSTOP)
        else:
            super().pause(node)

    def resume(self, node: Node) -> None:
        if self.is_database(node):
            self._signal_group(node, signal.SIGCONT)
        else:
            super().resume(node)

    def stop(self, node: Node, timeout: float = 10.0) -> None:
        """A broker: SIGTERM, wait, SIGKILL. The database: fast shutdown (SIGINT), then SIGKILL
        of the postmaster and its children."""
        if not self.is_database(node):
            return super().stop(node, timeout)
        pf = self.pidfile(node)
        if not node.daemon_running(pf):
            return
        self._signal_group(node, signal.SIGCONT)
        node.signal_daemon(pf, signal.SIGINT)
        if not node.wait_daemon_exit(pf, timeout):
            self.kill(node)

    def wait_ready(self, node: Node, timeout: float = 30.0) -> None:
        """Until the node's server accepts TCP connections (5432 or 9092); NodeError naming the
        cause and the log when it exited."""
        port = PG_PORT if self.is_database(node) else BROKER_PORT
        deadline = time.monotonic() + timeout
        while True:
            try:
                with socket.create_connection((node.address, port), timeout=1):
                    return
            except OSError as e:
                if not self.running(node):
                    raise NodeError(self._exit_message(node)) from e
                if time.monotonic() > deadline:
                    raise NodeError(f"{node.name}: {self._what(node)} not reachable on {node.address}:{port} "
                                    f"after {timeout:g} s; see its log {self._log_name(node)}") from e
                time.sleep(0.1)

    def _what(self, node: Node) -> str:
        return "PostgreSQL" if self.is_database(node) else "the Tansu broker"

    def _log_name(self, node: Node) -> str:
        return f"{self.logfile(node)} (collected as nodes/{node.name}/{os.path.basename(self.logfile(node))})"

    def _exit_message(self, node: Node) -> str:
        try:
            log = node.read_file(self.logfile(node)).decode(errors="replace")
        except (NodeError, OSError):
            log = ""
        cause = failure_cause(log) if self.is_database(node) else (log.strip().splitlines() or ["no output"])[-1]
        return f"{node.name}: {self._what(node)} did not start: {cause[:300]}; log {self._log_name(node)}"

    def start_all(self, timeout: float = 60.0) -> None:
        """The database (set up, started, ready, schema), then every broker (module docstring)."""
        nodes = self.cluster.nodes
        with ThreadPoolExecutor(max_workers=min(8, len(nodes))) as ex:
            list(ex.map(self.setup, nodes))
        db = self.database_node()
        self.start(db)
        self.wait_ready(db, timeout)
        self.prepare_schema(timeout)
        brokers = self.brokers()
        with ThreadPoolExecutor(max_workers=min(8, len(brokers))) as ex:
            list(ex.map(self.start, brokers))
            list(ex.map(lambda n: self.wait_ready(n, timeout), brokers))

    def prepare_schema(self, timeout: float = 60.0) -> None:
        """The database and its schema, retried while the fresh server still refuses connections."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.pg.create_schema(self.database_node())
                return
            except NodeError:
                if time.monotonic() > deadline or not self.running(self.database_node()):
                    raise
                time.sleep(0.5)

    def collect(self, node: Node, run_dir: str | os.PathLike[str], data: bool = True) -> Path:
        """The node's log and config (and data); on the database node also CSV copies of the
        tables the findings read (nodes/<node>/tables/), while the server still runs."""
        dest = super().collect(node, run_dir, data)
        if self.is_database(node) and self.running(node):
            try:
                self.pg.dump_tables(node, dest / "tables")
            except (NodeError, OSError):
                pass
        return dest

    def describe(self) -> dict[str, Any]:
        """Which node does what (test.json's `tansu`)."""
        return {"database": self.database_node().name, "brokers": [n.name for n in self.brokers()],
                "storage_engine": storage_url(self.database_node().address), "binary": self.config.binary}
