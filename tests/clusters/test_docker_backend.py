"""The docker backend: apt-source parsing and hashes (pure), then real containers from the
locally built image: CLI up/status/down leaving nothing behind, the Node interface, FUSE."""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from clusters import docker_image as di
from clusters.node import DaemonSpec, NodeCommandError, NodeError, NodeTimeout

WRACK = str(Path(sys.executable).parent / "wrack")


# ----------------------------------------------------------------------------- pure parts


def test_one_line_sources_with_options_and_comments():
    text = """# comment
deb [arch=amd64 signed-by=/usr/share/keyrings/k.gpg] http://m.example/debian bookworm main contrib # tail
deb-src http://m.example/debian bookworm main
deb http://m.example/debian-security bookworm-security main
deb [broken http://m.example/x bookworm main
"""
    srcs = di.parse_one_line(text, "f.list")
    assert [(s.types, s.uris, s.suites, s.components) for s in srcs] == [
        (("deb",), ("http://m.example/debian",), ("bookworm",), ("main", "contrib")),
        (("deb-src",), ("http://m.example/debian",), ("bookworm",), ("main",)),
        (("deb",), ("http://m.example/debian-security",), ("bookworm-security",), ("main",)),
    ]
    assert srcs[0].signed_by == "/usr/share/keyrings/k.gpg" and srcs[0].origin == "f.list:2"


def test_deb822_sources_paragraphs_continuations_and_disabled():
    text = """Types: deb
URIs: http://a.example/debian
Suites: bookworm bookworm-updates
Components: main
Enabled: no

# a comment between paragraphs
Types: deb deb-src
URIs: https://b.example/debian
  http://c.example/debian
Suites: bookworm
Components: main non-free-firmware
Signed-By:
 -----BEGIN PGP PUBLIC KEY BLOCK-----
 .
 abc
 -----END PGP PUBLIC KEY BLOCK-----
"""
    a, b = di.parse_deb822(text, "x.sources")
    assert not a.enabled and a.suites == ("bookworm", "bookworm-updates")
    assert b.enabled and b.types == ("deb", "deb-src")
    assert b.uris == ("https://b.example/debian", "http://c.example/debian")
    assert b.components == ("main", "non-free-firmware")
    assert b.signed_by is None  # an inline key is no keyring file


def test_pick_mirror_takes_the_plain_suite_with_main():
    srcs = [
        *di.parse_one_line("deb http://sec.example/debian-security bookworm-security main\n"
                           "deb http://contrib.example/debian bookworm contrib\n"
                           "deb-src http://src.example/debian bookworm main\n"),
        *di.parse_deb822("Types: deb\nURIs: http://off.example/debian\nSuites: bookworm\nComponents: main\n"
                         "Enabled: no\n"),
        *di.parse_deb822("Types: deb\nURIs: cdrom:[x]/ http://good.example/debian/\nSuites: bookworm\n"
                         "Components: main\nSigned-By: /nonexistent/keyring.gpg\n"),
    ]
    assert di.pick_mirror(srcs, "bookworm") == ("http://good.example/debian", None)
    with pytest.raises(ValueError, match="trixie"):
        di.pick_mirror(srcs, "trixie")


def test_host_apt_sources_reads_every_format(tmp_path):
    (tmp_path / "sources.list").write_text("deb http://one.example/debian bookworm main\n")
    d = tmp_path / "sources.list.d"
    d.mkdir()
    (d / "b.list").write_text("deb http://two.example/debian bookworm main\n")
    (d / "a.sources").write_text("Types: deb\nURIs: http://three.example/debian\nSuites: bookworm\nComponents: main\n")
    (d / "c.list.disabled-by-farm").write_text("deb http://never.example/debian bookworm main\n")
    uris = [s.uris[0] for s in di.host_apt_sources(tmp_path)]
    assert uris == ["http://one.example/debian", "http://three.example/debian", "http://two.example/debian"]


