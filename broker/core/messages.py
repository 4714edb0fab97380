"""Requests, responses and actions exchanged by the sans-IO state machines.

Field names follow Kafka's JSON schemas (snake_case) so the shell can translate kio
messages one-to-one. Node ids are ints (brokers and controller share the `node.id`
space); clients are strings (any opaque id the shell chooses, e.g. a connection id).
Every request carries a `correlation_id` echoed by its response.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from kio.schema.errors import ErrorCode

from broker.core.acls import AclBinding, AclFilter

NO_LEADER = -1
UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1
# Kafka's debugging replica id (DEBUG_FOLLOWER_ID): a Fetch or ListOffsets any replica answers from its own log
DEBUG_REPLICA_ID = -2

Address = int | str  # a node id (int) or a client id (str)


class TopicPartition(NamedTuple):
    """A partition of a topic (a tuple: hashed in C, it keys every per-partition map)."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass(frozen=True, slots=True)
class Endpoint:
    """A listener a broker advertises (Kafka's BrokerRegistration `Listeners`): the shell
    puts them in the registration; clients and peers find the broker through them."""

    name: str
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class EpochEndOffset:
    """OffsetsForLeaderEpoch / DivergingEpoch payload: an epoch and its end offset."""

    epoch: int
    end_offset: int


# ---------------------------------------------------------------- broker <-> broker: Fetch
@dataclass(frozen=True, slots=True)
class FetchPartition:
    tp: TopicPartition
    current_leader_epoch: int
    fetch_offset: int
    last_fetched_epoch: int
    log_start_offset: int = 0
    partition_max_bytes: int = 1 << 20


@dataclass(frozen=True, slots=True)
class FetchRequest:
    """A follower's (replica_id >= 0) or consumer's (replica_id == -1) fetch.
    `replica_epoch` is the follower's broker epoch (KIP-903), -1 for consumers.
    A consumer fetch waits (up to `max_wait_ms`) until it can return `min_bytes`; its
    records stop at about `max_bytes` in total (at least one batch, as KIP-74)."""

    correlation_id: int
    replica_id: int
    replica_epoch: int
    partitions: tuple[FetchPartition, ...]
    max_wait_ms: int = 500
    min_bytes: int = 1
    max_bytes: int = 0x7FFFFFFF
    isolation_level: int = 0  # consumers: 1 = read_committed (records below the LSO only)


@dataclass(frozen=True, slots=True)
class FetchPartitionResponse:
    tp: TopicPartition
    error: ErrorCode
    high_watermark: int = UNDEFINED_OFFSET
    log_start_offset: int = UNDEFINED_OFFSET
    diverging_epoch: EpochEndOffset | None = None
    records: bytes = b""
    # Not in Kafka's FetchResponse: the leader's LEO, returned with OFFSET_OUT_OF_RANGE so a
    # follower in pre-KIP-101 mode can truncate without a separate ListOffsets round trip.
    log_end_offset: int = UNDEFINED_OFFSET
    last_stable_offset: int = UNDEFINED_OFFSET  # consumer reads (transactions.py)


@dataclass(frozen=True, slots=True)
class FetchResponse:
    correlation_id: int
    partitions: tuple[FetchPartitionResponse, ...]
    error: ErrorCode = ErrorCode.none


@dataclass(frozen=True, slots=True)
class OffsetsForLeaderEpochRequest:
    correlation_id: int
    replica_id: int
    tp: TopicPartition
    current_leader_epoch: int
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class OffsetsForLeaderEpochResponse:
    correlation_id: int
    tp: TopicPartition
    error: ErrorCode
    leader_epoch: int = UNDEFINED_EPOCH
    end_offset: int = UNDEFINED_OFFSET


# ---------------------------------------------------------------- clients -> broker
@dataclass(frozen=True, slots=True)
class DeleteRecordsRequest:
    """DeleteRecords for one partition (offset -1: the high watermark), answered once every
    replica on a live broker has moved its log start there, or after `timeout_ms`."""

    correlation_id: int
    tp: TopicPartition
    offset: int
    timeout_ms: int


