"""etcd on every node of a cluster (`wrack test --db etcd`).

`EtcdDB` runs Debian's etcd 3.4 (`/usr/bin/etcd`, package etcd-server) as a `ServiceDB`:
one member per node, named after the node, a static bootstrap of all of them
(`initial-cluster`), its config file (`config_path`) in the node's etcd directory and its
data (the WAL and snapshots, which etcd fsyncs) in the node's data directory for etcd, where
a power-loss hook may mount LazyFS. Clients use the v3 API through etcd's grpc-gateway on `CLIENT_PORT`
(`client_address` is the member's URL); members talk on `PEER_PORT`.

`leader_address()` asks every running member for its status (`etcdctl endpoint status`,
package etcd-client: its member id, the leader it follows and its Raft term) and names the
member that the answer with the highest term calls leader; `prepare()` waits until there is one. Role
targets (`kill-leader`, `partition-leader`) read it through the nemesis's metadata.

A wiped member (`wipe`) restarts with an empty data directory and the same member id:
etcd does not support that (the member may vote twice); no etcd fault wipes.
"""

from __future__ import annotations

import json
import subprocess
import time
from typing import Any

from clusters.db import ServiceDB
from clusters.node import Cluster, Node, NodeError

CLIENT_PORT = 2379
PEER_PORT = 2380
ETCD = "/usr/bin/etcd"
ETCDCTL = "/usr/bin/etcdctl"


def etcd_config(cluster: Cluster, node: Node, data_dir: str) -> dict[str, Any]:
    """The member's configuration (etcd's --config-file keys)."""
    peer = f"http://{node.address}:{PEER_PORT}"
    client = f"http://{node.address}:{CLIENT_PORT}"
    return {
        "name": node.name,
        "data-dir": data_dir,
        "listen-client-urls": client,
        "advertise-client-urls": client,
        "listen-peer-urls": peer,
        "initial-advertise-peer-urls": peer,
        "initial-cluster": ",".join(f"{n.name}=http://{n.address}:{PEER_PORT}" for n in cluster.nodes),
        "initial-cluster-state": "new",
        "initial-cluster-token": cluster.name,
        "enable-grpc-gateway": True,  # the default of the flag, not of the config file
        "logger": "zap",
        "log-outputs": ["stderr"],
    }


def member_statuses(addresses: list[str], timeout: float = 1.0) -> dict[str, dict[str, int]]:
    """address -> {member, leader, term} for every member that answers `etcdctl endpoint status`
    within `timeout` s (etcd's own client, over gRPC)."""
    if not addresses:
        return {}
    t = f"{timeout:g}s"
    try:
        r = subprocess.run([ETCDCTL, "--endpoints", ",".join(f"{a}:{CLIENT_PORT}" for a in addresses),
                            "--dial-timeout", t, "--command-timeout", t, "endpoint", "status", "-w", "json"],
                           capture_output=True, text=True, timeout=timeout * len(addresses) + 5,
                           env={"ETCDCTL_API": "3", "PATH": "/usr/bin:/bin"})
        rows = json.loads(r.stdout or "[]")
    except (OSError, subprocess.TimeoutExpired, ValueError):
        return {}
    out = {}
    for row in rows:
        try:
            st = row["Status"]
            out[row["Endpoint"].rsplit(":", 1)[0]] = {"member": int(st["header"]["member_id"]),
                                                      "leader": int(st["leader"]), "term": int(st["raftTerm"])}
        except (KeyError, TypeError, ValueError):
            continue
    return out


class EtcdDB(ServiceDB):
    """etcd on every node of `cluster`; see the module docstring."""

    service = "etcd"
    port = CLIENT_PORT

    def __init__(self, cluster: Cluster, command: list[str] | None = None):
        super().__init__(cluster)
        self.command = list(command or [ETCD])

    def config_path(self, node: Node) -> str:
        return node.path(self.service, "etcd.yaml")

    def configure(self, node: Node) -> dict[str, Any]:
        """Write the member's config file (JSON, which is YAML); returns the config."""
        conf = etcd_config(self.cluster, node, self.data_dir(node))
        node.exec(["mkdir", "-p", self.data_dir(node)])
        node.exec(["chmod", "700", self.data_dir(node)])
        node.write_file(self.config_path(node), json.dumps(conf, indent=1) + "\n")
        return conf

    def argv(self, node: Node) -> list[str]:
        return [*self.command, "--config-file", self.config_path(node)]

    def client_address(self, node: Node) -> str:
        return f"http://{node.address}:{CLIENT_PORT}"

    def leader_address(self) -> str | None:
        """The leader's address by the answer with the highest Raft term (module docstring)."""
        answers = member_statuses([n.address for n in self.cluster.nodes if self.running(n)])
        if not answers:
            return None
        best = max(answers.values(), key=lambda st: st["term"])
        return next((addr for addr, st in answers.items() if st["member"] == best["leader"]), None)

    def prepare(self, timeout: float = 60.0) -> None:
        """Wait until a leader is elected (NodeError after `timeout` s)."""
        deadline = time.monotonic() + timeout
        while self.leader_address() is None:
            if time.monotonic() > deadline:
                raise NodeError(f"etcd elected no leader in {timeout:g} s; see the members' {self.service}.log")
            time.sleep(0.2)