def test_host_suite_from_os_release(tmp_path, monkeypatch):
    monkeypatch.delenv("WRACK_DEBIAN_SUITE", raising=False)
    f = tmp_path / "os-release"
    f.write_text('NAME="Debian GNU/Linux"\nVERSION_CODENAME=bookworm\n')
    assert di.host_suite(f) == "bookworm"
    f.write_text("NAME=x\n")
    with pytest.raises(ValueError, match="VERSION_CODENAME"):
        di.host_suite(f)


def test_source_hash_follows_package_files_not_caches(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[project]\nname="x"\n[tool.setuptools.packages.find]\n'
                                             'include=["pkg*"]\n')
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "m.py").write_text("A = 1\n")
    other = tmp_path / "other"
    other.mkdir()
    (other / "__init__.py").write_text("")
    h0 = di.source_hash(tmp_path)
    (pkg / "__pycache__").mkdir()
    (pkg / "__pycache__" / "m.cpython-311.pyc").write_bytes(b"junk")
    (other / "x.py").write_text("not in the wheel")
    assert di.source_hash(tmp_path) == h0
    (pkg / "m.py").write_text("A = 2\n")
    assert di.source_hash(tmp_path) != h0


def test_free_subnets_avoid_taken_networks_and_the_local_backend():
    from clusters.docker import LOCAL_BACKEND_NET, free_subnets

    taken = [ipaddress.ip_network("10.78.0.0/23"), ipaddress.ip_network("10.78.5.7/32")]
    free = free_subnets("10.76.0.0/14", taken)
    assert ipaddress.ip_network("10.78.2.0/24") in free
    assert not any(s.overlaps(t) for s in free for t in [*taken, LOCAL_BACKEND_NET])
    assert free_subnets("10.77.0.0/16", []) == []


@pytest.mark.parametrize("args", [["--nodes", "0"], ["--nodes", "201"], ["--name", "Bad Name"],
                                  ["--transport", "ssh"]])
