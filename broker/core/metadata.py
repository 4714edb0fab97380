"""The cluster metadata log: its records, their file encoding, and the materialised image.

The controller appends records; brokers fetch them in order and apply them to their own
`MetadataImage` (seed 003, 2.3.2: act on the materialised state, not on the deltas). A
broker epoch is the offset of the broker's RegisterBrokerRecord, hence monotonic.

Persistent form (what the shell writes): one JSON object per line, append-only,
``{"offset": N, "quorum_epoch": E, "type": "<RecordName>", ...fields}`` (E: the epoch of
the quorum leader that appended it); `decode_entry` reads it back.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from broker.core import properties as props
from broker.core.acls import AclBinding
from broker.core.messages import Endpoint, TopicPartition

RECOVERED = 0
RECOVERING = 1


@dataclass(frozen=True, slots=True)
class RegisterBrokerRecord:
    broker_id: int
    broker_epoch: int
    incarnation_id: str
    fenced: bool = True
    listeners: tuple[Endpoint, ...] = ()


@dataclass(frozen=True, slots=True)
class BrokerRegistrationChangeRecord:
    broker_id: int
    broker_epoch: int
    fenced: bool | None = None
    in_controlled_shutdown: bool | None = None


@dataclass(frozen=True, slots=True)
class TopicRecord:
    name: str
    configs: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class RemoveTopicRecord:
    """DeleteTopics: the topic and all its partitions are gone."""

    name: str


@dataclass(frozen=True, slots=True)
class PartitionRegistration:
    """What the controller knows of a partition (no offsets: seed 003, 2.3)."""

    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int = 0
    partition_epoch: int = 0
    elr: tuple[int, ...] = ()
    last_known_elr: tuple[int, ...] = ()
    leader_recovery_state: int = RECOVERED
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()

    @property
    def reassigning(self) -> bool:
        """A reassignment is in progress (KRaft: adding or removing replicas is non-empty)."""
        return bool(self.adding_replicas or self.removing_replicas)

    @property
    def target_replicas(self) -> tuple[int, ...]:
        """The replicas once the reassignment in progress (if any) completes."""
        return tuple(r for r in self.replicas if r not in self.removing_replicas)


@dataclass(frozen=True, slots=True)
class PartitionRecord:
    tp: TopicPartition
    registration: PartitionRegistration


@dataclass(frozen=True, slots=True)
class PartitionChangeRecord:
    """The new registration of a partition after one change (full value, epochs included)."""

    tp: TopicPartition
    registration: PartitionRegistration


@dataclass(frozen=True, slots=True)
class LeaderChangeRecord:
    """The control record a new quorum leader appends first in its epoch (KRaft's
    LeaderChangeMessage): committing it commits every earlier entry (Raft's no-op). It
    takes an offset in the metadata log like any record; the image skips it."""

    epoch: int
    leader_id: int
    voters: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class ConfigRecord:
    """One config of one resource set (`value`) or deleted (None), as KRaft's ConfigRecord:
    AlterConfigs, IncrementalAlterConfigs. A topic's (`resource_type` 2), or a broker's
    dynamic config (4: `resource_name` a broker id, or "" for the cluster-wide default)."""

    resource_type: int
    resource_name: str
    name: str
    value: str | None


TOPIC_RESOURCE = 2  # ConfigResource.Type.TOPIC
BROKER_RESOURCE = 4  # ConfigResource.Type.BROKER
CLUSTER_DEFAULT = ""  # the BROKER resource name of the cluster-wide dynamic defaults


@dataclass(frozen=True, slots=True)
class AccessControlEntryRecord:
    """CreateAcls: one stored ACL under `id` (KRaft's AccessControlEntryRecord)."""

    id: str
    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int

    def binding(self) -> AclBinding:
        return AclBinding(self.resource_type, self.resource_name, self.pattern_type, self.principal, self.host,
                          self.operation, self.permission_type)


@dataclass(frozen=True, slots=True)
class RemoveAccessControlEntryRecord:
    """DeleteAcls: the ACL stored under `id` is gone."""

    id: str


MetadataRecord = (
    RegisterBrokerRecord
    | BrokerRegistrationChangeRecord
    | TopicRecord
    | PartitionRecord
    | PartitionChangeRecord
    | RemoveTopicRecord
    | LeaderChangeRecord
    | ConfigRecord
    | AccessControlEntryRecord
    | RemoveAccessControlEntryRecord
)

# Topic ids are derived from the name and the offset of the TopicRecord, so every node
# computes the same id and a re-created topic gets a new one.
_TOPIC_ID_NAMESPACE = uuid.UUID("5b0b6b5e-9a57-4a53-8f61-77726163b000")


def topic_id_for(name: str, record_offset: int) -> uuid.UUID:
    return uuid.uuid5(_TOPIC_ID_NAMESPACE, f"{name}@{record_offset}")


def acl_id_for(record_offset: int) -> str:
    """The id of the ACL its AccessControlEntryRecord stores at `record_offset` (the same
    on every node, never reused)."""
    return str(uuid.uuid5(_TOPIC_ID_NAMESPACE, f"acl@{record_offset}"))


@dataclass(slots=True)
class BrokerInfo:
    broker_id: int
    broker_epoch: int
    incarnation_id: str
    fenced: bool = True
    in_controlled_shutdown: bool = False
    listeners: tuple[Endpoint, ...] = ()


@dataclass(slots=True)
class MetadataImage:
    """The state obtained by applying the metadata log up to `next_offset` (exclusive)."""

    next_offset: int = 0
    brokers: dict[int, BrokerInfo] = field(default_factory=dict)
    topics: dict[str, dict[str, str]] = field(default_factory=dict)
    partitions: dict[TopicPartition, PartitionRegistration] = field(default_factory=dict)
    topic_ids: dict[str, uuid.UUID] = field(default_factory=dict)
    acls: dict[str, AclBinding] = field(default_factory=dict)  # ACL id -> binding
    # dynamic broker configs: resource name (a broker id, or CLUSTER_DEFAULT) -> property -> value
    broker_configs: dict[str, dict[str, str]] = field(default_factory=dict)

    def apply(self, offset: int, record: MetadataRecord) -> None:
        """Apply the record at `offset` (must be `next_offset`)."""
        if offset != self.next_offset:
            raise ValueError(f"metadata record at offset {offset}, expected {self.next_offset}")
        if isinstance(record, RegisterBrokerRecord):
            self.brokers[record.broker_id] = BrokerInfo(
                record.broker_id, record.broker_epoch, record.incarnation_id, record.fenced, listeners=record.listeners
            )
        elif isinstance(record, BrokerRegistrationChangeRecord):
            b = self.brokers.get(record.broker_id)
            if b is not None and b.broker_epoch == record.broker_epoch:
                if record.fenced is not None:
                    b.fenced = record.fenced
                if record.in_controlled_shutdown is not None:
                    b.in_controlled_shutdown = record.in_controlled_shutdown
        elif isinstance(record, TopicRecord):
            self.topics[record.name] = dict(record.configs)
            self.topic_ids[record.name] = topic_id_for(record.name, offset)
        elif isinstance(record, RemoveTopicRecord):
            self.topics.pop(record.name, None)
            self.topic_ids.pop(record.name, None)
            for tp in [tp for tp in self.partitions if tp.topic == record.name]:
                del self.partitions[tp]
        elif isinstance(record, PartitionRecord | PartitionChangeRecord):
            self.partitions[record.tp] = record.registration
        elif isinstance(record, ConfigRecord):
            self._apply_config(record)
        elif isinstance(record, AccessControlEntryRecord):
            self.acls[record.id] = record.binding()
        elif isinstance(record, RemoveAccessControlEntryRecord):
            self.acls.pop(record.id, None)
        elif isinstance(record, LeaderChangeRecord):
            pass  # a control record of the quorum: it changes nothing in the image
        else:
            raise ValueError(f"unknown metadata record {type(record).__name__}")
        self.next_offset = offset + 1

    def _apply_config(self, record: ConfigRecord) -> None:
        if record.resource_type == BROKER_RESOURCE:
            configs: dict[str, str] | None = self.broker_configs.setdefault(record.resource_name, {})
        else:
            configs = self.topics.get(record.resource_name) if record.resource_type == TOPIC_RESOURCE else None
        if configs is None:
            return  # a config of a topic deleted since (or of a resource kept nowhere)
        if record.value is None:
            configs.pop(record.name, None)
        else:
            configs[record.name] = record.value
        if record.resource_type == BROKER_RESOURCE and not configs:
            del self.broker_configs[record.resource_name]

    def is_usable(self, broker_id: int) -> bool:
        """Registered, unfenced and not shutting down: can lead or join the ISR."""
        b = self.brokers.get(broker_id)
        return b is not None and not b.fenced and not b.in_controlled_shutdown

    def broker_epoch(self, broker_id: int) -> int:
        b = self.brokers.get(broker_id)
        return -1 if b is None else b.broker_epoch

    def topic_config(self, topic: str, key: str, default: str, node_id: int | None = None) -> str:
        """Topic config `key` of `topic` as Kafka resolves it: the topic's value, else the
        dynamic broker config of its synonym (node `node_id`'s, else the cluster-wide
        default), else `default` (the static config)."""
        value = self.topics.get(topic, {}).get(key)
        return value if value is not None else self.topic_defaults(node_id).get(key, default)

    def topic_defaults(self, node_id: int | None = None) -> dict[str, str]:
        """The dynamic broker configs that are topic defaults, by topic config name: the
        cluster-wide ones, overridden by node `node_id`'s."""
        out: dict[str, str] = {}
        names = [CLUSTER_DEFAULT] if node_id is None else [CLUSTER_DEFAULT, str(node_id)]
        for name in names:
            for key, value in self.broker_configs.get(name, {}).items():
                p = props.lookup(key)
                if p is not None and p.topic_name is not None:
                    out[p.topic_name] = value
        return out


# ---------------------------------------------------------------- file encoding
_TYPES = {
    c.__name__: c
    for c in (
        RegisterBrokerRecord,
        BrokerRegistrationChangeRecord,
        TopicRecord,
        PartitionRecord,
        PartitionChangeRecord,
        RemoveTopicRecord,
        LeaderChangeRecord,
        ConfigRecord,
        AccessControlEntryRecord,
        RemoveAccessControlEntryRecord,
    )
}


def encode_record(offset: int, record: MetadataRecord, epoch: int = 0) -> bytes:
    """One line (with the newline) of the metadata log file; `epoch` is the quorum epoch
    of the leader that appended the record."""
    d = asdict(record)
    if "tp" in d:
        d["tp"] = [record.tp.topic, record.tp.partition]  # type: ignore[union-attr]
    return (json.dumps({"offset": offset, "quorum_epoch": epoch, "type": type(record).__name__, **d}, sort_keys=True)
            + "\n").encode()


def decode_line(line: bytes | str, where: str = "metadata log") -> tuple[int, MetadataRecord]:
    """Parse one line; raise ValueError('<where>: what was wrong') on bad input."""
    off, _epoch, rec = decode_entry(line, where)
    return off, rec


def decode_entry(line: bytes | str, where: str = "metadata log") -> tuple[int, int, MetadataRecord]:
    """Parse one line into (offset, quorum epoch, record); a line without `quorum_epoch`
    (a log written before the quorum) is of epoch 0. ValueError('<where>: ...') on bad input."""
    try:
        d = json.loads(line)
        offset = d.pop("offset")
        epoch = d.pop("quorum_epoch", 0)
        if not isinstance(epoch, int) or isinstance(epoch, bool):
            raise TypeError("quorum_epoch is not an integer")
        cls = _TYPES[d.pop("type")]
        if "tp" in d:
            d["tp"] = TopicPartition(d["tp"][0], int(d["tp"][1]))
        if "registration" in d:
            r = d["registration"]
            given: dict[str, Any] = {f.name: (tuple(r[f.name]) if isinstance(r[f.name], list) else r[f.name])
                                     for f in fields(PartitionRegistration) if f.name in r}
            d["registration"] = PartitionRegistration(**given)  # fields added later may be absent
        if "configs" in d:
            d["configs"] = tuple(tuple(kv) for kv in d["configs"])
        if "listeners" in d:
            d["listeners"] = tuple(Endpoint(str(e["name"]), str(e["host"]), int(e["port"])) for e in d["listeners"])
        if "voters" in d:
            d["voters"] = tuple(int(v) for v in d["voters"])
        if not isinstance(offset, int):
            raise TypeError("offset is not an integer")
        return offset, epoch, cls(**d)
    except (ValueError, KeyError, TypeError, IndexError) as e:
        raise ValueError(f"{where}: bad metadata record ({type(e).__name__}: {e})") from None


@dataclass(slots=True)
class MetadataLog:
    """The controller's in-memory metadata log (records in offset order from 0)."""

    records: list[MetadataRecord] = field(default_factory=list)

    @property
    def end_offset(self) -> int:
        return len(self.records)

    def append(self, record: MetadataRecord) -> int:
        """Append and return the record's offset."""
        self.records.append(record)
        return len(self.records) - 1

    def read_from(self, offset: int, max_records: int = 1000) -> tuple[MetadataRecord, ...]:
        return tuple(self.records[offset : offset + max_records])


def metadata_log_from_lines(lines: list[bytes] | list[str], where: str = "metadata log") -> MetadataLog:
    """Rebuild the log from its file's lines (offsets must run 0, 1, 2, ...); a torn last
    line (no newline, from a crash mid-write) is dropped. ValueError names the bad line."""
    log = MetadataLog()
    for i, line in enumerate(lines, start=1):
        text = line.decode() if isinstance(line, bytes) else str(line)
        if not text.strip():
            continue
        if i == len(lines) and not text.endswith("\n"):
            break
        off, rec = decode_line(text, f"{where}:{i}")
        if off != log.end_offset:
            raise ValueError(f"{where}:{i}: record offset {off}, expected {log.end_offset}")
        log.append(rec)
    return log