@dataclass(frozen=True, slots=True)
class DeleteRecordsResponse:
    correlation_id: int
    tp: TopicPartition
    error: ErrorCode
    low_watermark: int = UNDEFINED_OFFSET


@dataclass(frozen=True, slots=True)
class ProduceRequest:
    """One partition's records (Kafka v2 batches) with acks 0, 1 or -1 (all)."""

    correlation_id: int
    tp: TopicPartition
    acks: int
    records: bytes
    timeout_ms: int = 30000


@dataclass(frozen=True, slots=True)
class ProduceResponse:
    correlation_id: int
    tp: TopicPartition
    error: ErrorCode
    base_offset: int = UNDEFINED_OFFSET


@dataclass(frozen=True, slots=True)
class MetadataRequest:
    correlation_id: int
    topics: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class PartitionMetadata:
    tp: TopicPartition
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    elr: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class MetadataResponse:
    correlation_id: int
    brokers: tuple[int, ...]
    partitions: tuple[PartitionMetadata, ...]
    controller_id: int = -1


# ---------------------------------------------------------------- broker -> controller
@dataclass(frozen=True, slots=True)
class BrokerRegistrationRequest:
    """`previous_broker_epoch` is the epoch found in the clean-shutdown file, -1 if none
    (KIP-966: an unclean shutdown)."""

    correlation_id: int
    broker_id: int
    incarnation_id: str
    previous_broker_epoch: int = -1
    listeners: tuple[Endpoint, ...] = ()


@dataclass(frozen=True, slots=True)
class BrokerRegistrationResponse:
    correlation_id: int
    error: ErrorCode
    broker_epoch: int = -1


@dataclass(frozen=True, slots=True)
class BrokerHeartbeatRequest:
    correlation_id: int
    broker_id: int
    broker_epoch: int
    current_metadata_offset: int
    want_fence: bool = False
    want_shut_down: bool = False


@dataclass(frozen=True, slots=True)
class BrokerHeartbeatResponse:
    correlation_id: int
    error: ErrorCode
    is_caught_up: bool = False
    is_fenced: bool = True
    should_shut_down: bool = False


@dataclass(frozen=True, slots=True)
class BrokerIdAndEpoch:
    broker_id: int
    broker_epoch: int


@dataclass(frozen=True, slots=True)
class AlterPartitionRequest:
    """The leader's proposed ISR (`new_isr_with_epochs`, KIP-903), for one partition."""

    correlation_id: int
    broker_id: int
    broker_epoch: int
    tp: TopicPartition
    leader_epoch: int
    partition_epoch: int
    new_isr_with_epochs: tuple[BrokerIdAndEpoch, ...]
    leader_recovery_state: int = 0


@dataclass(frozen=True, slots=True)
class AlterPartitionResponse:
    correlation_id: int
    tp: TopicPartition
    error: ErrorCode
    leader_id: int = NO_LEADER
    leader_epoch: int = UNDEFINED_EPOCH
    isr: tuple[int, ...] = ()
    leader_recovery_state: int = 0
    partition_epoch: int = -1


@dataclass(frozen=True, slots=True)
class MetadataFetchRequest:
    """A broker pulling the metadata log from `fetch_offset` (KRaft's Fetch on the
    __cluster_metadata topic). The controller answers at once if it has records, else it
    parks the request until a record is appended or `max_wait_ms` passes."""

    correlation_id: int
    broker_id: int
    fetch_offset: int
    max_wait_ms: int = 500


@dataclass(frozen=True, slots=True)
class MetadataFetchResponse:
    correlation_id: int
    records: tuple  # tuple[MetadataRecord, ...] (see metadata.py), first at fetch_offset
    high_watermark: int