def test_bad_up_arguments_exit_254_before_touching_docker(args):
    r = subprocess.run([WRACK, "cluster", "up", "--backend", "docker", *args], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 254, r.stderr
    assert "Traceback" not in r.stderr and "error: " in r.stderr.strip().splitlines()[-1]


# ----------------------------------------------------------------------------- real containers


def _docker_available() -> bool:
    from clusters.testing import can_run_docker

    return can_run_docker()


needs_docker = pytest.mark.skipif("not _docker_available()", reason="no Docker daemon answers")


def session_image() -> str:
    """The node image of this test process (built once), pinned for the subprocesses it starts."""
    from clusters import docker

    with di.image_lock():
        return docker.node_image(docker.client())


def wrack(*args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "WRACK_DOCKER_IMAGE": session_image()}
    return subprocess.run([WRACK, *args], capture_output=True, text=True, timeout=timeout, env=env)


def labelled(name: str) -> dict[str, list[str]]:
    from clusters import docker

    c = docker.client()
    f = {"label": f"wrack.cluster={name}"}
    return {"containers": [x.name for x in c.containers.list(all=True, filters=f)],
            "networks": [x.name for x in c.networks.list(filters=f)],
            "volumes": [x.name for x in c.volumes.list(filters=f)]}


NOTHING = {"containers": [], "networks": [], "volumes": []}


@pytest.fixture(scope="module")
def dcluster():
    """One 2-node docker cluster for the Node-interface tests of this module (removed at the end)."""
    if not _docker_available():
        pytest.skip("no Docker daemon answers")
    from clusters.testing import docker_clusters

    with docker_clusters("td") as make:
        yield make(2)


@pytest.mark.docker
@needs_docker
def test_cli_up_status_down_leaves_nothing():
    name = f"cli{uuid.uuid4().hex[:6]}"
    try:
        r = wrack("cluster", "up", "--backend", "docker", "--nodes", "3", "--name", name, "--json")
        assert r.returncode == 0, r.stderr
        up = json.loads(r.stdout)
        assert up["backend"] == "docker" and [n["name"] for n in up["nodes"]] == ["n1", "n2", "n3"]
        subnet = ipaddress.ip_network(up["subnet"])
        assert all(ipaddress.ip_address(n["address"]) in subnet for n in up["nodes"])
        assert not subnet.overlaps(ipaddress.ip_network("10.77.0.0/16"))
        assert len(labelled(name)["containers"]) == 3
        r = wrack("cluster", "status", "--backend", "docker", "--name", name, "--json")
        st = json.loads(r.stdout)
        assert r.returncode == 0 and [n["address"] for n in st["nodes"]] == [n["address"] for n in up["nodes"]]
        assert all(n["up"] for n in st["nodes"])
        assert name in wrack("cluster", "status", "--backend", "docker").stdout
        r = wrack("cluster", "up", "--backend", "docker", "--name", name)
        assert r.returncode == 254 and "exists already" in r.stderr
        assert wrack("cluster", "down", "--backend", "docker", "--name", name).returncode == 0
        assert labelled(name) == NOTHING
        r = wrack("cluster", "status", "--backend", "docker", "--name", name)
        assert r.returncode == 254 and "Traceback" not in r.stderr
    finally:
        wrack("cluster", "down", "--backend", "docker", "--force", "--name", name)


@pytest.mark.docker
@needs_docker
def test_force_down_removes_leftovers_of_a_crashed_harness():
    """A harness SIGKILLed after `up` leaves containers, network and volumes; a network and a
    volume without containers are leftovers too. `down --force` removes both by label."""
    import docker as sdk

    from clusters import docker

    name = f"crash{uuid.uuid4().hex[:6]}"
    script = ("import os,signal,sys\nfrom clusters import docker\nfrom clusters.node import ClusterSpec\n"
              f"docker.create(ClusterSpec(name={name!r}, nodes=2))\nos.kill(os.getpid(), signal.SIGKILL)\n")
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=900, cwd=str(di.ROOT),
                       env={**os.environ, "WRACK_DOCKER_IMAGE": session_image()})
    assert p.returncode == -signal.SIGKILL, p.stderr
    half = f"half{uuid.uuid4().hex[:6]}"
    c = docker.client()
    try:
        assert len(labelled(name)["containers"]) == 2
        c.networks.create(f"wrack-{half}", labels={"wrack.backend": "docker", "wrack.cluster": half}, internal=True)
        c.volumes.create(f"wrack-{half}-n1", labels={"wrack.backend": "docker", "wrack.cluster": half})
        assert {name, half} <= set(docker.names())
        st = json.loads(wrack("cluster", "status", "--backend", "docker", "--json").stdout)
        assert {"name": half, "backend": "docker", "nodes": [], "leftover": True} in st
        for n in (name, half):
            assert wrack("cluster", "down", "--backend", "docker", "--force", "--name", n).returncode == 0
            assert labelled(n) == NOTHING
    finally:
        docker.force_down(name)
        docker.force_down(half)
        with pytest.raises(sdk.errors.NotFound):
            c.networks.get(f"wrack-{half}")


@pytest.mark.docker
def test_containers_addresses_network_and_capabilities(dcluster):
    from clusters import docker

    c = docker.client()
    net = c.networks.get(f"wrack-{dcluster.name}")
    assert net.attrs["Internal"] is True
    subnet = ipaddress.ip_network(net.attrs["IPAM"]["Config"][0]["Subnet"])
    for n in dcluster.nodes:
        ct = c.containers.get(n.container_id)
        assert ct.labels["wrack.cluster"] == dcluster.name and ct.labels["wrack.node"] == n.name
        hc = ct.attrs["HostConfig"]
        assert {"NET_ADMIN", "SYS_ADMIN"} <= set(hc["CapAdd"])
        assert any(d["PathOnHost"] == "/dev/fuse" for d in hc["Devices"])
        assert ct.image.labels["wrack.image"] == "node"
        assert ipaddress.ip_address(n.address) in subnet
        out = n.exec(["ip", "-o", "-4", "addr", "show"]).stdout
        assert n.address in out and "127.0.0.1" in out
        assert "default" not in n.exec(["ip", "-4", "route"]).stdout
        assert n.exec(["hostname"]).stdout.strip() == n.name
        # the project and its node dependencies are in the image, on PATH
        assert n.exec(["sh", "-c", "command -v wrack-broker"]).stdout.strip() == "/opt/wrack/venv/bin/wrack-broker"
        n.exec(["python3", "-c", "import broker, nemesis, clusters, mfusepy, libfaketime, kio, orjson, crc32c"])


