"""The ssh backend installs the project from a wheel on a host (a local node over SSH)."""

from __future__ import annotations

import pytest
import yaml

from clusters import ssh
from clusters.local import state_dir
from clusters.node import ClusterSpec

pytestmark = [pytest.mark.root, pytest.mark.slow]


def test_install_project_from_wheel(make_cluster, tmp_path, monkeypatch):
    monkeypatch.setattr(ssh, "STATE_ROOT", tmp_path / "state")
    c = make_cluster(1, transport="ssh")
    sd = state_dir(c.name)
    inv = tmp_path / "inv.yaml"
    inv.write_text(yaml.safe_dump({"root": "/var/lib/wrack/remote", "known_hosts": str(sd / "known_hosts"),
                                   "hosts": [{"address": c.nodes[0].address, "key": str(sd / "id_ed25519")}]}))
    cl = ssh.create(ClusterSpec(name="wheel", options={"inventory": str(inv)}))
    try:
        node = cl.nodes[0]
        node.install_project()
        out = node.exec([node.path("venv", "bin", "python"), "-c",
                         "import clusters.node, broker, sys; print(clusters.node.__file__)"]).stdout
        assert out.startswith(node.path("venv"))
        assert node.exec(["test", "-x", node.path("venv", "bin", "wrack-broker")]).ok
    finally:
        cl.teardown()
