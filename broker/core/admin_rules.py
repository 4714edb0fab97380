"""Kafka's rules for the admin requests the controller serves, as pure functions of the
metadata image: what a new topic or new partitions look like (placed, or a manual replica
assignment), and which `ConfigRecord`s a config change writes. Each raises `AdminError`
with Kafka's error code and a message saying why (KRaft's ReplicationControlManager and
ConfigurationControlManager; docs/broker.md "Kafka APIs").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from kio.schema.errors import ErrorCode

from broker.core.messages import (
    CONFIG_APPEND,
    CONFIG_DELETE,
    CONFIG_SET,
    CONFIG_SUBTRACT,
    ConfigChange,
    TopicPartition,
)
from broker.core.metadata import (
    BROKER_RESOURCE,
    CLUSTER_DEFAULT,
    TOPIC_RESOURCE,
    ConfigRecord,
    MetadataImage,
    PartitionRegistration,
)
from broker.core.placement import PlacementError, assign_replicas
from broker.core.properties import BY_TOPIC_NAME, ConfigType, Dynamic, dynamic, lookup, topic_value

E = ErrorCode


class AdminError(Exception):
    """A refused admin request: Kafka's error code and a message."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


# ---------------------------------------------------------------- replica assignments
def ordered_assignments(pairs: Iterable[tuple[int, tuple[int, ...]]]) -> tuple[tuple[int, ...], ...]:
    """CreateTopics' (partition index, replicas) pairs as the replicas of partitions 0, 1, ...;
    a partition given twice or a gap is INVALID_REPLICA_ASSIGNMENT."""
    by_index: dict[int, tuple[int, ...]] = {}
    for index, replicas in pairs:
        if index in by_index:
            raise AdminError(E.invalid_replica_assignment, f"Found multiple manual partition assignments for partition {index}")
        by_index[index] = tuple(replicas)
    if sorted(by_index) != list(range(len(by_index))):
        raise AdminError(E.invalid_replica_assignment, "partitions should be a consecutive 0-based integer sequence")
    return tuple(by_index[i] for i in range(len(by_index)))


def check_assignment(image: MetadataImage, replicas: tuple[int, ...], replication_factor: int | None = None) -> None:
    """A manual replica list: not empty, every broker registered, none twice, and (when
    given) `replication_factor` replicas. INVALID_REPLICA_ASSIGNMENT otherwise."""
    if not replicas:
        raise AdminError(E.invalid_replica_assignment, "The manual partition assignment includes an empty replica list.")
    for b in sorted(replicas):
        if b not in image.brokers:
            raise AdminError(E.invalid_replica_assignment,
                             f"The manual partition assignment includes broker {b}, but no such broker is registered.")
    if len(set(replicas)) != len(replicas):
        twice = next(b for b in replicas if replicas.count(b) > 1)
        raise AdminError(E.invalid_replica_assignment,
                         f"The manual partition assignment includes the broker {twice} more than once.")
    if replication_factor is not None and len(replicas) != replication_factor:
        raise AdminError(E.invalid_replica_assignment,
                         f"The manual partition assignment includes a partition with {len(replicas)} replica(s), but this "
                         f"is not consistent with previous partitions, which have {replication_factor} replica(s).")


def manual_partitions(image: MetadataImage, assignments: tuple[tuple[int, ...], ...], first: int,
                      replication_factor: int | None = None) -> list[PartitionRegistration]:
    """Registrations for manually assigned partitions `first`, `first + 1`, ...: the ISR is
    the usable replicas (none usable: INVALID_REPLICA_ASSIGNMENT), led by the first of them.
    All must have one replication factor (`replication_factor`, else the first one's)."""
    out = []
    for i, replicas in enumerate(assignments):
        check_assignment(image, replicas, replication_factor)
        replication_factor = len(replicas)
        isr = tuple(b for b in replicas if image.is_usable(b))
        if not isr:
            raise AdminError(E.invalid_replica_assignment, f"All brokers specified in the manual partition assignment for "
                                                           f"partition {first + i} are fenced or in controlled shutdown.")
        out.append(PartitionRegistration(replicas=replicas, isr=isr, leader=isr[0]))
    return out