@pytest.mark.docker
def test_exec_result_env_timeout_stdin_and_errors(dcluster):
    n = dcluster.nodes[0]
    r = n.exec("echo out; echo err >&2; exit 3", check=False)
    assert (r.exit_code, r.stdout, r.stderr) == (3, "out\n", "err\n")
    with pytest.raises(NodeCommandError, match="exited 3"):
        n.exec("exit 3")
    assert n.exec(["sh", "-c", "echo $X"], env={"X": "y z"}).stdout == "y z\n"
    t = time.monotonic()
    with pytest.raises(NodeTimeout):
        n.exec(["sleep", "30"], timeout=0.5)
    assert time.monotonic() - t < 25  # the deadline, not the command's end
    # the deadline killed the command's process group in the node
    assert "sleep 30" not in n.exec(["ps", "-eo", "args"]).stdout
    assert n.exec(["cat"], input=b"abc").stdout == "abc"
    big = os.urandom(2_000_000)
    assert n.exec(["sh", "-c", "wc -c"], input=big).stdout.strip() == str(len(big))
    assert n.exec(["sh", "-c", "kill -9 $$"], check=False, timeout=5).exit_code == 137  # not a timeout
    assert n.exec(["no-such-command"], check=False).exit_code == 127


@pytest.mark.docker
def test_files_roundtrip_and_each_node_has_its_own_filesystem(dcluster, tmp_path):
    a, b = dcluster.nodes
    src = tmp_path / "f.bin"
    src.write_bytes(os.urandom(1_000_000))
    a.upload(src, a.path("dir", "sub", "f.bin"))
    a.fetch(a.path("dir", "sub", "f.bin"), tmp_path / "back.bin")
    assert (tmp_path / "back.bin").read_bytes() == src.read_bytes()
    assert a.fetch_tree(a.path("dir"), tmp_path / "tree")
    assert (tmp_path / "tree" / "sub" / "f.bin").read_bytes() == src.read_bytes()
    assert not a.fetch_tree(a.path("nope"), tmp_path / "none")
    a.write_file(a.path("only-a"), "a", mode=0o600)
    assert a.exec(["stat", "-c", "%a", a.path("only-a")]).stdout.strip() == "600"
    assert not b.exec(["test", "-e", b.path("only-a")], check=False).ok
    with pytest.raises(NodeError, match="cannot read"):
        b.read_file(b.path("only-a"))


@pytest.mark.docker
def test_daemons_signals_and_tcp_between_nodes_and_host(dcluster):
    a, b = dcluster.nodes
    script = ("import socket,sys;s=socket.socket();s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1);"
              "s.bind((sys.argv[1],7100));s.listen(16)\nwhile True:\n c,_=s.accept();c.sendall(b'hi');c.close()")
    spec = DaemonSpec("listen", ["python3", "-c", script, a.address], a.path("l.pid"), a.path("l.log"))
    pid = a.start_daemon(spec)
    assert a.daemon_pid(spec.pidfile) == pid and a.daemon_running(spec.pidfile)
    deadline = time.monotonic() + 20
    while True:  # the harness (host) reaches the node
        try:
            with socket.create_connection((a.address, 7100), timeout=1) as s:
                assert s.recv(2) == b"hi"
            break
        except OSError:
            assert time.monotonic() < deadline
            time.sleep(0.05)
    probe = (f"import socket;s=socket.create_connection(('{a.address}',7100),timeout=2);"
             "assert s.recv(2)==b'hi'")
    b.exec(["python3", "-c", probe])  # and the other node does
    a.signal_daemon(spec.pidfile, signal.SIGSTOP)
    assert a.daemon_state(spec.pidfile).stopped
    a.signal_daemon(spec.pidfile, signal.SIGCONT)
    assert not a.daemon_state(spec.pidfile).stopped
    a.signal_daemon(spec.pidfile, signal.SIGKILL)
    assert a.wait_daemon_exit(spec.pidfile, 5)
    assert not a.daemon_running(spec.pidfile)  # reaped by the container's init
    assert not a.signal_daemon(a.path("nope.pid"), signal.SIGTERM)


