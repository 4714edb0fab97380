"""Which nodes a fault hits: node specs (one, minority, majority, all, names) and roles
(the leader of a partition, the controller, ISR followers) read from the cluster's metadata.

Roles are never guessed: `KafkaMetadata` asks the brokers with a Kafka Metadata request
(confluent-kafka's AdminClient.list_topics) and broker ids are mapped to nodes by address.

Target specs (`resolve`):
- "one" | "minority" | "minority-third" | "majority" | "all" (random choices use `rng`);
- a node name, or a list of node names;
- {"role": "controller"};
- {"role": "leader", "topic": T, "partition": P};
- {"role": "isr-followers", "topic": T, "partition": P} (the in-sync replicas but the leader);
- {"role": "replicas", "topic": T, "partition": P};
- {"role": "lone-leader", "topics": [T, ...], "else": SPEC}: the leader of a partition (of
  those topics; any topic without them) whose ISR is that leader alone, one drawn at random:
  the replica whose lossy crash the ELR exists for (seed 002). With none (or no metadata
  answer), `else` is resolved instead; without `else`, TargetError.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

ROLES = ("controller", "leader", "isr-followers", "replicas", "lone-leader")  # the roles `resolve` knows


class TargetError(ValueError):
    """A target spec that cannot be resolved (bad spec, or the role has no node right now)."""


@dataclass
class PartitionInfo:
    leader: int
    replicas: list[int]
    isrs: list[int]


@dataclass
class Metadata:
    """What the cluster says about itself: broker id -> host, controller id, partitions."""

    brokers: dict[int, str]
    controller_id: int
    partitions: dict[tuple[str, int], PartitionInfo] = field(default_factory=dict)


MetadataSource = Callable[[], Metadata]


class KafkaMetadata:
    """A `MetadataSource` for a whole test: one long-lived AdminClient, made at the first call
    and reused (thread-safe: librdkafka serialises the requests), with librdkafka's own
    logging off, so brokers that are down (the point of a fault) print nothing on stderr.
    A call that gets no answer within `timeout` s raises confluent-kafka's KafkaException.

    A KRaft broker's Metadata answer names any live broker as the controller (clients send
    it admin requests, which it forwards: KIP-590), not the active controller: give
    `active_controller`, a callable returning the active controller's address (the DB knows
    it), and `controller_id` is the broker at that address (-1 when none is listed)."""

    def __init__(self, bootstrap: str, timeout: float = 5.0,
                 active_controller: Callable[[], str | None] | None = None):
        self.bootstrap = bootstrap
        self.timeout = timeout
        self.active_controller = active_controller
        self._admin: Any = None

    def __call__(self) -> Metadata:
        if self._admin is None:
            # lazy: confluent_kafka takes ~50 ms; `wrack analyze` imports this module (harness.faults) and asks no broker
            from confluent_kafka.admin import AdminClient

            ms = int(self.timeout * 1000)
            self._admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0,
                                       "socket.timeout.ms": ms, "socket.connection.setup.timeout.ms": ms,
                                       "reconnect.backoff.ms": 50, "reconnect.backoff.max.ms": 500})
        md = self._admin.list_topics(timeout=self.timeout)
        parts = {(t, p): PartitionInfo(pm.leader, list(pm.replicas), list(pm.isrs))
                 for t, tm in md.topics.items() for p, pm in tm.partitions.items()}
        brokers = {b.id: b.host for b in md.brokers.values()}
        controller = md.controller_id
        if self.active_controller is not None:
            addr = self.active_controller()
            controller = next((b for b, host in brokers.items() if host == addr), -1)
        return Metadata(brokers, controller, parts)

    def close(self) -> None:
        """Drop the client (librdkafka closes its connections when it is collected)."""
        self._admin = None


class LeaderMetadata:
    """A `MetadataSource` for a DB without Kafka metadata (etcd): the nodes' `addresses` as
    brokers 0..n-1 and the node at `leader()`'s address (the DB's `leader_address`) as the
    controller (-1 when there is none); no partitions, so `{"role": "controller"}` is the
    DB's leader and partition roles do not resolve."""

    def __init__(self, addresses: Sequence[str], leader: Callable[[], str | None]):
        self.addresses = list(addresses)
        self.leader = leader

    def __call__(self) -> Metadata:
        addr = self.leader()
        ctl = self.addresses.index(addr) if addr in self.addresses else -1
        return Metadata(dict(enumerate(self.addresses)), ctl)


