"""The `docker` backend: N containers from a locally built image on a private network.

Layout of a cluster NAME (everything labelled `wrack.backend=docker`, `wrack.cluster=NAME`):
- the image `wrack-node:H` (clusters/docker_image.py: debootstrap rootfs + Python + the
  project's wheel, cached by content hash, never pulled);
- a user-defined bridge network `wrack-NAME`, `internal` (no route out of the host), with a
  /24 from 10.78.0.0/16 (`WRACK_DOCKER_POOL`) that overlaps no docker network and no host
  address or route (so never the local backend's 10.77.0.0/16); the host is `.1`;
- per node nI: a container `wrack-NAME-nI` (hostname and network alias `nI`, address
  `.(10+I)`, no default route), running `sleep infinity` under docker-init, with NET_ADMIN (iptables
  partitions), SYS_ADMIN and /dev/fuse (the FUSE power-loss filesystem; AppArmor unconfined
  where the daemon uses AppArmor, docker's default seccomp profile, which allows mount(2)
  with SYS_ADMIN); a named volume `wrack-NAME-nI` at `/var/lib/wrack` (the node's root: off
  the storage driver, so the broker's fsyncs hit a real filesystem).

Commands go through the Docker API (`exec`), wrapped in `timeout -s KILL` so a deadline
kills the command's process group in the node. Files are streamed through exec's stdin and
stdout, not `put_archive`/`get_archive`: the archive API works on the container's filesystem
from outside and does not see mounts made inside the node (a FUSE data dir).

Docker is the state: `attach`, `names` and `force_down` find clusters by label, so `down
--force` removes containers, networks and volumes even after the harness crashed. Images
stay cached.
"""

from __future__ import annotations

import contextlib
import io
import ipaddress
import os
import re
import socket
import subprocess
import tarfile
import threading
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from clusters.docker_image import VENV, ensure_image, image_lock
from clusters.local import check_name
from clusters.node import Cluster, ClusterSpec, Command, ExecResult, Node, NodeError, NodeTimeout, command_str

NODE_ROOT = "/var/lib/wrack"
POOL = os.environ.get("WRACK_DOCKER_POOL", "10.78.0.0/16")
LOCAL_BACKEND_NET = ipaddress.ip_network("10.77.0.0/16")
L_BACKEND, L_CLUSTER, L_NODE, L_INDEX, L_ADDRESS = (
    "wrack.backend", "wrack.cluster", "wrack.node", "wrack.index", "wrack.address")
EXIT_KILLED = 137  # `timeout -s KILL` when the deadline passed


# --------------------------------------------------------------------------- client


_clients: dict[int, Any] = {}
_clients_lock = threading.Lock()


def client() -> Any:
    """A docker client for this process (ValueError when no daemon answers)."""
    with _clients_lock:
        c = _clients.get(os.getpid())
        if c is not None:
            return c
        try:
            # lazy: docker (harness extra) may be absent (-> ValueError) and takes ~0.3 s
            import docker
        except ModuleNotFoundError:
            raise ValueError("the docker backend needs the `docker` package (harness extra)") from None
        try:
            c = docker.from_env(timeout=600, max_pool_size=64)
            c.ping()
        except docker.errors.DockerException as e:
            raise ValueError(f"no Docker daemon answers ({str(e).splitlines()[0][:200]})") from None
        _clients[os.getpid()] = c
        return c


_images: dict[int, str] = {}


def node_image(c: Any) -> str:
    """The node image for this process: built or refreshed at its first cluster, then reused
    while it exists (a process runs the code it imported; `wrack cluster up` is a new process,
    so it always gets the current source). `WRACK_DOCKER_IMAGE=TAG` pins an existing image
    instead. Call under `image_lock()`."""
    # lazy: docker: see client()
    import docker

    pinned = os.environ.get("WRACK_DOCKER_IMAGE")
    if pinned:
        try:
            c.images.get(pinned)
            return pinned
        except docker.errors.ImageNotFound:
            raise ValueError(f"WRACK_DOCKER_IMAGE={pinned}: no such image") from None
    tag = _images.get(os.getpid())
    if tag is not None:
        try:
            c.images.get(tag)
            return tag
        except docker.errors.ImageNotFound:
            pass
    tag = ensure_image(c)
    _images[os.getpid()] = tag
    return tag


def available() -> bool:
    """True when a Docker daemon answers (tests skip otherwise)."""
    try:
        client()
        return True
    except ValueError:
        return False