def placed_partitions(image: MetadataImage, count: int, replication_factor: int, start: int) -> list[PartitionRegistration]:
    """Registrations for `count` new partitions placed on the usable brokers (placement.py);
    INVALID_PARTITIONS / INVALID_REPLICATION_FACTOR as Kafka."""
    if count <= 0:
        raise AdminError(E.invalid_partitions, f"Number of partitions must be positive, got {count}.")
    live = [b for b in image.brokers if image.is_usable(b)]
    try:
        placed = assign_replicas(live, count, replication_factor, start=start)
    except PlacementError as e:
        raise AdminError(E.invalid_replication_factor, f"Unable to replicate the partition {replication_factor} time(s): {e}") from None
    return [PartitionRegistration(replicas=r, isr=r, leader=r[0]) for r in placed]


def new_partitions(image: MetadataImage, topic: str, count: int, assignments: tuple[tuple[int, ...], ...],
                   start: int) -> list[PartitionRegistration]:
    """CreatePartitions: the registrations of the partitions that grow `topic` to `count`."""
    have = sum(1 for tp in image.partitions if tp.topic == topic)
    if topic not in image.topics or not have:
        raise AdminError(E.unknown_topic_or_partition, f"No such topic as {topic}")
    if count == have:
        raise AdminError(E.invalid_partitions, f"Topic already has {have} partition(s).")
    if count < have:
        raise AdminError(E.invalid_partitions,
                         f"The topic {topic} currently has {have} partition(s); {count} would not be an increase.")
    additional = count - have
    rf = len(image.partitions[TopicPartition(topic, 0)].target_replicas)
    if assignments:
        if len(assignments) != additional:
            raise AdminError(E.invalid_replica_assignment, f"Attempted to add {additional} additional partition(s), but only "
                                                           f"{len(assignments)} assignment(s) were specified.")
        return manual_partitions(image, assignments, have, rf)
    return placed_partitions(image, additional, rf, start)


# ---------------------------------------------------------------- topic configs
def new_topic_configs(configs: Iterable[tuple[str, str]]) -> dict[str, str]:
    """CreateTopics' configs, normalised (`topic_value`); INVALID_CONFIG names a bad one."""
    out = {}
    for key, value in configs:
        if value is None:
            raise AdminError(E.invalid_config, f"Null value not supported for topic config {key}")
        try:
            out[key] = topic_value(key, value)
        except ValueError as e:
            raise AdminError(E.invalid_config, str(e)) from None
    return out


def config_records(image: MetadataImage, resource_type: int, name: str, changes: tuple[ConfigChange, ...],
                   replace: bool) -> list[ConfigRecord]:
    """The ConfigRecords that apply `changes` to topic `name`, or to the dynamic configs of
    broker `name` ("": the cluster-wide default; `_check_broker_changes`), only the configs
    whose value changes. `replace` (legacy AlterConfigs): every current config not named is deleted.
    INVALID_REQUEST (a key twice in IncrementalAlterConfigs, no value, an unknown operation), UNKNOWN_TOPIC_OR_PARTITION,
    then INVALID_CONFIG (an unknown key, a bad value, APPEND/SUBTRACT on a non-list), in
    KRaft's order (its existence check comes before the validator: librdkafka 0081 expects
    UNKNOWN_TOPIC_OR_PART for an unknown key on a topic that does not exist)."""
    if resource_type not in (TOPIC_RESOURCE, BROKER_RESOURCE):
        raise AdminError(E.invalid_request, f"Unexpected resource type {resource_type}")
    if replace:  # legacy AlterConfigs: a key given twice takes its last value, as Kafka's
        changes = tuple({c.name: c for c in changes}.values())
    _check_well_formed(changes)
    if resource_type == BROKER_RESOURCE:
        _check_broker_changes(name, changes)
        current: Mapping[str, str] = image.broker_configs.get(name, {})
    elif name not in image.topics:
        raise AdminError(E.unknown_topic_or_partition, f"No such topic as {name}")
    else:
        current = image.topics.get(name, {})
    wanted = {} if replace else dict(current)
    for c in changes:
        value = _apply_op(c, wanted.get(c.name) if not replace else None, topic=resource_type == TOPIC_RESOURCE)
        if value is None:
            wanted.pop(c.name, None)
        else:
            wanted[c.name] = value
    keys = sorted(set(current) | set(wanted))
    return [ConfigRecord(resource_type, name, k, wanted.get(k)) for k in keys if current.get(k) != wanted.get(k)]


