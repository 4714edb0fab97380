"""PostgreSQL from Debian as the one database of a Tansu cluster, on a node of its own.

`PostgresServer` says how the database node's server is made and run; suites/tansu/db.py's
`TansuDB` calls it for that node (the DB's lifecycle stays in one class):

- `initdb(node, data_dir)`: an empty cluster owned by the `postgres` user (the server refuses
  to run as root), superuser `tansu`, in `data_dir` (where a power-loss hook mounts LazyFS);
- `write_config(node)`: postgresql.conf and pg_hba.conf in the node's tansu directory (the
  config is collected with the run): listening on the node's address, port 5432, no unix
  socket, durability on (`fsync`, `synchronous_commit`, `full_page_writes`: PostgreSQL's
  defaults, written out so the run records them), logging to stderr (the daemon's log,
  `postgres.log`), then the test's `--postgres-setting` lines, which win;
- `argv(node, data_dir)`: the postmaster, run as `postgres` through setpriv (it execs, so the
  pid the harness holds is the postmaster's; its children are the server's other processes);
- `create_schema(node)`: the database `tansu` and suites/tansu/schema.sql in it (idempotent);
- `query(node, sql)` / `dump_tables(node, dest)`: read the tables (the findings read
  watermarks, records and committed offsets from them);
- `failure_cause(log)`: the line of a log that says why the server did not start.

Binaries are those of the newest major version under /usr/lib/postgresql (package postgresql-15
on Debian 12, deploy/debian-packages.txt).
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path

from clusters.node import Node, NodeError

PORT = 5432
USER = "tansu"
DATABASE = "tansu"
OS_USER = "postgres"
PG_ROOT = "/usr/lib/postgresql"
SCHEMA = Path(__file__).with_name("schema.sql")
# the tables a run's findings read, collected into the run folder (nodes/<db node>/tables/)
DUMPED = {
    "watermark": "select t.name as topic, tp.partition, w.low, w.high, w.stable, w.last_updated from watermark w "
                 "join topition tp on tp.id = w.topition join topic t on t.id = tp.topic order by 1, 2",
    "record": "select t.name as topic, tp.partition, r.offset_id, convert_from(r.v, 'UTF8') as value, r.timestamp, "
              "r.created_at from record r join topition tp on tp.id = r.topition join topic t on t.id = tp.topic "
              "order by 1, 2, 3",
    "consumer_offset": "select cg.name as group_name, t.name as topic, tp.partition, co.committed_offset, "
                       "co.leader_epoch, co.last_updated from consumer_offset co join consumer_group cg on "
                       "cg.id = co.consumer_group join topition tp on tp.id = co.topition join topic t on "
                       "t.id = tp.topic order by 1, 2, 3",
    "consumer_group_detail": "select cg.name as group_name, d.e_tag, d.last_updated, d.detail::text from "
                             "consumer_group_detail d join consumer_group cg on cg.id = d.consumer_group order by 1",
}


def bin_dir() -> str:
    """The newest PostgreSQL's binaries (NodeError when none is installed)."""
    try:
        versions = sorted((v for v in os.listdir(PG_ROOT) if v.isdigit()), key=int)
    except OSError:
        versions = []
    if not versions:
        raise NodeError(f"no PostgreSQL server under {PG_ROOT} (Debian package postgresql-15: make setup)")
    return f"{PG_ROOT}/{versions[-1]}/bin"


def as_postgres(argv: Sequence[str]) -> list[str]:
    """`argv` run as the postgres user (setpriv execs: no process in between)."""
    return ["setpriv", f"--reuid={OS_USER}", f"--regid={OS_USER}", "--init-groups", "--", *argv]


def settings(address: str, extra: Mapping[str, str], hba_file: str) -> dict[str, str]:
    """postgresql.conf's settings (module docstring); `extra` last, so it wins."""
    out = {
        "listen_addresses": f"'{address}'",
        "port": str(PORT),
        "unix_socket_directories": "''",
        "hba_file": f"'{hba_file}'",
        "max_connections": "200",  # each broker's pool holds up to 16 (tansu-storage pg.rs)
        "shared_buffers": "64MB",
        "fsync": "on",
        "synchronous_commit": "on",
        "full_page_writes": "on",
        "logging_collector": "off",
        "log_destination": "'stderr'",
        "log_line_prefix": "'%m [%p] %h '",
        "log_min_messages": "warning",
        "log_checkpoints": "on",
    }
    out.update(extra)
    return out


def failure_cause(log: str) -> str:
    """Why a server did not start: its log's last FATAL or PANIC line (else its last line),
    after the line that says which setting when the FATAL is a configuration file's errors."""
    lines = [x.strip() for x in log.splitlines() if x.strip()]
    for i in range(len(lines) - 1, -1, -1):
        m = re.search(r"\b(FATAL|PANIC):\s+(.*)", lines[i])
        if m:
            cause = f"{m.group(1)}: {m.group(2)}"
            before = re.search(r"\b(?:LOG|ERROR):\s+(.*)", lines[i - 1]) if i else None
            if "contains errors" in cause and before:
                cause = f"{before.group(1)}; {cause}"
            return cause
    return lines[-1] if lines else "it printed nothing"


