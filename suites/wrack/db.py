"""The project's broker on every node of a cluster: `BrokerDB` drives `wrack-broker --config
FILE` (a clusters/db.py `ServiceDB`), one Kafka-style properties file per node built from the
test's options (`broker_properties`). Besides the lifecycle it answers what the wrack suite's
faults ask: the controller quorum's voters and its active controller, each node's node.id,
and the head of an inter-node frame a fault may hold in the network (`frame_head`).
"""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field

from broker.wire import internal
from broker.wire.kafka import WRITE_TXN_MARKERS
from clusters.db import ServiceDB
from clusters.node import Cluster, Node, NodeError

TEST_REPLICA_LAG_TIME_MAX_MS = 6_000
BROKER_PORT = 9092
# Kafka requests the brokers send each other, as (api key, version): a Kafka frame's head is
# the two after its size (broker/server/peer_client.py sends the coordinator's markers)
KAFKA_PEER_REQUESTS = {"WriteTxnMarkers": (WRITE_TXN_MARKERS, 1)}
CONTROLLER_PORT = 9093


@dataclass
class BrokerOptions:
    """The test's options for the broker. `extra` are further properties, verbatim."""

    controllers: int | None = None  # controller quorum voters; None: default_controllers(nodes)
    replication_factor: int = 3
    min_insync_replicas: int = 2
    flush_interval_messages: int | None = None
    extra: dict[str, str] = field(default_factory=dict)
    command: list[str] = field(default_factory=lambda: ["wrack-broker"])


def default_controllers(nodes: int) -> int:
    """Three voters (a quorum that survives one loss) from 3 nodes on, else one."""
    return 3 if nodes >= 3 else 1


def broker_properties(cluster: Cluster, node: Node, opts: BrokerOptions, data_dir: str,
                      node_ids: Mapping[str, int] | None = None) -> dict[str, str]:
    """The properties of `node`'s broker: node.id is its position (unless `node_ids`
    overrides it: membership gives a re-added node a fresh id), the first
    `opts.controllers` nodes (default `default_controllers`) are also controllers, voters of
    the quorum (KRaft-style combined mode). `replica.lag.time.max.ms` is
    TEST_REPLICA_LAG_TIME_MAX_MS unless `opts.extra` sets it."""
    ids = {n.name: i for i, n in enumerate(cluster.nodes)}
    ids.update(node_ids or {})
    nid = ids[node.name]
    n = opts.controllers if opts.controllers is not None else default_controllers(len(cluster.nodes))
    controllers = cluster.nodes[: max(1, n)]
    is_controller = node in controllers
    listeners = f"PLAINTEXT://{node.address}:{BROKER_PORT}"
    if is_controller:
        listeners += f",CONTROLLER://{node.address}:{CONTROLLER_PORT}"
    props = {
        "node.id": str(nid),
        "process.roles": "broker,controller" if is_controller else "broker",
        "listeners": listeners,
        "advertised.listeners": f"PLAINTEXT://{node.address}:{BROKER_PORT}",
        "controller.listener.names": "CONTROLLER",
        "controller.quorum.voters": ",".join(f"{ids[c.name]}@{c.address}:{CONTROLLER_PORT}" for c in controllers),
        "log.dirs": data_dir,
        "min.insync.replicas": str(opts.min_insync_replicas),
        "default.replication.factor": str(min(opts.replication_factor, len(cluster.nodes))),
        # shorter than Kafka's defaults (10 s before 2.5, 30 s since, KIP-537): a lagging
        # follower leaves the ISR within a test's fault window, so that the stories built on an
        # ISR shrink fit a one-minute run (with 10 s, a run played 3-4 of the five: a shrink
        # took 8-15 s, and stale-alter-partition 31-38 s)
        "replica.lag.time.max.ms": str(TEST_REPLICA_LAG_TIME_MAX_MS),
    }
    if opts.flush_interval_messages is not None:
        props["log.flush.interval.messages"] = str(opts.flush_interval_messages)
    props.update(opts.extra)
    return props


def render_properties(props: Mapping[str, str]) -> str:
    return "".join(f"{k}={v}\n" for k, v in props.items())


class BrokerDB(ServiceDB):
    """The broker on every node of `cluster`; see the module docstring."""

    service = "broker"
    port = BROKER_PORT

    def __init__(self, cluster: Cluster, opts: BrokerOptions | None = None):
        super().__init__(cluster)
        self.opts = opts or BrokerOptions()
        self.node_ids: dict[str, int] = {}  # node.id overrides (nemesis/membership.py)

    def controller_nodes(self) -> list[Node]:
        """The nodes that run a controller (the quorum's voters)."""
        n = self.opts.controllers if self.opts.controllers is not None else default_controllers(len(self.cluster.nodes))
        return list(self.cluster.nodes[: max(1, n)])

    def quorum_states(self) -> dict[str, tuple[int, int]]:
        """Each voter's (epoch, leader id) from its quorum-state file
        (broker/server/quorum_store.py); a voter whose file cannot be read is left out."""
        out = {}
        for node in self.controller_nodes():
            try:
                state = json.loads(node.read_file(os.path.join(self.data_dir(node), "quorum-state")))
                out[node.name] = (int(state["epoch"]), int(state["leader_id"]))
            except (NodeError, OSError, ValueError, KeyError, TypeError):
                continue
        return out

    def active_controller(self) -> str | None:
        """The address of the node running the active controller (the quorum leader), None
        if none is known or it is not running: the leader named in the highest epoch of
        `quorum_states`."""
        by_id = {self.node_id(n): n for n in self.controller_nodes()}
        best: tuple[int, int] = (-1, -1)
        for epoch, leader in self.quorum_states().values():
            if leader in by_id and epoch > best[0]:
                best = (epoch, leader)
        node = by_id.get(best[1])
        return node.address if node is not None and self.running(node) else None

    def frame_head(self, message: str) -> bytes:
        """The head of the broker's inter-node frames carrying `message` (a class name of
        broker/wire/internal.py's MESSAGES, e.g. AlterPartitionRequest, or a Kafka request
        one broker sends another: WriteTxnMarkers), for a fault that holds them in the
        network; ValueError if no such message travels."""
        types = {t.__name__: t for t in internal.MESSAGES}
        if message in KAFKA_PEER_REQUESTS:
            return struct.pack(">hh", *KAFKA_PEER_REQUESTS[message])
        if message not in types:
            raise ValueError(f"no inter-node message {message!r} (known: "
                             f"{', '.join(sorted([*types, *KAFKA_PEER_REQUESTS]))})")
        return internal.frame_head(types[message])

    def leader_address(self) -> str | None:
        """The active controller's node (the broker's cluster-wide leader)."""
        return self.active_controller()

    def node_id(self, node: Node) -> int:
        """The broker's node.id on `node` (its position, unless membership renumbered it)."""
        return self.node_ids.get(node.name, self.cluster.nodes.index(node))

    def config_path(self, node: Node) -> str:
        return node.path(self.service, "server.properties")

    def configure(self, node: Node) -> dict[str, str]:
        """Write the node's properties file; returns the properties."""
        props = broker_properties(self.cluster, node, self.opts, self.data_dir(node), self.node_ids)
        node.exec(["mkdir", "-p", self.data_dir(node)])
        node.write_file(self.config_path(node), render_properties(props))
        return props

    def argv(self, node: Node) -> list[str]:
        return [*self.opts.command, "--config", self.config_path(node)]

    def bootstrap_servers(self) -> str:
        return ",".join(f"{n.address}:{BROKER_PORT}" for n in self.cluster.nodes)
