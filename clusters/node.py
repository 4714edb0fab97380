"""The Node interface every cluster backend implements, and the cluster object.

A `Node` is one machine the broker runs on: a network namespace (`local`), a container
(`docker`) or a host reached over SSH (`ssh`). The harness only talks to nodes through
this interface, so DB lifecycles and nemeses work on every backend.

Contracts
- `exec(cmd, timeout=, env=, check=, input=)` runs a command *on the node* (inside its
  network and mount namespaces, as root) and returns an `ExecResult`. `cmd` is an argv list
  (preferred) or a shell string (run with `sh -c`). With `check=True` a non-zero exit raises
  `NodeCommandError`. `timeout` is a deadline for the whole command: when it passes the
  command is killed and `NodeTimeout` is raised.
- `upload(local, remote)` / `write_file(remote, data)` / `fetch(remote, local)` copy files;
  parents of the destination are created.
- Daemons (`start_daemon(DaemonSpec)`) run detached from the harness (new session, stdin
  /dev/null, stdout+stderr appended to `spec.logfile`), and their pid is written to
  `spec.pidfile` on the node. `signal_daemon`, `daemon_pid`, `daemon_state` and
  `daemon_running` read that pidfile. A daemon survives the harness process; only
  `Cluster.teardown` (or `wrack cluster down --force`) ends it.
- `root` is a directory on the node owned by the harness (e.g. `/var/lib/wrack`); every file
  the harness puts on a node lives below it. `data_dir(service)` is where a service keeps its
  data (the broker's `log.dirs`); a power-loss hook may mount a FUSE filesystem there.
- `address` is the IP address other nodes and the harness use to reach the node.

The base class implements the daemon helpers, `write_file` and `upload`/`fetch` on top of
`exec`, so a backend needs only `exec` (and may override the rest for speed).
"""

from __future__ import annotations

import base64
import io
import os
import shlex
import signal
import tarfile
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

Command = Sequence[str] | str


class NodeError(Exception):
    """Something failed on a node (the message names the node)."""


@dataclass
class ExecResult:
    """What a command on a node did: `exit_code` (-1 if killed by the timeout), output as text."""

    node: str
    cmd: str
    exit_code: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.exit_code == 0

    def check(self) -> ExecResult:
        """Raise `NodeCommandError` unless the command exited 0; returns self."""
        if self.exit_code != 0:
            raise NodeCommandError(self)
        return self


class NodeCommandError(NodeError):
    """A command exited non-zero (with `check=True`)."""

    def __init__(self, result: ExecResult):
        tail = (result.stderr.strip() or result.stdout.strip()).splitlines()[-1:] or [""]
        super().__init__(f"{result.node}: `{result.cmd}` exited {result.exit_code}: {tail[0][:300]}")
        self.result = result


class NodeTimeout(NodeError):
    """A command on a node ran past its deadline (and was killed)."""


def command_str(cmd: Command) -> str:
    """A shell-safe string for `cmd` (argv lists are quoted, strings pass through)."""
    return cmd if isinstance(cmd, str) else shlex.join(cmd)


def env_prefix(env: Mapping[str, str] | None) -> list[str]:
    """`["env", "K=V", ...]` for a non-empty `env` (prepend to an argv), else []."""
    if not env:
        return []
    return ["env", *(f"{k}={v}" for k, v in env.items())]


@dataclass
class DaemonSpec:
    """How to start a daemon on a node.

    `argv` is run with `env` added to the node's environment, in `cwd` (default: the
    pidfile's directory); output goes to `logfile` (appended), the pid to `pidfile`.
    """

    name: str
    argv: list[str]
    pidfile: str
    logfile: str
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None


@dataclass(frozen=True)
class ProcessState:
    """A daemon's state from /proc: `state` is the /proc/PID/stat letter (R, S, D, T, Z...)."""

    pid: int
    state: str

    @property
    def stopped(self) -> bool:
        return self.state in ("T", "t")

    @property
    def alive(self) -> bool:
        return self.state not in ("Z", "X")