# --------------------------------------------------------------------------- nodes


class DockerNode(Node):
    """A node in a container, reached through the Docker API."""

    python = f"{VENV}/bin/python"  # the project's interpreter in the image (nemesis.nodeside)

    def __init__(self, name: str, address: str, container: str, container_id: str):
        super().__init__(name, address, NODE_ROOT)
        self.container = container
        self.container_id = container_id

    def _run(self, argv: list[str], *, timeout: float, env: Mapping[str, str] | None,
             input: bytes | None) -> tuple[int, bytes, bytes]:
        """(exit code, stdout, stderr) of argv in the container; NodeTimeout past `timeout`."""
        # lazy: docker: see client()
        from docker.utils.socket import consume_socket_output, demux_adaptor, frames_iter

        api = client().api
        full = ["timeout", "-s", "KILL", f"{max(timeout, 0.001):g}", *argv]
        t0 = time.monotonic()
        try:
            eid = api.exec_create(self.container_id, full, stdin=input is not None, stdout=True, stderr=True,
                                  environment=dict(env) if env else None)["Id"]
            sock = api.exec_start(eid, socket=True)
        except Exception as e:  # docker.errors.APIError and connection errors
            raise NodeError(f"{self.name}: docker exec failed: {str(e).splitlines()[0][:300]}") from None
        raw = getattr(sock, "_sock", sock)
        try:
            raw.settimeout(timeout + 30)
            if input is not None:
                raw.sendall(input)
                raw.shutdown(socket.SHUT_WR)
            out, err = consume_socket_output((demux_adaptor(*f) for f in frames_iter(sock, False)), demux=True)
        except OSError:  # socket.timeout: the daemon did not end the command
            raise NodeTimeout(f"{self.name}: `{command_str(argv)}` ran over {timeout:g} s") from None
        finally:
            with contextlib.suppress(OSError):
                sock.close()
        code = self._exit_code(api, eid)
        if code == EXIT_KILLED and time.monotonic() - t0 >= timeout:
            raise NodeTimeout(f"{self.name}: `{command_str(argv)}` ran over {timeout:g} s")
        return code, out or b"", err or b""

    def _exit_code(self, api: Any, eid: str) -> int:
        deadline = time.monotonic() + 10
        while True:
            try:
                info = api.exec_inspect(eid)
            except Exception as e:  # the container went away meanwhile
                raise NodeError(f"{self.name}: docker exec {eid[:12]}: {str(e).splitlines()[0][:300]}") from None
            if not info.get("Running") and info.get("ExitCode") is not None:
                return int(info["ExitCode"])
            if time.monotonic() > deadline:
                raise NodeError(f"{self.name}: docker exec {eid[:12]} still running after its output ended")
            time.sleep(0.002)

    def exec(self, cmd: Command, *, timeout: float = 60.0, env: Mapping[str, str] | None = None,
             check: bool = True, input: bytes | None = None) -> ExecResult:
        argv = ["sh", "-c", cmd] if isinstance(cmd, str) else list(cmd)
        code, out, err = self._run(argv, timeout=timeout, env=env, input=input)
        res = ExecResult(self.name, command_str(cmd), code, out.decode(errors="replace"),
                         err.decode(errors="replace"))
        return res.check() if check else res

    def write_file(self, remote: str, data: bytes | str, mode: int = 0o644) -> None:
        raw = data.encode() if isinstance(data, str) else data
        d = os.path.dirname(remote) or "/"
        script = 'mkdir -p "$1" && cat > "$2.tmp" && chmod "$3" "$2.tmp" && mv -f "$2.tmp" "$2"'
        code, _, err = self._run(["sh", "-c", script, "write", d, remote, f"{mode:o}"], timeout=120,
                                 env=None, input=raw)
        if code != 0:
            raise NodeError(f"{self.name}: cannot write {remote}: {err.decode(errors='replace').strip()[:300]}")

    def read_file(self, remote: str) -> bytes:
        code, out, err = self._run(["cat", remote], timeout=120, env=None, input=None)
        if code != 0:
            raise NodeError(f"{self.name}: cannot read {remote}: {err.decode(errors='replace').strip()[:300]}")
        return out

    def fetch_tree(self, remote: str, local: str | os.PathLike[str]) -> bool:
        # gzip: a data directory holds preallocated files (etcd's 64 MB WAL segments) that are
        # mostly zeros, and the exec stream is slow (uncompressed: minutes per node)
        code, out, _ = self._run(["sh", "-c", 'test -d "$1" && tar -C "$1" -czf - .', "fetch", remote],
                                 timeout=300, env=None, input=None)
        if code != 0:
            return False
        Path(local).mkdir(parents=True, exist_ok=True)
        with tarfile.open(fileobj=io.BytesIO(out)) as tf:
            tf.extractall(local, filter="data")
        return True