@dataclass(frozen=True, slots=True)
class GetReplicaLogInfoRequest:
    """Unclean recovery (KIP-966): the controller asks a replica for its log's tail."""

    correlation_id: int
    tp: TopicPartition


@dataclass(frozen=True, slots=True)
class GetReplicaLogInfoResponse:
    correlation_id: int
    tp: TopicPartition
    broker_id: int
    broker_epoch: int
    last_written_leader_epoch: int
    log_end_offset: int
    error: ErrorCode = ErrorCode.none


# ---------------------------------------------------------------- admin -> controller
@dataclass(frozen=True, slots=True)
class CreateTopicRequest:
    """`assignments`: a manual replica assignment (the replicas of partitions 0, 1, ...;
    then `num_partitions` and `replication_factor` are -1). `validate_only`: check, write nothing."""

    correlation_id: int
    name: str
    num_partitions: int
    replication_factor: int
    configs: tuple[tuple[str, str], ...] = ()
    assignments: tuple[tuple[int, ...], ...] = ()
    validate_only: bool = False


@dataclass(frozen=True, slots=True)
class CreateTopicResponse:
    correlation_id: int
    name: str
    error: ErrorCode
    message: str = ""


@dataclass(frozen=True, slots=True)
class DeleteTopicRequest:
    correlation_id: int
    name: str


@dataclass(frozen=True, slots=True)
class DeleteTopicResponse:
    correlation_id: int
    name: str
    error: ErrorCode
    message: str = ""


PREFERRED_ELECTION, UNCLEAN_ELECTION = 0, 1


@dataclass(frozen=True, slots=True)
class ElectLeadersRequest:
    """Admin election; `election_type` 0 = preferred, 1 = unclean (the `manual` recovery)."""

    correlation_id: int
    tp: TopicPartition
    election_type: int = 1


@dataclass(frozen=True, slots=True)
class ElectLeadersResponse:
    correlation_id: int
    tp: TopicPartition
    error: ErrorCode
    leader: int = NO_LEADER


@dataclass(frozen=True, slots=True)
class CreatePartitionsRequest:
    """Grow `topic` to `count` partitions; `assignments`: the replicas of each new one
    (empty: placed by the controller)."""

    correlation_id: int
    topic: str
    count: int
    assignments: tuple[tuple[int, ...], ...] = ()
    validate_only: bool = False


@dataclass(frozen=True, slots=True)
class CreatePartitionsResponse:
    correlation_id: int
    topic: str
    error: ErrorCode
    message: str = ""


# IncrementalAlterConfigs' operations (AlterConfigOp.OpType)
CONFIG_SET, CONFIG_DELETE, CONFIG_APPEND, CONFIG_SUBTRACT = 0, 1, 2, 3


@dataclass(frozen=True, slots=True)
class ConfigChange:
    name: str
    operation: int  # CONFIG_SET ... CONFIG_SUBTRACT
    value: str | None = None


@dataclass(frozen=True, slots=True)
class AlterConfigsRequest:
    """Change a resource's configs. `replace` (the legacy AlterConfigs): the changes are
    all SETs and every config they do not name is deleted."""

    correlation_id: int
    resource_type: int
    resource_name: str
    changes: tuple[ConfigChange, ...]
    replace: bool = False
    validate_only: bool = False


@dataclass(frozen=True, slots=True)
class AlterConfigsResponse:
    correlation_id: int
    resource_type: int
    resource_name: str
    error: ErrorCode
    message: str = ""


@dataclass(frozen=True, slots=True)
class CreateAclsRequest:
    """CreateAcls: the bindings to store (KRaft's AccessControlEntryRecord)."""

    correlation_id: int
    creations: tuple[AclBinding, ...]


@dataclass(frozen=True, slots=True)
class AclResult:
    error: ErrorCode
    message: str = ""


