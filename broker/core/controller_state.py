"""The controller's configuration, its metadata quorum and the state its parts share.

`ControllerState` holds what the controller knows (the metadata image built from the
quorum's records, broker sessions, parked metadata fetches, unclean-recovery rounds and
the events they report) and the helpers every part uses: writing a record and the
election rules of a topic. The parts, one responsibility a module as in Kafka's
controller: controller_partitions.py (partition changes: AlterPartition, elections,
unclean recovery; Kafka's ReplicationControlManager), controller_brokers.py
(registrations, heartbeats and fencing; ClusterControlManager), controller_admin.py (the
admin requests), controller.py (`Controller`: the entry points and metadata fetches).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from broker.core import safeguards as sg
from broker.core.election import ElectionPolicy
from broker.core.messages import Actions, GetReplicaLogInfoResponse, MetadataFetchRequest, TopicPartition
from broker.core.metadata import MetadataImage, MetadataLog, MetadataRecord


@dataclass(frozen=True)
class ControllerConfig:
    node_id: int = 0
    broker_session_timeout_ms: int = 9000
    min_insync_replicas: int = 1
    unclean_leader_election_enable: bool = False
    unclean_recovery_strategy: str = "balanced"
    unclean_recovery_timeout_ms: int = 5000
    proactive_recovery_wait_ms: int = 1000
    max_metadata_records_per_fetch: int = 1000
    safeguards: sg.SafeguardSet = sg.ALL_ON


class MetadataQuorum(Protocol):
    """Where the controller's records go (`LocalMetadataQuorum`, or a `RaftNode`, which
    commits asynchronously)."""

    @property
    def end_offset(self) -> int: ...

    @property
    def committed_offset(self) -> int: ...

    def append(self, record: MetadataRecord) -> int: ...

    def read_from(self, offset: int, max_records: int) -> tuple[MetadataRecord, ...]: ...


class LocalMetadataQuorum:
    """A single voter: appended records are committed at once. `on_append(offset, record)`
    is where the shell persists each record (append `encode_record` to the metadata log
    file and fsync) before any action that depends on it is sent."""

    def __init__(
        self, log: MetadataLog | None = None, on_append: Callable[[int, MetadataRecord], None] | None = None
    ) -> None:
        self.log = log or MetadataLog()
        self.on_append = on_append

    @property
    def end_offset(self) -> int:
        return self.log.end_offset

    @property
    def committed_offset(self) -> int:
        return self.log.end_offset

    def append(self, record: MetadataRecord) -> int:
        off = self.log.append(record)
        if self.on_append is not None:
            self.on_append(off, record)
        return off

    def read_from(self, offset: int, max_records: int) -> tuple[MetadataRecord, ...]:
        return self.log.read_from(offset, max_records)


@dataclass
class ParkedMetadataFetch:
    src: int
    request: MetadataFetchRequest
    deadline: int


@dataclass
class RecoveryRound:
    """One unclean-recovery log inspection (KIP-966 GetReplicaLogInfo)."""

    strategy: str
    candidates: tuple[int, ...]
    deadline: int
    replies: dict[int, GetReplicaLogInfoResponse] = field(default_factory=dict)
    correlation: dict[int, int] = field(default_factory=dict)  # broker -> correlation id


@dataclass(frozen=True, slots=True)
class UncleanRecoveryEvent:
    """Reported (in `Controller.events`) for every unclean election: potential data loss."""

    time_ms: int
    tp: TopicPartition
    leader: int
    how: str


class ControllerState:
    """What the controller knows, and the helpers its parts share."""

    def __init__(self, config: ControllerConfig, quorum: MetadataQuorum | None = None) -> None:
        self.config = config
        self.quorum: MetadataQuorum = quorum or LocalMetadataQuorum()
        self.image = MetadataImage()
        for off, rec in enumerate(self.quorum.read_from(0, 1 << 62)):
            self.image.apply(off, rec)
        self.last_heartbeat: dict[int, int] = {}
        self.shutdown_offset: dict[int, int] = {}
        self._parked: list[ParkedMetadataFetch] = []
        self._recovery: dict[TopicPartition, RecoveryRound] = {}
        self._next_correlation = 1
        self.events: list[UncleanRecoveryEvent] = []
        self._now = 0
        # Batches: the records one call (handle/tick) commits are one atomic batch, as a
        # KRaft controller event's records are. A metadata fetch is answered only between
        # batches and never cut inside one, so no broker ever shows half of a change (a
        # topic without all its partitions). `_batch_ends` lists the end offsets of this
        # controller's batches; records loaded from the log have no known boundaries.
        self._loaded_end = self.quorum.end_offset
        self._batch_ends: list[int] = []

    def _commit(self, record: MetadataRecord, acts: Actions) -> int:
        off = self.quorum.append(record)
        self.image.apply(off, record)
        return off

    def _policy(self, topic: str, replication_factor: int | None = None) -> ElectionPolicy:
        """Election rules of `topic`; min ISR is capped at the replication factor, as the
        leader's (Kafka's effective min ISR)."""
        guards = self.safeguards_for(topic)
        unclean = (
            self.image.topic_config(topic, "unclean.leader.election.enable", str(self.config.unclean_leader_election_enable).lower())
            == "true"
            or not guards.on(sg.CLEAN_ELECTION_ONLY)
        )
        min_isr = self.min_isr(topic)
        if replication_factor is not None:
            min_isr = min(min_isr, replication_factor)
        return ElectionPolicy(min_isr=min_isr, elr=guards.on(sg.ELR), unclean=unclean)

    def min_isr(self, topic: str) -> int:
        return int(self.image.topic_config(topic, "min.insync.replicas", str(self.config.min_insync_replicas)))

    def safeguards_for(self, topic: str) -> sg.SafeguardSet:
        value = self.image.topic_config(topic, "wrack.safeguards.off", "")
        if not value:
            return self.config.safeguards
        return self.config.safeguards.union(sg.parse_config(value))