# --------------------------------------------------------------------------- cluster


class DockerCluster(Cluster):
    """A running docker cluster, rebuilt from the containers' labels."""

    backend = "docker"

    def __init__(self, name: str, containers: list[Any], network: Any | None):
        self.name = name
        self.network = network
        self.containers = containers
        self.nodes: list[Node] = [
            DockerNode(c.labels[L_NODE], c.labels[L_ADDRESS], c.name, c.id) for c in containers]

    def teardown(self) -> None:
        force_down(self.name)

    def describe(self) -> dict[str, Any]:
        d = super().describe()
        ipam = (self.network.attrs.get("IPAM", {}).get("Config") or [{}])[0] if self.network else {}
        d.update(network=self.network.name if self.network else None, subnet=ipam.get("Subnet"),
                 host_address=ipam.get("Gateway"),
                 image=self.containers[0].attrs.get("Config", {}).get("Image") if self.containers else None)
        for nd, c in zip(d["nodes"], self.containers, strict=True):
            nd.update(container=c.name, id=c.short_id, up=c.status == "running")
        return d


def _labels(name: str, **more: str) -> dict[str, str]:
    return {L_BACKEND: "docker", L_CLUSTER: name, **more}


def _filters(name: str | None) -> dict[str, Any]:
    return {"label": [f"{L_BACKEND}=docker", *([f"{L_CLUSTER}={name}"] if name else [])]}


def _host_networks() -> list[ipaddress.IPv4Network]:
    """Networks the host has addresses in or routes to (default routes excluded)."""
    out = ""
    for argv in (["ip", "-4", "-o", "addr", "show"], ["ip", "-4", "route", "show", "table", "all"]):
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            out += subprocess.run(argv, capture_output=True, text=True, timeout=10).stdout + "\n"
    nets = []
    for m in re.finditer(r"\b(\d+\.\d+\.\d+\.\d+(?:/\d+)?)\b", out):
        with contextlib.suppress(ValueError):
            net = ipaddress.ip_network(m.group(1), strict=False)
            if net.prefixlen > 0 and not net.is_loopback:
                nets.append(net)
    return nets


def _docker_networks(c: Any) -> list[ipaddress.IPv4Network]:
    nets = []
    for n in c.networks.list():
        for cfg in (n.attrs.get("IPAM") or {}).get("Config") or []:
            with contextlib.suppress(ValueError, TypeError):
                nets.append(ipaddress.ip_network(cfg.get("Subnet"), strict=False))
    return nets


def free_subnets(pool: str, taken: list[Any]) -> list[ipaddress.IPv4Network]:
    """The /24s of `pool` that overlap nothing in `taken` nor the local backend's 10.77/16."""
    v4 = [t for t in taken if t.version == 4]
    return [s for s in ipaddress.ip_network(pool).subnets(new_prefix=24)
            if not s.overlaps(LOCAL_BACKEND_NET) and not any(s.overlaps(t) for t in v4)]


def _create_network(c: Any, name: str) -> tuple[Any, ipaddress.IPv4Network]:
    # lazy: docker: see client()
    import docker

    taken = _host_networks() + _docker_networks(c)
    for subnet in free_subnets(POOL, taken):
        hosts = list(subnet.hosts())
        ipam = docker.types.IPAMConfig(pool_configs=[docker.types.IPAMPool(subnet=str(subnet),
                                                                           gateway=str(hosts[0]))])
        try:
            net = c.networks.create(f"wrack-{name}", driver="bridge", ipam=ipam, internal=True,
                                    labels=_labels(name), check_duplicate=True)
            return net, subnet
        except docker.errors.APIError as e:
            if "overlap" in str(e).lower():
                continue  # taken by something we did not see: try the next one
            raise
    raise RuntimeError(f"no free /24 left in {POOL} for a docker cluster")