HELLOFS = '''
import errno, stat, sys
import mfusepy as fuse

class Hello(fuse.Operations):
    def getattr(self, path, fh=None):
        if path == "/":
            return {"st_mode": stat.S_IFDIR | 0o755, "st_nlink": 2}
        if path == "/hello":
            return {"st_mode": stat.S_IFREG | 0o444, "st_nlink": 1, "st_size": 6}
        raise fuse.FuseOSError(errno.ENOENT)
    def readdir(self, path, fh):
        return [".", "..", "hello"]
    def read(self, path, size, offset, fh):
        return b"hello\\n"[offset:offset + size]

fuse.FUSE(Hello(), sys.argv[1], foreground=True, ro=True)
'''


@pytest.mark.docker
def test_a_fuse_filesystem_mounts_inside_one_container_only(dcluster):
    a, b = dcluster.nodes
    mnt = a.path("fuse-mnt")
    a.write_file(a.path("hellofs.py"), HELLOFS)
    a.exec(["mkdir", "-p", mnt])
    spec = DaemonSpec("hellofs", ["python3", a.path("hellofs.py"), mnt], a.path("fs.pid"), a.path("fs.log"))
    a.start_daemon(spec)
    try:
        a.exec(["sh", "-c", f"i=0; until grep -q ' {mnt} fuse' /proc/mounts; do i=$((i+1)); "
                            f"[ $i -gt 200 ] && exit 1; sleep 0.05; done"], timeout=30)
        assert a.read_file(f"{mnt}/hello") == b"hello\n"  # files are read through the node, mounts included
        assert f" {mnt} fuse" not in b.exec(["cat", "/proc/mounts"]).stdout
        assert f" {mnt} " not in Path("/proc/mounts").read_text()
    finally:
        a.exec(["fusermount3", "-u", mnt], check=False)
        a.signal_daemon(spec.pidfile, signal.SIGKILL)


@pytest.mark.docker
def test_attach_finds_the_cluster_and_the_image_is_cached(dcluster):
    from clusters import docker

    again = docker.attach(dcluster.name)
    assert [(n.name, n.address) for n in again.nodes] == [(n.name, n.address) for n in dcluster.nodes]
    assert again.nodes[1].exec(["true"]).ok
    d = again.describe()
    assert d["network"] == f"wrack-{dcluster.name}" and all(n["up"] for n in d["nodes"])
    # a second cluster in this process reuses its image (no rebuild, whatever changed since)
    with di.image_lock():
        assert docker.node_image(docker.client()) == d["image"]
    with pytest.raises(FileNotFoundError):
        docker.attach("no-such-cluster-zz")


@pytest.mark.docker
@pytest.mark.root
@needs_docker
def test_the_leftovers_of_a_killed_image_build_are_cleaned(tmp_path, monkeypatch):
    from clusters import docker

    c = docker.client()
    image = session_image()
    ct = c.containers.create(image, ["true"], network_mode="none", labels={"wrack.build": "wrack-node:test"})
    monkeypatch.setenv("WRACK_ROOTFS_TMP", str(tmp_path))
    stale = tmp_path / "wrack-rootfs-killed"
    (stale / "rootfs" / "proc").mkdir(parents=True)
    subprocess.run(["mount", "-t", "tmpfs", "wrack-test-stale", str(stale / "rootfs" / "proc")], check=True)
    try:
        with di.image_lock():
            removed = di.clean_stale_builds(c)
        assert f"container {ct.name}" in removed and f"dir {stale}" in removed
        assert not stale.exists() and "wrack-test-stale" not in Path("/proc/mounts").read_text()
        assert not c.containers.list(all=True, filters={"label": "wrack.build"})
    finally:
        subprocess.run(["umount", "-l", str(stale / "rootfs" / "proc")], capture_output=True)
        import docker as sdk

        with contextlib.suppress(sdk.errors.NotFound):
            ct.remove(force=True)