@dataclass(frozen=True, slots=True)
class AlterReassignmentRequest:
    """AlterPartitionReassignments for one partition: move it to `replicas`, or cancel the
    reassignment in progress (`replicas` None). `allow_rf_change` False (KIP-860): a target
    of another size is refused."""

    correlation_id: int
    tp: TopicPartition
    replicas: tuple[int, ...] | None
    allow_rf_change: bool = True


@dataclass(frozen=True, slots=True)
class AlterReassignmentResponse:
    correlation_id: int
    tp: TopicPartition
    error: ErrorCode
    message: str = ""


@dataclass(frozen=True, slots=True)
class CreateAclsResponse:
    correlation_id: int
    results: tuple[AclResult, ...]  # one per creation, in order


@dataclass(frozen=True, slots=True)
class DeleteAclsRequest:
    correlation_id: int
    filters: tuple[AclFilter, ...]


@dataclass(frozen=True, slots=True)
class AclDeleteResult:
    error: ErrorCode
    message: str = ""
    matching: tuple[AclBinding, ...] = ()  # what the filter matched (and removed)


@dataclass(frozen=True, slots=True)
class DeleteAclsResponse:
    correlation_id: int
    results: tuple[AclDeleteResult, ...]  # one per filter, in order


@dataclass(frozen=True, slots=True)
class NotController:
    """A controller that is not (or not yet) the active one answers a controller-bound
    request with this instead (Kafka's NOT_CONTROLLER): the quorum leader it knows
    (`leader_id`, -1 when none) in `epoch`. An active controller that loses leadership
    sends it to every broker it knew. The broker's shell sends its requests there."""

    leader_id: int
    epoch: int


# ---------------------------------------------------------------- actions
@dataclass(frozen=True, slots=True)
class Send:
    """Deliver `message` to `to` (a node id or a client id)."""

    to: Address
    message: object


@dataclass(frozen=True, slots=True)
class CheckpointHighWatermarks:
    """Persist these HWMs (the shell writes replication-offset-checkpoint)."""

    high_watermarks: dict[TopicPartition, int]


@dataclass(frozen=True, slots=True)
class ShutdownComplete:
    """Controlled shutdown is done: flush every log, write the clean-shutdown file with
    `broker_epoch`, then exit."""

    broker_epoch: int


@dataclass(frozen=True, slots=True)
class LogFailure:
    """A log call failed in storage (answered KAFKA_STORAGE_ERROR): the shell logs it."""

    tp: TopicPartition
    operation: str
    error: str


@dataclass(frozen=True, slots=True)
class ReplicaTruncated:
    """A replica's log was cut from `from_leo` to `to` (`reason`: see
    broker/server/eventlog.py): the shell logs it, the run's report explains losses by it."""

    tp: TopicPartition
    from_leo: int
    to: int
    reason: str
    leader_epoch: int
    role: str


@dataclass(frozen=True, slots=True)
class DeletePartitionLog:
    """The partition's topic was deleted (`topic_deleted`), or its replica moved off this
    broker: the shell removes the replica's log."""

    tp: TopicPartition
    topic_deleted: bool = True


@dataclass(slots=True)
class Actions:
    """What one call into a state machine asks the shell to do, in order."""

    sends: list[Send] = field(default_factory=list)
    other: list[object] = field(default_factory=list)

    def send(self, to: Address, message: object) -> None:
        self.sends.append(Send(to, message))


# What a shell routes to the controller (everything else a node receives is for its
# broker); needed when `process.roles=broker,controller` shares one node id.
CONTROLLER_BOUND = (
    BrokerRegistrationRequest,
    BrokerHeartbeatRequest,
    MetadataFetchRequest,
    AlterPartitionRequest,
    CreateTopicRequest,
    DeleteTopicRequest,
    ElectLeadersRequest,
    GetReplicaLogInfoResponse,
    CreatePartitionsRequest,
    AlterConfigsRequest,
    AlterReassignmentRequest,
    CreateAclsRequest,
    DeleteAclsRequest,
)