def create(spec: ClusterSpec) -> DockerCluster:
    """Build/refresh the image, then bring up `spec.nodes` containers; on any failure
    everything made so far is removed."""
    name = check_name(spec.name)
    if not 1 <= spec.nodes <= 200:
        raise ValueError(f"--nodes must be between 1 and 200, not {spec.nodes}")
    if spec.transport != "nsenter":
        raise ValueError("the docker backend runs commands through the Docker API (no --transport ssh)")
    c = client()
    with image_lock():
        if name in names():
            raise FileExistsError(f"docker cluster {name!r} exists already, or its leftovers do "
                                  f"(wrack cluster down --backend docker --force --name {name})")
        image = node_image(c)
        try:
            net, subnet = _create_network(c, name)
            hosts = list(subnet.hosts())
            security = ["apparmor:unconfined"] if any(
                "apparmor" in s for s in c.info().get("SecurityOptions") or []) else []

            def one(i: int) -> Any:
                node, addr = f"n{i}", str(hosts[9 + i])
                cname = f"wrack-{name}-{node}"
                labels = _labels(name, **{L_NODE: node, L_INDEX: str(i), L_ADDRESS: addr})
                c.volumes.create(cname, labels=labels)
                return c.containers.run(
                    image, ["sleep", "infinity"], name=cname, hostname=node, detach=True, init=True,
                    labels=labels, network=net.name,
                    networking_config={net.name: c.api.create_endpoint_config(ipv4_address=addr, aliases=[node])},
                    cap_add=["NET_ADMIN", "SYS_ADMIN"], devices=["/dev/fuse:/dev/fuse:rwm"],
                    security_opt=security, volumes={cname: {"bind": NODE_ROOT, "mode": "rw"}})

            with ThreadPoolExecutor(max_workers=min(8, spec.nodes)) as ex:
                containers = list(ex.map(one, range(1, spec.nodes + 1)))
            for ct in containers:
                ct.reload()
                if ct.status != "running":
                    raise NodeError(f"container {ct.name} is {ct.status}: {ct.logs(tail=3).decode(errors='replace')}")
            cluster = DockerCluster(name, containers, net)
            # like the local backend: only the cluster's subnet is routable from a node
            with ThreadPoolExecutor(max_workers=min(8, spec.nodes)) as ex:
                list(ex.map(lambda n: n.exec(["ip", "route", "del", "default"], check=False, timeout=30),
                            cluster.nodes))
            return cluster
        except BaseException:
            force_down(name)
            raise


def attach(name: str) -> DockerCluster:
    """The cluster `name` from its containers' labels (FileNotFoundError when there are none)."""
    check_name(name)
    c = client()
    containers = c.containers.list(all=True, filters=_filters(name))
    if not containers:
        raise FileNotFoundError(f"no docker cluster {name!r} (no containers labelled {L_CLUSTER}={name})")
    containers.sort(key=lambda ct: int(ct.labels.get(L_INDEX, "0")))
    nets = c.networks.list(filters=_filters(name))
    return DockerCluster(name, containers, nets[0] if nets else None)


def names() -> list[str]:
    """Clusters with containers, networks or volumes of this backend (leftovers included)."""
    c = client()
    found: set[str] = set()
    for obj in [*c.containers.list(all=True, filters=_filters(None)), *c.networks.list(filters=_filters(None)),
                *c.volumes.list(filters=_filters(None))]:
        labels = obj.attrs.get("Labels") or getattr(obj, "labels", None) or {}
        if L_CLUSTER in labels:
            found.add(labels[L_CLUSTER])
    return sorted(found)


def force_down(name: str | None = None) -> list[str]:
    """Remove the containers, networks and volumes labelled for cluster `name` (every docker
    cluster when None), whatever state they are in. Images stay. Returns what was removed."""
    # lazy: docker: see client()
    import docker

    c = client()
    removed: list[str] = []
    containers = c.containers.list(all=True, filters=_filters(name))

    def rm_container(ct: Any) -> str:
        with contextlib.suppress(docker.errors.NotFound):
            ct.remove(force=True)
        return f"container {ct.name}"

    if containers:
        with ThreadPoolExecutor(max_workers=min(8, len(containers))) as ex:
            removed += list(ex.map(rm_container, containers))
    for net in c.networks.list(filters=_filters(name)):
        with contextlib.suppress(docker.errors.NotFound):
            net.remove()
            removed.append(f"network {net.name}")
    for vol in c.volumes.list(filters=_filters(name)):
        with contextlib.suppress(docker.errors.NotFound):
            vol.remove(force=True)
            removed.append(f"volume {vol.name}")
    return removed
