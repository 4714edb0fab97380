"""The `local` backend: N nodes as network + mount namespaces on a private bridge (root, Linux).

Layout of a cluster NAME with subnet index K (10.77.K.0/24, allocated under a lock):
- a switch namespace `wrack-NAME-sw` holding the bridge `br0`. The bridge lives there, not
  in the host, because with br_netfilter loaded (Docker does) bridged frames traverse the
  FORWARD chain of the bridge's namespace, and the host's FORWARD policy may be DROP; the
  switch namespace's firewall is empty. No host iptables rule is ever added.
- the host reaches the subnet through the veth `wrack<K>h` (alias `wrack:NAME`, address
  10.77.K.1/24) whose peer `up0` is a port of the bridge; nodes have no route beyond the subnet;
- per node nI: netns `wrack-NAME-nI` with `lo` up and `eth0` = 10.77.K.(10+I); its peer
  `vI` is a port of the bridge;
- per node a holder process (`unshare --mount --propagation private`, then `sleep infinity`)
  whose private mount namespace bind-mounts the host dir `/var/lib/wrack/clusters/NAME/nI`
  at `/var/lib/wrack` (the node's `root`) and has its own tmpfs `/run`. Commands enter the
  holder's net + mount namespaces with nsenter, or go over SSH to an sshd in the node
  (`transport="ssh"`: host and client keys per cluster, verified with a written known_hosts).
- state in `/run/wrack/clusters/NAME/state.json`, so another process can `attach` and `down`.
- an owner, when the creating process sets `WRACK_CLUSTER_OWNER=TAG` (a campaign's tests do)
  or the spec's options name one (`{"owner": TAG}`: `wrack test` does): the state records
  that process (pid and start time) and TAG, and `sweep_orphans()` removes every owned
  cluster whose owner is gone (a test SIGKILLed, or killed with its Spark executor); `create`
  sweeps first, so the next test on the host removes what a crashed one left; clusters
  without an owner (`wrack cluster up`) outlive their creator by design and are never swept.

`force_down(name)` removes leftovers by name (netns prefix, bridge alias, processes whose
network namespace is one of the cluster's, directories), even with no state file.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from clusters.node import (
    Cluster,
    ClusterSpec,
    Command,
    DaemonSpec,
    ExecResult,
    Node,
    NodeError,
    NodeTimeout,
    command_str,
    env_prefix,
)
from clusters.ssh_transport import SSHNode

STATE_ROOT = Path(os.environ.get("WRACK_STATE_ROOT", "/run/wrack/clusters"))
DATA_ROOT = Path(os.environ.get("WRACK_DATA_ROOT", "/var/lib/wrack/clusters"))
NODE_ROOT = "/var/lib/wrack"
SUBNET_PREFIX = "10.77"
NAME_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,23}$")
SSH_PORT = 22


def check_name(name: str) -> str:
    """Cluster names: 1-24 of [a-z0-9-], starting with a letter or digit."""
    if not NAME_RE.match(name):
        raise ValueError(f"bad cluster name {name!r} (1-24 characters of a-z, 0-9 and -)")
    return name


def netns_name(cluster: str, node: str) -> str:
    return f"wrack-{cluster}-{node}"


def _run(argv: list[str], *, input: bytes | None = None, timeout: float = 30, check: bool = True
         ) -> subprocess.CompletedProcess[bytes]:
    p = subprocess.run(argv, input=input, capture_output=True, timeout=timeout)
    if check and p.returncode != 0:
        raise NodeError(f"`{' '.join(argv)}` exited {p.returncode}: {p.stderr.decode(errors='replace').strip()}")
    return p


# --------------------------------------------------------------------------- nodes


class NsNode(Node):
    """A local node reached with nsenter into its holder's network and mount namespaces."""

    def __init__(self, name: str, address: str, holder_pid: int, netns: str):
        super().__init__(name, address, NODE_ROOT)
        self.holder_pid = holder_pid
        self.netns = netns

    def _prefix(self) -> list[str]:
        return ["nsenter", "-t", str(self.holder_pid), "-n", "-m", "--"]

    def exec(self, cmd: Command, *, timeout: float = 60.0, env: Mapping[str, str] | None = None,
             check: bool = True, input: bytes | None = None) -> ExecResult:
        argv = ["sh", "-c", cmd] if isinstance(cmd, str) else list(cmd)
        full = [*self._prefix(), *env_prefix(env), *argv]
        try:
            p = subprocess.run(full, input=input, capture_output=True, timeout=timeout,
                               stdin=None if input is not None else subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise NodeTimeout(f"{self.name}: `{command_str(cmd)}` ran over {timeout:g} s") from None
        res = ExecResult(self.name, command_str(cmd), p.returncode, p.stdout.decode(errors="replace"),
                         p.stderr.decode(errors="replace"))
        return res.check() if check else res

    def _hostpath(self, remote: str) -> str:
        return f"/proc/{self.holder_pid}/root{os.path.abspath(remote)}"

    def write_file(self, remote: str, data: bytes | str, mode: int = 0o644) -> None:
        raw = data.encode() if isinstance(data, str) else data
        hp = self._hostpath(remote)
        os.makedirs(os.path.dirname(hp), exist_ok=True)
        tmp = hp + ".tmp"
        with open(tmp, "wb") as f:
            f.write(raw)
        os.chmod(tmp, mode)
        os.replace(tmp, hp)

    def read_file(self, remote: str) -> bytes:
        try:
            with open(self._hostpath(remote), "rb") as f:
                return f.read()
        except OSError as e:
            raise NodeError(f"{self.name}: cannot read {remote}: {e.strerror}") from None


class LocalSSHNode(SSHNode):
    """A local node reached over SSH to the sshd inside it (host key verified)."""

    def __init__(self, name: str, address: str, holder_pid: int, netns: str, key_file: str, known_hosts: str):
        super().__init__(name, address, user="root", port=SSH_PORT, key_file=key_file,
                         known_hosts=known_hosts, root=NODE_ROOT)
        self.holder_pid = holder_pid
        self.netns = netns


# --------------------------------------------------------------------------- state


@dataclass
class NodeState:
    name: str
    address: str
    netns: str
    veth: str
    holder_pid: int
    host_dir: str


@dataclass
class LocalState:
    name: str
    index: int
    bridge: str
    transport: str
    nodes: list[NodeState]
    created: float
    owner: dict[str, Any] | None = None  # {"pid", "started", "tag"}: see the module docstring

    @property
    def subnet(self) -> str:
        return f"{SUBNET_PREFIX}.{self.index}.0/24"


def state_dir(name: str) -> Path:
    return STATE_ROOT / name


def _save(st: LocalState) -> None:
    d = state_dir(st.name)
    d.mkdir(parents=True, exist_ok=True)
    tmp = d / "state.json.tmp"
    tmp.write_text(json.dumps(asdict(st), indent=1))
    os.replace(tmp, d / "state.json")


def _load(name: str) -> LocalState | None:
    try:
        raw = json.loads((state_dir(name) / "state.json").read_text())
    except (OSError, ValueError):
        return None
    raw["nodes"] = [NodeState(**n) for n in raw["nodes"]]
    return LocalState(**raw)


@contextlib.contextmanager
def _lock() -> Iterator[None]:
    STATE_ROOT.mkdir(parents=True, exist_ok=True)
    with open(STATE_ROOT.parent / "local.lock", "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _used_indices() -> set[int]:
    used: set[int] = set()
    out = _run(["ip", "-o", "-4", "addr", "show"], check=False).stdout.decode()
    out += _run(["ip", "-4", "route", "show"], check=False).stdout.decode()
    for m in re.finditer(rf"\b{re.escape(SUBNET_PREFIX)}\.(\d+)\.", out):
        used.add(int(m.group(1)))
    out = _run(["ip", "-o", "link", "show"], check=False).stdout.decode()
    for m in re.finditer(r"\bwrack(\d+)h\b", out):
        used.add(int(m.group(1)))
    if STATE_ROOT.is_dir():
        for d in STATE_ROOT.iterdir():
            st = _load(d.name)
            if st is not None:
                used.add(st.index)
    return used


# --------------------------------------------------------------------------- cluster


class LocalCluster(Cluster):
    """A running local cluster (created by `create` or found by `attach`)."""

    backend = "local"

    def __init__(self, st: LocalState):
        self.state = st
        self.name = st.name
        sd = state_dir(st.name)
        self.nodes: list[Node] = []
        for n in st.nodes:
            if st.transport == "ssh":
                self.nodes.append(LocalSSHNode(n.name, n.address, n.holder_pid, n.netns,
                                               str(sd / "id_ed25519"), str(sd / "known_hosts")))
            else:
                self.nodes.append(NsNode(n.name, n.address, n.holder_pid, n.netns))

    def nsenter_node(self, name: str) -> NsNode:
        """The nsenter view of a node (fault tools use it whatever the transport)."""
        for n in self.state.nodes:
            if n.name == name:
                return NsNode(n.name, n.address, n.holder_pid, n.netns)
        raise KeyError(name)

    def teardown(self) -> None:
        for n in self.nodes:
            if isinstance(n, SSHNode):
                n.close()
        force_down(self.name)

    def describe(self) -> dict[str, Any]:
        d = super().describe()
        d.update(transport=self.state.transport, subnet=self.state.subnet, bridge=self.state.bridge,
                 host_address=f"{SUBNET_PREFIX}.{self.state.index}.1")
        for nd, ns in zip(d["nodes"], self.state.nodes, strict=True):
            alive = Path(f"/proc/{ns.holder_pid}").exists()
            nd.update(netns=ns.netns, holder_pid=ns.holder_pid, up=alive)
        if (own := self.state.owner) is not None:
            d["owner"] = {"pid": own.get("pid"), "tag": own.get("tag"), "alive": _owner_alive(own)}
        return d


def _start_holder(netns: str, host_dir: str) -> int:
    script = ("mount --bind \"$1\" /var/lib/wrack && mount -t tmpfs -o mode=755 wrack-run /run && "
              "mkdir -p /run/sshd && echo ready && exec sleep infinity")
    p = subprocess.Popen(
        ["nsenter", f"--net=/run/netns/{netns}", "--", "unshare", "--mount", "--propagation", "private",
         "--", "sh", "-c", script, "wrack-holder", host_dir],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    assert p.stdout is not None
    line = p.stdout.readline()
    if line.strip() != b"ready":
        err = p.stderr.read().decode(errors="replace") if p.stderr else ""
        p.kill()
        p.wait()
        raise NodeError(f"{netns}: node holder failed: {err.strip()}")
    p.stdout.close()
    if p.stderr:
        p.stderr.close()
    # nsenter and unshare exec into their child: p.pid is now the `sleep infinity`.
    return p.pid


def create(spec: ClusterSpec) -> LocalCluster:
    """Bring up `spec.nodes` nodes; on any failure everything made so far is removed."""
    name = check_name(spec.name)
    if os.geteuid() != 0:
        raise PermissionError("the local backend needs root (network namespaces, bridges, mounts)")
    if not 1 <= spec.nodes <= 200:
        raise ValueError(f"--nodes must be between 1 and 200, not {spec.nodes}")
    if spec.transport not in ("nsenter", "ssh"):
        raise ValueError(f"unknown transport {spec.transport!r} (nsenter or ssh)")
    sweep_orphans()  # what crashed owners left: their subnets, bridges and mounts
    with _lock():
        if _load(name) is not None or any(n.startswith(f"wrack-{name}-n") for n in _netns_list()):
            raise FileExistsError(f"cluster {name!r} exists already (wrack cluster down --name {name})")
        used = _used_indices()
        free = [k for k in range(1, 255) if k not in used]
        if not free:
            raise RuntimeError(f"no free subnet {SUBNET_PREFIX}.K.0/24 left")
        k = free[0]
        bridge = f"wrack{k}h"
        switch = netns_name(name, "sw")
        nodes = [NodeState(f"n{i}", f"{SUBNET_PREFIX}.{k}.{10 + i}", netns_name(name, f"n{i}"),
                           f"v{i}", 0, str(DATA_ROOT / name / f"n{i}"))
                 for i in range(1, spec.nodes + 1)]
        st = LocalState(name, k, bridge, spec.transport, nodes, time.time(), _owner(spec.options.get("owner")))
        state_dir(name).mkdir(parents=True, exist_ok=True)
        _save(st)  # first, so a crash from here on is found by `down`
        try:
            batch = [f"netns add {switch}"] + [f"netns add {n.netns}" for n in nodes]
            batch += [f"link add name {bridge} type veth peer name up0 netns {switch}",
                      f"link set dev {bridge} alias wrack:{name}",
                      f"addr add {SUBNET_PREFIX}.{k}.1/24 dev {bridge}",
                      f"link set dev {bridge} up"]
            batch += [f"link add name {n.veth} netns {switch} type veth peer name eth0 netns {n.netns}"
                      for n in nodes]
            _run(["ip", "-batch", "-"], input="\n".join(batch).encode())
            sw = ["link add name br0 type bridge", "link set dev br0 up", "link set dev lo up",
                  "link set dev up0 master br0", "link set dev up0 up"]
            for n in nodes:
                sw += [f"link set dev {n.veth} master br0", f"link set dev {n.veth} up"]
            _run(["ip", "-n", switch, "-batch", "-"], input="\n".join(sw).encode())
            for n in nodes:
                Path(n.host_dir).mkdir(parents=True, exist_ok=True)

            def setup_node(n: NodeState) -> int:
                inner = "\n".join(["link set dev lo up", f"addr add {n.address}/24 dev eth0",
                                   "link set dev eth0 up"])
                _run(["ip", "-n", n.netns, "-batch", "-"], input=inner.encode())
                return _start_holder(n.netns, n.host_dir)

            with ThreadPoolExecutor(max_workers=min(16, len(nodes))) as ex:
                pids = list(ex.map(setup_node, nodes))
            for n, pid in zip(nodes, pids, strict=True):
                n.holder_pid = pid
            _save(st)
            cluster = LocalCluster(st)
            if spec.transport == "ssh":
                _start_sshd(cluster)
            return cluster
        except BaseException:
            force_down(name, locked=True)
            raise


def attach(name: str) -> LocalCluster:
    """The cluster `name` from its state file (FileNotFoundError when there is none)."""
    st = _load(check_name(name))
    if st is None:
        raise FileNotFoundError(f"no local cluster {name!r} (no {state_dir(name) / 'state.json'})")
    return LocalCluster(st)


def names() -> list[str]:
    """Clusters with a state file or leftover namespaces."""
    found = set()
    if STATE_ROOT.is_dir():
        found |= {d.name for d in STATE_ROOT.iterdir() if (d / "state.json").exists()}
    for ns in _netns_list():
        m = re.match(r"^wrack-(.+)-(?:n\d+|sw)$", ns)
        if m:
            found.add(m.group(1))
    return sorted(found)


# --------------------------------------------------------------------------- owners


OWNER_ENV = "WRACK_CLUSTER_OWNER"


def _started(pid: int) -> int | None:
    """A process's start time (clock ticks since boot), None when it is gone: with the pid it
    names one process (a pid alone may be reused)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def _owner(default: str | None = None) -> dict[str, Any] | None:
    """This process as the owner, tagged by WRACK_CLUSTER_OWNER or else `default`; None
    without either (the cluster is never swept)."""
    tag = os.environ.get(OWNER_ENV) or default
    return {"pid": os.getpid(), "started": _started(os.getpid()), "tag": tag} if tag else None


def _owner_alive(owner: dict[str, Any]) -> bool:
    """Whether the process an owner record names (pid and start time) still runs."""
    return _started(int(owner.get("pid") or 0)) == owner.get("started")


def owned(tag: str | None = None) -> list[tuple[str, int, bool]]:
    """(cluster, owner pid, owner alive) of every cluster with an owner (with `tag`, only its)."""
    out = []
    for name in names():
        st = _load(name)
        if st is None or not st.owner or (tag is not None and st.owner.get("tag") != tag):
            continue
        out.append((name, int(st.owner["pid"]), _owner_alive(st.owner)))
    return out


def sweep_orphans(tag: str | None = None) -> list[str]:
    """Remove every owned cluster (with `tag`: only its) whose owner process is gone; returns
    their names."""
    gone = [name for name, _pid, alive in owned(tag) if not alive]
    for name in gone:
        force_down(name)
    return gone


# --------------------------------------------------------------------------- sshd


def _start_sshd(cluster: LocalCluster) -> None:
    """Keys per cluster, an sshd per node, known_hosts with each node's address."""
    sd = state_dir(cluster.name)
    hostkey, clientkey = sd / "ssh_host_ed25519_key", sd / "id_ed25519"
    for k in (hostkey, clientkey):
        if not k.exists():
            _run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"wrack-{cluster.name}", "-f", str(k)])
    (sd / "authorized_keys").write_text((sd / "id_ed25519.pub").read_text())
    os.chmod(sd / "authorized_keys", 0o600)
    pub = " ".join((sd / "ssh_host_ed25519_key.pub").read_text().split()[:2])
    (sd / "known_hosts").write_text("".join(f"{n.address} {pub}\n" for n in cluster.state.nodes))
    sshd = shutil.which("sshd") or "/usr/sbin/sshd"

    def one(n: NodeState) -> None:
        node = cluster.nsenter_node(n.name)
        # the node's /run is its own: the keys go below the node's root
        node_hostkey, node_auth = node.path("sshd", "host_key"), node.path("sshd", "authorized_keys")
        node.write_file(node_hostkey, hostkey.read_bytes(), 0o600)
        node.write_file(node_auth, (sd / "authorized_keys").read_bytes(), 0o600)
        conf = (f"ListenAddress {n.address}:{SSH_PORT}\nHostKey {node_hostkey}\nAuthorizedKeysFile {node_auth}\n"
                f"PermitRootLogin prohibit-password\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
                f"UsePAM no\nStrictModes no\nPidFile none\nMaxSessions 64\nMaxStartups 64\n"
                f"AcceptEnv *\nSubsystem sftp internal-sftp\n")
        node.write_file(node.path("sshd", "sshd_config"), conf, 0o600)
        node.start_daemon(DaemonSpec("sshd", [sshd, "-D", "-e", "-f", node.path("sshd", "sshd_config")],
                                     node.path("sshd", "sshd.pid"), node.path("sshd", "sshd.log")))

    with ThreadPoolExecutor(max_workers=min(16, len(cluster.nodes))) as ex:
        list(ex.map(one, cluster.state.nodes))

    deadline = time.monotonic() + 10
    for n in cluster.state.nodes:
        while True:
            try:
                with socket.create_connection((n.address, SSH_PORT), timeout=0.5):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise NodeError(f"{n.name}: sshd not listening on {n.address}:{SSH_PORT}") from None
                time.sleep(0.02)


# --------------------------------------------------------------------------- teardown


def _netns_list() -> list[str]:
    out = _run(["ip", "netns", "list"], check=False).stdout.decode()
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def _netns_inode(ns: str) -> int | None:
    try:
        return os.stat(f"/run/netns/{ns}").st_ino
    except OSError:
        return None


def _pids_in_netns(inodes: set[int]) -> list[int]:
    pids = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            if os.stat(f"/proc/{d}/ns/net").st_ino in inodes:
                pids.append(int(d))
        except OSError:
            continue
    return pids


def _kill_all(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    for pid in pids:
        while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
            try:
                with open(f"/proc/{pid}/stat") as f:
                    if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                        with contextlib.suppress(ChildProcessError):
                            os.waitpid(pid, os.WNOHANG)
                        break
            except OSError:
                break
            time.sleep(0.005)


def force_down(name: str | None = None, *, locked: bool = False) -> list[str]:
    """Remove cluster `name` (or every `wrack-*` local cluster when None) by names, not only
    by state: processes in its namespaces, namespaces, bridge, directories. Returns what was removed."""
    if not locked:
        with _lock():
            return force_down(name, locked=True)
    removed: list[str] = []
    prefix = f"wrack-{name}-" if name else "wrack-"
    all_ns = [ns for ns in _netns_list() if ns.startswith(prefix)]
    if name is not None:
        all_ns = [ns for ns in all_ns if re.fullmatch(rf"wrack-{re.escape(name)}-(n\d+|sw)", ns)]
    inodes = {i for i in (_netns_inode(ns) for ns in all_ns) if i is not None}
    st = _load(name) if name else None
    pids = _pids_in_netns(inodes) if inodes else []
    if st is not None:
        pids += [n.holder_pid for n in st.nodes if n.holder_pid and n.holder_pid not in pids
                 and Path(f"/proc/{n.holder_pid}").exists() and _is_holder(n.holder_pid)]
    _kill_all(pids)
    removed += [f"process {p}" for p in pids]
    # the host's uplink veth by alias (wrack:NAME) or the cluster's recorded name
    out = _run(["ip", "-o", "link", "show"], check=False).stdout.decode()
    bridges = []
    for line in out.splitlines():
        m = re.match(r"^\d+:\s+(wrack\d+h)[:@]", line)
        if not m:
            continue
        alias = re.search(r"alias (\S+)", line)
        if name is None or (alias and alias.group(1) == f"wrack:{name}") or (st and st.bridge == m.group(1)):
            bridges.append(m.group(1))
    batch = [f"netns del {ns}" for ns in all_ns] + [f"link del dev {b}" for b in bridges]
    if batch:
        _run(["ip", "-force", "-batch", "-"], input="\n".join(batch).encode(), check=False)
    removed += [f"netns {ns}" for ns in all_ns] + [f"link {b}" for b in bridges]
    dirs = [STATE_ROOT / name, DATA_ROOT / name] if name else \
        [*(STATE_ROOT.iterdir() if STATE_ROOT.is_dir() else []), *(DATA_ROOT.iterdir() if DATA_ROOT.is_dir() else [])]
    for d in dirs:
        if d.exists():
            shutil.rmtree(d, ignore_errors=True)
            removed.append(f"dir {d}")
    for parent in (STATE_ROOT, DATA_ROOT):  # the parents too, once no cluster is left
        with contextlib.suppress(OSError):
            parent.rmdir()
    return removed


def _is_holder(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().startswith(b"sleep\0infinity")
    except OSError:
        return False