def _check_broker_changes(name: str, changes: tuple[ConfigChange, ...]) -> None:
    """Kafka's rules for dynamic broker configs (DynamicBrokerConfig, KRaft's
    ControllerConfigurationValidator): a broker id or "" (the cluster-wide default) as the
    name; read-only configs, per-broker ones at the cluster level, and any listener change
    are INVALID_REQUEST."""
    if name != CLUSTER_DEFAULT and not name.isdigit():
        raise AdminError(E.invalid_request, f"Invalid broker name {name}")
    read_only = sorted(c.name for c in changes if dynamic(c.name) is None)
    if read_only:
        raise AdminError(E.invalid_request, f"Cannot update these configs dynamically: {', '.join(read_only)}")
    per_broker = sorted(c.name for c in changes if dynamic(c.name) == Dynamic.PER_BROKER)
    if per_broker and name == CLUSTER_DEFAULT:
        raise AdminError(E.invalid_request, "Cannot update these configs at default cluster level, broker id must be "
                                            f"specified: {', '.join(per_broker)}")
    if per_broker:  # the per-broker ones are the listeners (LISTENER_PROPERTIES)
        raise AdminError(E.invalid_request,
                         "Dynamic reconfiguration of listeners is not yet supported when using a Raft-based metadata quorum")


def _check_well_formed(changes: tuple[ConfigChange, ...]) -> None:
    names = [c.name for c in changes]
    if len(set(names)) != len(names):
        raise AdminError(E.invalid_request, "Error due to duplicate config keys")
    nulls = [c.name for c in changes if c.operation != CONFIG_DELETE and c.value is None]
    if nulls:
        raise AdminError(E.invalid_request, "Null value not supported for : " + ", ".join(nulls))
    bad = [c for c in changes if c.operation not in (CONFIG_SET, CONFIG_DELETE, CONFIG_APPEND, CONFIG_SUBTRACT)]
    if bad:
        raise AdminError(E.invalid_request, f"Unknown operations type {bad[0].operation}")


def _apply_op(c: ConfigChange, current: str | None, topic: bool = True) -> str | None:
    """The value after one operation (normalised), None when deleted; a topic's config
    (`topic`), else a dynamic broker config (checked by `_check_broker_changes`)."""
    p = BY_TOPIC_NAME.get(c.name) if topic else lookup(c.name)
    if topic and (p is None or not p.settable_on_topics):
        raise AdminError(E.invalid_config, f"Unknown topic config name: {c.name}")
    if c.operation == CONFIG_DELETE:
        return None
    assert c.value is not None
    topic_name = p.topic_name if p is not None else None
    if c.operation == CONFIG_SET:
        return _valid(c.name, c.value, topic_name)
    if p is not None and p.type.config_type != ConfigType.LIST:
        op = "APPEND" if c.operation == CONFIG_APPEND else "SUBTRACT"
        raise AdminError(E.invalid_config, f"Can't {op} to key {c.name} because its type is not LIST.")
    default = p.default if p is not None else None
    parts = [x for x in (current if current is not None else default or "").split(",") if x]
    given = [x for x in c.value.split(",") if x]
    if c.operation == CONFIG_APPEND:
        parts += [x for x in given if x not in parts]
    else:
        parts = [x for x in parts if x not in given]
    return _valid(c.name, ",".join(parts), topic_name)


def _valid(key: str, value: str, topic_name: str | None) -> str:
    """`value` normalised as topic config `topic_name` (a topic's config, or a broker
    config that is a topic default); as given when there is no such config."""
    if topic_name is None:
        return value
    try:
        return topic_value(topic_name, value)
    except ValueError as e:
        raise AdminError(E.invalid_config, f"Invalid value {value} for configuration {key}: {e}") from None
