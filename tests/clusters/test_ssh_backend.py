"""SSH for real: the local backend's ssh transport and the ssh backend against sshd inside
local nodes, host keys verified (unknown keys refused, insecure only when asked)."""

from __future__ import annotations

import signal
import subprocess

import pytest
import yaml

from clusters import ssh
from clusters.node import ClusterSpec, DaemonSpec, NodeError, NodeTimeout
from clusters.ssh_transport import SSHNode

pytestmark = pytest.mark.root


def test_ssh_transport_runs_commands_daemons_and_files(make_cluster):
    c = make_cluster(2, transport="ssh")
    n1, n2 = c.nodes
    assert isinstance(n1, SSHNode)
    r = n1.exec("echo $X; echo e >&2; exit 4", env={"X": "y"}, check=False)
    assert (r.exit_code, r.stdout, r.stderr) == (4, "y\n", "e\n")
    assert n1.address in n1.exec(["ip", "-o", "-4", "addr"]).stdout
    n1.write_file(n1.path("f"), b"\x00\x01data")
    assert n1.read_file(n1.path("f")) == b"\x00\x01data"
    assert not n2.exec(["test", "-e", n2.path("f")], check=False).ok
    spec = DaemonSpec("sleeper", ["sleep", "300"], n1.path("s.pid"), n1.path("s.log"))
    n1.start_daemon(spec)
    assert n1.daemon_running(spec.pidfile)
    n1.signal_daemon(spec.pidfile, signal.SIGSTOP)
    assert n1.daemon_state(spec.pidfile).stopped
    n1.signal_daemon(spec.pidfile, signal.SIGKILL)
    assert n1.wait_daemon_exit(spec.pidfile, 5)
    with pytest.raises(NodeTimeout):
        n1.exec(["sleep", "10"], timeout=1)


def _inventory(tmp_path, c, known_hosts):
    from clusters.local import state_dir

    sd = state_dir(c.name)
    inv = {"root": "/var/lib/wrack/remote", "known_hosts": str(known_hosts),
           "hosts": [{"name": f"h{i}", "address": n.address, "key": str(sd / "id_ed25519")}
                     for i, n in enumerate(c.nodes, 1)]}
    p = tmp_path / "inventory.yaml"
    p.write_text(yaml.safe_dump(inv))
    return p


def test_ssh_backend_verifies_host_keys(make_cluster, tmp_path, monkeypatch):
    from clusters.local import state_dir

    monkeypatch.setattr(ssh, "STATE_ROOT", tmp_path / "state")
    c = make_cluster(2, transport="ssh")
    inv = _inventory(tmp_path, c, state_dir(c.name) / "known_hosts")
    cl = ssh.create(ClusterSpec(name="inv", options={"inventory": str(inv)}))
    try:
        assert [n.exec(["hostname", "-I"]).stdout.split()[0] for n in cl.nodes] == [n.address for n in c.nodes]
        assert ssh.names() == ["inv"]
        again = ssh.attach("inv")
        again.nodes[0].write_file(again.nodes[0].path("x"), "1")
    finally:
        cl.teardown()
    assert not c.nodes[0].exec(["test", "-e", "/var/lib/wrack/remote"], check=False).ok
    assert ssh.names() == []

    # a known_hosts with another key: refused
    other = tmp_path / "other_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    pub = " ".join(other.with_suffix(".pub").read_text().split()[:2])
    bad = tmp_path / "bad_known_hosts"
    bad.write_text("".join(f"{n.address} {pub}\n" for n in c.nodes))
    with pytest.raises(NodeError, match="refused"):
        ssh.create(ClusterSpec(name="bad", options={"inventory": str(_inventory(tmp_path, c, bad))}))
    # an empty known_hosts: unknown key, refused; accepted only with insecure
    empty = tmp_path / "empty_known_hosts"
    empty.write_text("")
    inv_empty = str(_inventory(tmp_path, c, empty))
    with pytest.raises(NodeError, match="refused"):
        ssh.create(ClusterSpec(name="bad", options={"inventory": inv_empty}))
    cl = ssh.create(ClusterSpec(name="insec", options={"inventory": inv_empty, "insecure": True}))
    cl.teardown()


def test_inventory_errors_name_the_place(tmp_path):
    p = tmp_path / "inv.yaml"
    p.write_text("hosts:\n  - address: 10.77.0.5\n  - user: x\n")
    with pytest.raises(ValueError, match=r"inv.yaml: hosts\[1\]: needs an `address`"):
        ssh.load_inventory(str(p))
    p.write_text("hosts: [")
    with pytest.raises(ValueError, match="not valid YAML"):
        ssh.load_inventory(str(p))
    p.write_text("hosts:\n  - {address: 10.77.0.5, port: 99999}\n")
    with pytest.raises(ValueError, match="bad port"):
        ssh.load_inventory(str(p))