class Node(ABC):
    """One node of a cluster. Subclasses implement `exec`; see the module docstring."""

    name: str
    address: str
    root: str

    def __init__(self, name: str, address: str, root: str = "/var/lib/wrack"):
        self.name = name
        self.address = address
        self.root = root

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name} {self.address}>"

    # ----------------------------------------------------------------- commands

    @abstractmethod
    def exec(self, cmd: Command, *, timeout: float = 60.0, env: Mapping[str, str] | None = None,
             check: bool = True, input: bytes | None = None) -> ExecResult:
        """Run `cmd` on the node as root; see the module docstring."""

    def sh(self, script: str, **kw: Any) -> ExecResult:
        """Run a shell script on the node (`sh -c script`)."""
        return self.exec(["sh", "-c", script], **kw)

    # ----------------------------------------------------------------- files

    def path(self, *parts: str) -> str:
        """A path below the node's `root`."""
        return os.path.join(self.root, *parts)

    def data_dir(self, service: str = "broker") -> str:
        """Where `service` keeps its data on this node (may become a mountpoint)."""
        return self.path(service, "data")

    def write_file(self, remote: str, data: bytes | str, mode: int = 0o644) -> None:
        """Write `data` to `remote` on the node (parents created)."""
        raw = data.encode() if isinstance(data, str) else data
        d = shlex.quote(os.path.dirname(remote) or "/")
        r = shlex.quote(remote)
        self.sh(f"mkdir -p {d} && base64 -d > {r}.tmp && chmod {mode:o} {r}.tmp && mv -f {r}.tmp {r}",
                input=base64.b64encode(raw))

    def read_file(self, remote: str) -> bytes:
        """The content of `remote` on the node."""
        res = self.exec(["base64", "-w0", remote], timeout=120)
        return base64.b64decode(res.stdout)

    def upload(self, local: str | os.PathLike[str], remote: str, mode: int | None = None) -> None:
        """Copy the local file `local` to `remote` on the node."""
        p = Path(local)
        self.write_file(remote, p.read_bytes(), mode if mode is not None else (p.stat().st_mode & 0o777))

    def fetch(self, remote: str, local: str | os.PathLike[str]) -> None:
        """Copy the file `remote` on the node to `local` (parents created)."""
        Path(local).parent.mkdir(parents=True, exist_ok=True)
        Path(local).write_bytes(self.read_file(remote))

    def fetch_tree(self, remote: str, local: str | os.PathLike[str]) -> bool:
        """Copy the directory `remote` (recursively) into `local`; False if it does not exist."""
        res = self.sh(f"test -d {shlex.quote(remote)} && tar -C {shlex.quote(remote)} -czf - . | base64 -w0",
                      check=False, timeout=300)
        if res.exit_code != 0:
            return False

        Path(local).mkdir(parents=True, exist_ok=True)
        with tarfile.open(fileobj=io.BytesIO(base64.b64decode(res.stdout))) as tf:
            tf.extractall(local, filter="data")
        return True

    # ----------------------------------------------------------------- daemons

    def start_daemon(self, spec: DaemonSpec) -> int:
        """Start `spec` detached; returns its pid (also written to `spec.pidfile`)."""
        cwd = spec.cwd or os.path.dirname(spec.pidfile)
        argv = [*env_prefix(spec.env), *spec.argv]
        q = shlex.quote
        script = (
            f"mkdir -p {q(cwd)} {q(os.path.dirname(spec.pidfile))} {q(os.path.dirname(spec.logfile))} || exit 1; "
            f"cd {q(cwd)} || exit 1; "  # before `&`: only the daemon itself goes to the background
            f"setsid {command_str(argv)} >> {q(spec.logfile)} 2>&1 < /dev/null & "
            f"echo $! > {q(spec.pidfile)}.tmp && mv -f {q(spec.pidfile)}.tmp {q(spec.pidfile)} && echo $!"
        )
        res = self.sh(script, timeout=30)
        try:
            return int(res.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            raise NodeError(f"{self.name}: starting {spec.name} printed no pid: {res.stdout!r}") from None

    def daemon_pid(self, pidfile: str) -> int | None:
        """The pid in `pidfile`, or None when there is no pidfile."""
        res = self.exec(["cat", pidfile], check=False, timeout=10)
        try:
            return int(res.stdout.strip()) if res.ok else None
        except ValueError:
            return None

    def daemon_state(self, pidfile: str) -> ProcessState | None:
        """The state of the daemon in `pidfile`, or None when it is not running (or gone)."""
        res = self.sh(f"p=$(cat {shlex.quote(pidfile)}) && cat /proc/$p/stat", check=False, timeout=10)
        if not res.ok:
            return None
        line = res.stdout
        rest = line[line.rfind(")") + 2:].split()
        pid = int(line.split(" ", 1)[0])
        st = ProcessState(pid, rest[0] if rest else "?")
        return st if st.alive else None  # a zombie waits for init to reap it: it is gone

    def daemon_running(self, pidfile: str) -> bool:
        """True when the daemon in `pidfile` exists and is not a zombie (paused counts as running)."""
        st = self.daemon_state(pidfile)
        return st is not None and st.alive

    def signal_daemon(self, pidfile: str, sig: int | signal.Signals) -> bool:
        """Send `sig` to the daemon in `pidfile`; False when it was not running."""
        n = int(sig)
        res = self.sh(f"p=$(cat {shlex.quote(pidfile)} 2>/dev/null) && kill -{n} $p", check=False, timeout=10)
        return res.ok

    def wait_daemon_exit(self, pidfile: str, timeout: float) -> bool:
        """Wait up to `timeout` s for the daemon to exit; True when it is gone."""
        q = shlex.quote(pidfile)
        script = (f"p=$(cat {q} 2>/dev/null) || exit 0; i=0; "
                  f"while [ -e /proc/$p ] && [ \"$(cut -d' ' -f3 /proc/$p/stat 2>/dev/null)\" != Z ]; do "
                  f"i=$((i+1)); [ $i -gt {int(timeout * 50)} ] && exit 1; sleep 0.02; done; exit 0")
        return self.sh(script, check=False, timeout=timeout + 10).ok


@dataclass
class ClusterSpec:
    """What to create: `name`, `nodes` count, `transport` (nsenter|ssh for local), backend options."""

    name: str = "wrack"
    nodes: int = 3
    transport: str = "nsenter"
    options: dict[str, Any] = field(default_factory=dict)


class Cluster(ABC):
    """A set of nodes from one backend, with its persisted state.

    Contracts: `nodes` are in order (n1, n2, ...); `node(name)` finds one; `teardown()`
    removes everything the cluster created (namespaces, links, mounts, rules, processes,
    state) and is idempotent; `describe()` is the JSON-able status `wrack cluster status`
    prints.
    """

    name: str
    backend: str
    nodes: list[Node]

    def node(self, name: str) -> Node:
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(f"no node {name!r} in cluster {self.name!r}")

    def by_address(self, address: str) -> Node:
        for n in self.nodes:
            if n.address == address:
                return n
        raise KeyError(f"no node with address {address} in cluster {self.name!r}")

    @abstractmethod
    def teardown(self) -> None:
        """Remove everything this cluster made; idempotent."""

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "backend": self.backend,
                "nodes": [{"name": n.name, "address": n.address} for n in self.nodes]}

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.teardown()