def ready(node: Node, timeout: float = 1.0) -> bool:
    """Whether the server on `node` accepts connections (pg_isready: not while it recovers)."""
    res = node.exec([f"{bin_dir()}/pg_isready", "-h", node.address, "-p", str(PORT), "-t", str(max(1, int(timeout)))],
                    check=False, timeout=timeout + 10)
    return res.ok


class PostgresServer:
    """The database node's server (module docstring); `extra` are postgresql.conf settings."""

    def __init__(self, extra: Mapping[str, str] | None = None):
        self.extra = dict(extra or {})
        self._bin: str | None = None

    @property
    def bin(self) -> str:
        if self._bin is None:
            self._bin = bin_dir()
        return self._bin

    def config_path(self, node: Node) -> str:
        return node.path("tansu", "postgresql.conf")

    def hba_path(self, node: Node) -> str:
        return node.path("tansu", "pg_hba.conf")

    def initdb(self, node: Node, data_dir: str) -> None:
        q = shlex.quote
        node.sh(f"mkdir -p {q(data_dir)} && chown {OS_USER}:{OS_USER} {q(data_dir)} && chmod 700 {q(data_dir)}")
        if node.exec(["test", "-f", os.path.join(data_dir, "PG_VERSION")], check=False).ok:
            return
        res = node.exec(as_postgres([f"{self.bin}/initdb", "-D", data_dir, "-U", USER, "--auth=trust",
                                     "--no-sync", "-E", "UTF8", "--locale=C"]), check=False, timeout=300)
        if not res.ok:
            raise NodeError(f"{node.name}: initdb failed: {(res.stderr or res.stdout).strip()[-300:]}")

    def write_config(self, node: Node) -> dict[str, str]:
        conf = settings(node.address, self.extra, self.hba_path(node))
        node.write_file(self.config_path(node), "".join(f"{k} = {v}\n" for k, v in conf.items()))
        node.write_file(self.hba_path(node), "# the cluster's subnet and the harness: no password (a test network)\n"
                                             "host all all 0.0.0.0/0 trust\n")
        return conf

    def argv(self, node: Node, data_dir: str) -> list[str]:
        return as_postgres([f"{self.bin}/postgres", "-D", data_dir, "-c", f"config_file={self.config_path(node)}"])

    def own_data_dir(self, node: Node, data_dir: str) -> None:
        """Before each start: the data dir belongs to postgres with mode 700 (a LazyFS mount
        shows its backing directory, made by root: the server refuses any other owner)."""
        q = shlex.quote
        node.sh(f"chown {OS_USER}:{OS_USER} {q(data_dir)} && chmod 700 {q(data_dir)}")

    def psql(self, node: Node, sql: str | None = None, *, file: str | None = None, db: str = DATABASE,
             timeout: float = 60.0) -> str:
        """Run `sql` (or a file on the node) with psql over TCP; its unaligned output (NodeError on failure)."""
        argv = [f"{self.bin}/psql", "-h", node.address, "-p", str(PORT), "-U", USER, "-d", db, "-X", "-q",
                "-v", "ON_ERROR_STOP=1", "-At"]
        argv += ["-f", file] if file else ["-c", sql or ""]
        res = node.exec(argv, check=False, timeout=timeout, env={"PGCONNECT_TIMEOUT": "5"})
        if not res.ok:
            raise NodeError(f"{node.name}: psql: {(res.stderr or res.stdout).strip()[-300:]}")
        return res.stdout

    def create_schema(self, node: Node) -> None:
        """The database and Wrack's schema for Tansu (suites/tansu/schema.sql); idempotent."""
        exists = self.psql(node, f"select 1 from pg_database where datname = '{DATABASE}'", db="postgres").strip()
        if not exists:
            self.psql(node, f"create database {DATABASE}", db="postgres")
        remote = node.path("tansu", "schema.sql")
        node.write_file(remote, SCHEMA.read_text())
        self.psql(node, file=remote)

    def query(self, node: Node, sql: str) -> list[list[str]]:
        """Rows of `sql` (fields split on |)."""
        return [line.split("|") for line in self.psql(node, sql).splitlines() if line]

    def dump_tables(self, node: Node, dest: Path) -> list[str]:
        """CSV copies of the tables the findings read (`DUMPED`) into `dest`; the names written."""
        dest.mkdir(parents=True, exist_ok=True)
        done = []
        for name, sql in DUMPED.items():
            try:
                out = self.psql(node, f"copy ({sql}) to stdout with csv header", timeout=120)
            except NodeError:
                continue
            (dest / f"{name}.csv").write_text(out)
            done.append(name)
        return done
