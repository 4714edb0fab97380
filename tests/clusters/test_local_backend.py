"""The local backend on real namespaces: addresses, isolation of mounts, exec, files, state."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from clusters import local
from clusters.node import NodeCommandError, NodeTimeout
from harness.netutil import wait_port

pytestmark = pytest.mark.root


def test_nodes_have_own_addresses_and_reach_each_other(make_cluster):
    c = make_cluster(3)
    addrs = [n.address for n in c.nodes]
    assert len(set(addrs)) == 3 and all(a.startswith("10.77.") for a in addrs)
    for n in c.nodes:
        out = n.exec(["ip", "-o", "-4", "addr", "show"]).stdout
        assert n.address in out and "127.0.0.1" in out
        # only the cluster's subnet is routable from inside a node
        routes = n.exec(["ip", "-4", "route"]).stdout
        assert "default" not in routes
    # node-to-node and host-to-node TCP (a listener in n1)
    srv = c.nodes[0].start_daemon(local_daemon(c.nodes[0], 7100))
    assert srv > 0
    wait_port(c.nodes[0].address, 7100, 10.0)
    code = c.nodes[1].exec(["python3", "-c", connect_script(c.nodes[0].address, 7100)], check=False).exit_code
    assert code == 0


def test_each_node_has_its_own_mount_namespace(make_cluster):
    c = make_cluster(2)
    a, b = c.nodes
    a.write_file(a.path("only-a"), "a")
    assert a.exec(["cat", a.path("only-a")]).stdout == "a"
    assert not b.exec(["test", "-e", b.path("only-a")], check=False).ok
    # a mount made in one node is invisible in the other and on the host
    a.exec(["mkdir", "-p", a.path("m")])
    a.exec(["mount", "-t", "tmpfs", "wrack-test", a.path("m")])
    assert "wrack-test" in a.exec(["cat", "/proc/mounts"]).stdout
    assert "wrack-test" not in b.exec(["cat", "/proc/mounts"]).stdout
    assert "wrack-test" not in Path("/proc/mounts").read_text()


def test_exec_result_env_timeout_and_errors(make_cluster):
    c = make_cluster(1)
    n = c.nodes[0]
    r = n.exec("echo out; echo err >&2; exit 3", check=False)
    assert (r.exit_code, r.stdout, r.stderr) == (3, "out\n", "err\n")
    with pytest.raises(NodeCommandError, match="exited 3"):
        n.exec("exit 3")
    assert n.exec(["sh", "-c", "echo $X"], env={"X": "y"}).stdout == "y\n"
    with pytest.raises(NodeTimeout):
        n.exec(["sleep", "5"], timeout=0.3)
    assert n.exec(["cat"], input=b"abc").stdout == "abc"


def test_files_roundtrip(make_cluster, tmp_path):
    c = make_cluster(1)
    n = c.nodes[0]
    src = tmp_path / "f.bin"
    src.write_bytes(os.urandom(100_000))
    n.upload(src, n.path("dir", "f.bin"))
    n.fetch(n.path("dir", "f.bin"), tmp_path / "back.bin")
    assert (tmp_path / "back.bin").read_bytes() == src.read_bytes()
    assert n.fetch_tree(n.path("dir"), tmp_path / "tree")
    assert (tmp_path / "tree" / "f.bin").read_bytes() == src.read_bytes()


def test_daemon_signals_and_state(make_cluster):
    import signal

    c = make_cluster(1)
    n = c.nodes[0]
    spec = local_daemon(n, 7101)
    pid = n.start_daemon(spec)
    assert n.daemon_pid(spec.pidfile) == pid and n.daemon_running(spec.pidfile)
    n.signal_daemon(spec.pidfile, signal.SIGSTOP)
    assert n.daemon_state(spec.pidfile).stopped
    n.signal_daemon(spec.pidfile, signal.SIGCONT)
    assert not n.daemon_state(spec.pidfile).stopped
    n.signal_daemon(spec.pidfile, signal.SIGKILL)
    assert n.wait_daemon_exit(spec.pidfile, 5)
    assert not n.daemon_running(spec.pidfile)
    assert not n.signal_daemon(n.path("nope.pid"), signal.SIGTERM)


def test_attach_from_state_and_teardown_removes_everything(make_cluster):
    c = make_cluster(3)
    again = local.attach(c.name)
    assert [n.address for n in again.nodes] == [n.address for n in c.nodes]
    assert again.nodes[2].exec(["true"]).ok
    holders = [n.holder_pid for n in c.state.nodes]
    again.teardown()
    assert not any(ns.startswith(f"wrack-{c.name}-") for ns in local._netns_list())
    assert c.state.bridge not in subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    assert not any(os.path.exists(f"/proc/{p}") and local._is_holder(p) for p in holders)
    assert not local.state_dir(c.name).exists()
    with pytest.raises(FileNotFoundError):
        local.attach(c.name)


def test_bad_requests():
    with pytest.raises(ValueError):
        local.check_name("Bad Name!")


# ----------------------------------------------------------------------------- helpers

def local_daemon(node, port):
    from clusters.node import DaemonSpec

    script = ("import socket;s=socket.socket();s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1);"
              f"s.bind(('{node.address}',{port}));s.listen(16)\n"
              "while True:\n c,_=s.accept();c.sendall(b'hi');c.close()")
    return DaemonSpec(f"listen{port}", ["python3", "-c", script], node.path(f"l{port}.pid"),
                      node.path(f"l{port}.log"))


def connect_script(addr, port, timeout=1.0):
    return (f"import socket,sys\ntry:\n socket.create_connection(('{addr}',{port}),timeout={timeout}).close()\n"
            "except OSError: sys.exit(1)")