def node_metadata(address: str, port: int = 9092, timeout: float = 2.0) -> Metadata:
    """What one broker's metadata cache says (a Metadata request v12 to `address`, over the
    project's raw client): librdkafka asks whichever broker it likes, and a broker cut off from
    the controller answers from a stale cache. Raises OSError when the broker does not answer."""
    # lazy: broker.wire imports kio (~0.25 s); only this call needs it, and `wrack analyze` imports this module
    from broker.wire.client import RawClient
    from broker.wire.kafka import METADATA

    with RawClient(address, port, timeout=timeout) as c:
        r = c.call(METADATA, 12, {"topics": None, "allow_auto_topic_creation": False,
                                  "include_topic_authorized_operations": False})
    parts = {(t.name, p.partition_index): PartitionInfo(p.leader_id, list(p.replica_nodes), list(p.isr_nodes))
             for t in r.topics for p in t.partitions}
    return Metadata({b.node_id: b.host for b in r.brokers}, r.controller_id, parts)


def node_offset(address: str, topic: str, partition: int, log_end: bool = False, port: int = 9092,
                timeout: float = 2.0, committed: bool = False) -> int:
    """The high watermark of `topic`-`partition` as its leader at `address` answers
    (ListOffsets latest), with `committed` its last stable offset (read_committed: below the
    first open transaction), or with `log_end` the log end offset of the replica at `address`,
    leader or follower (Kafka's debug replica id -2). OSError when the node does not answer,
    TargetError when it has no such answer (e.g. not the leader)."""
    # lazy: broker.wire imports kio (~0.25 s); as node_metadata, only this call needs it
    from broker.core.messages import DEBUG_REPLICA_ID
    from broker.wire.client import RawClient
    from broker.wire.kafka import LIST_OFFSETS

    with RawClient(address, port, timeout=timeout) as c:
        r = c.call(LIST_OFFSETS, 7, {"replica_id": DEBUG_REPLICA_ID if log_end else -1, "isolation_level": int(committed), "topics": [
            {"name": topic, "partitions": [{"partition_index": partition, "current_leader_epoch": -1, "timestamp": -1}]}]})
    p = r.topics[0].partitions[0]
    if p.error_code.value != 0:
        raise TargetError(f"{topic}-{partition} at {address}: {p.error_code.name}")
    return int(p.offset)


def _node_of(md: Metadata, broker_id: int, by_address: dict[str, str]) -> str:
    host = md.brokers.get(broker_id)
    if host is None or host not in by_address:
        raise TargetError(f"broker {broker_id} ({host}) is not a node of this cluster")
    return by_address[host]


@dataclass
class PartitionView:
    """One partition's roles by node name (None: no leader or no controller now); `replicas`
    and `isr` in assignment order (the order the controller elects in)."""

    leader: str | None
    replicas: list[str]
    isr: list[str]
    controller: str | None

    @property
    def followers(self) -> list[str]:
        """The ISR but the leader, in assignment order."""
        return [n for n in self.isr if n != self.leader]


def partition_view(md: Metadata, topic: str, partition: int, addresses: dict[str, str]) -> PartitionView:
    """The roles of `topic`-`partition` in `md` (TargetError if the metadata lacks it)."""
    by_address = {a: name for name, a in addresses.items()}
    info = md.partitions.get((topic, partition))
    if info is None:
        raise TargetError(f"no partition {topic}-{partition} in the metadata")

    def name(b: int) -> str | None:
        return by_address.get(md.brokers.get(b, ""))

    replicas = [n for n in map(name, info.replicas) if n is not None]
    isr = [n for n in replicas if n in {name(b) for b in info.isrs}]
    return PartitionView(name(info.leader) if info.leader >= 0 else None, replicas, isr,
                         name(md.controller_id) if md.controller_id >= 0 else None)


def resolve(spec: Any, nodes: Sequence[str], rng: random.Random, *,
            addresses: dict[str, str] | None = None, metadata: MetadataSource | None = None) -> list[str]:
    """The node names `spec` selects (see the module docstring); `addresses` maps name -> address."""
    nodes = list(nodes)
    n = len(nodes)
    if isinstance(spec, str):
        if spec in nodes:
            return [spec]
        shuffled = list(nodes)
        rng.shuffle(shuffled)
        counts = {"one": 1, "minority": (n - 1) // 2, "minority-third": max(1, (n - 1) // 3),
                  "majority": n // 2 + 1, "all": n}
        if spec not in counts:
            raise TargetError(f"unknown target {spec!r} (one, minority, minority-third, majority, all, "
                              f"a node name or a role)")
        return sorted(shuffled[: max(1, counts[spec]) if n else 0])
    if isinstance(spec, list | tuple):
        bad = [s for s in spec if s not in nodes]
        if bad:
            raise TargetError(f"unknown nodes {bad}")
        return list(spec)
    if isinstance(spec, dict) and spec.get("role") == "lone-leader":
        return _lone_leader(spec, nodes, rng, addresses, metadata)
    if isinstance(spec, dict) and "role" in spec:
        if metadata is None or addresses is None:
            raise TargetError(f"target {spec} needs the cluster's metadata")
        md = metadata()
        by_address = {a: name for name, a in addresses.items()}
        role = spec["role"]
        if role == "controller":
            if md.controller_id < 0:
                raise TargetError("the cluster reports no controller")
            return [_node_of(md, md.controller_id, by_address)]
        key = (spec.get("topic"), int(spec.get("partition", 0)))
        info = md.partitions.get(key)  # type: ignore[arg-type]
        if info is None:
            raise TargetError(f"no partition {key[0]}-{key[1]} in the metadata")
        if role == "leader":
            if info.leader < 0:
                raise TargetError(f"partition {key[0]}-{key[1]} has no leader")
            return [_node_of(md, info.leader, by_address)]
        if role == "isr-followers":
            return [_node_of(md, b, by_address) for b in info.isrs if b != info.leader]
        if role == "replicas":
            return [_node_of(md, b, by_address) for b in info.replicas]
        raise TargetError(f"unknown role {role!r} ({', '.join(ROLES)})")
    raise TargetError(f"bad target spec {spec!r}")


def _lone_leader(spec: dict[str, Any], nodes: list[str], rng: random.Random, addresses: dict[str, str] | None,
                 metadata: MetadataSource | None) -> list[str]:
    """`{"role": "lone-leader", ...}` (module docstring)."""
    lone: list[str] = []
    md = None
    if metadata is not None and addresses is not None:
        try:
            md = metadata()
        except Exception:  # noqa: BLE001 - no answer (nodes down is the point of a test): fall back
            md = None
    if md is not None and addresses is not None:
        by_address = {a: name for name, a in addresses.items()}
        topics = spec.get("topics")
        for (t, _), info in sorted(md.partitions.items()):
            node = by_address.get(md.brokers.get(info.leader, ""))
            if info.isrs == [info.leader] and (topics is None or t in topics) and node in nodes and node not in lone:
                lone.append(node)
    if lone:
        return [lone[rng.randrange(len(lone))]]
    if "else" in spec:
        return resolve(spec["else"], nodes, rng, addresses=addresses, metadata=metadata)
    raise TargetError("no partition's ISR is its leader alone")
