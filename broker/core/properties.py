"""The broker's properties: one declarative table, as Kafka's ConfigDef.

Each `Property` has its Kafka name, a value type (parser, printer, bounds, the type
DescribeConfigs reports), its default, its scopes and a one-line doc. Everything that
reads or reports a broker property derives from `PROPERTIES`:

- `broker/config.py` parses a properties file and `--override`s into `BrokerSettings`
  (scope broker) and validates the storage properties it hands on (scope storage);
- `broker/storage/config.py` builds `StorageConfig` (its fields, defaults and bounds);
- the controller validates topic configs with `topic_value` (scope topic);
- DescribeConfigs (`broker/server/handlers.py`) answers every property with its value
  and source;
- the property tables of docs/broker.md and docs/broker-storage.md are
  `markdown_table(...)`'s rows (``python -m broker.core.properties broker|storage|ignored``
  prints them; tests/broker/test_broker_properties.py compares the docs with this table).

Scopes: `broker` (a broker/controller setting, `BrokerSettings.<field>`), `storage` (read
by the storage engine, `StorageConfig.<field>`), `topic` (may also be set per topic at
CreateTopics, under `topic_name`). A property with a `topic_name` but without the topic
scope is shown on topics (read-only, Kafka's topic-level synonym) and cannot be set there.
Ignored properties are Kafka tuning knobs accepted without effect (and without checks).

Pure data and pure functions: the sans-IO core (the controller) imports this module, so
it imports nothing above `broker/core`.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import IntEnum, StrEnum
from typing import Any

from broker.core import safeguards as sg

INT_MAX = 2**31 - 1
LONG_MIN = -(2**63)
LONG_MAX = 2**63 - 1
RECOVERY_STRATEGIES = ("balanced", "proactive", "manual")


class Scope(StrEnum):
    BROKER = "broker"
    STORAGE = "storage"
    TOPIC = "topic"


class ConfigType(IntEnum):
    """DescribeConfigs' `config_type` (KIP-336)."""

    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    LIST = 7


class ConfigSource(IntEnum):
    """DescribeConfigs' `config_source` (the ones this broker answers)."""

    TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5


# ---------------------------------------------------------------- value records
@dataclass(frozen=True, slots=True)
class Listener:
    """One `listeners` entry: NAME://host:port (host '' binds every interface)."""

    name: str
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class Voter:
    """One `controller.quorum.voters` entry: id@host:port."""

    node_id: int
    host: str
    port: int


# ---------------------------------------------------------------- value types
@dataclass(frozen=True)
class ValueType:
    """How a property's text becomes a value (`parse`, ValueError saying why) and back
    (`show`). `lo`/`hi` bound integer values (also checked by `check`)."""

    name: str  # in the docs
    config_type: ConfigType
    parse: Callable[[str], Any]
    show: Callable[[Any], str] = str
    lo: int | None = None
    hi: int | None = None

    def check(self, value: int) -> None:
        """Raise ValueError when an integer value is outside the bounds."""
        if self.lo is not None and value < self.lo:
            raise ValueError(f"must be at least {self.lo}, got {value}")
        if self.hi is not None and value > self.hi:
            raise ValueError(f"must be at most {self.hi}, got {value}")


def _integer(lo: int, hi: int, config_type: ConfigType = ConfigType.INT) -> ValueType:
    kind, full = {ConfigType.INT: ("int", (-(2**31), INT_MAX)), ConfigType.SHORT: ("short", (-(2**15), 2**15 - 1)),
                  ConfigType.LONG: ("long", (LONG_MIN, LONG_MAX))}[config_type]
    name = kind if (lo, hi) == full else f"{kind} ≥ {lo}" if hi == full[1] else f"{kind} {lo}..{hi}"

    def parse(v: str) -> int:
        try:
            n = int(v)
        except ValueError:
            raise ValueError(f"expected an integer, got {v!r}") from None
        t.check(n)
        return n

    t = ValueType(name, config_type, parse, str, lo, hi)
    return t


def _choice(*options: str, upper: bool = False) -> ValueType:
    def parse(v: str) -> str:
        w = v.upper() if upper else v
        if w not in options:
            raise ValueError(f"expected one of {', '.join(options)}, got {v!r}")
        return w

    return ValueType("one of " + ", ".join(options), ConfigType.STRING, parse)


def _bool(v: str) -> bool:
    if v.lower() in ("true", "false"):
        return v.lower() == "true"
    raise ValueError(f"expected true or false, got {v!r}")


def _host(h: str) -> str:
    return f"[{h}]" if ":" in h else h


def _listeners(v: str) -> tuple[Listener, ...]:
    out = []
    for item in filter(None, (x.strip() for x in v.split(","))):
        m = re.fullmatch(r"([A-Za-z0-9_]+)://(\[[^\]]*\]|[^:/]*):(\d+)", item)
        if m is None:
            raise ValueError(f"{item!r} is not NAME://host:port")
        port = int(m.group(3))
        if not 0 <= port <= 65535:
            raise ValueError(f"{item!r}: port out of range")
        out.append(Listener(m.group(1).upper(), m.group(2).strip("[]"), port))
    if not out:
        raise ValueError("no listener given")
    names = [li.name for li in out]
    if len(set(names)) != len(names):
        raise ValueError(f"listener names must be unique, got {', '.join(names)}")
    return tuple(out)


def _voters(v: str) -> tuple[Voter, ...]:
    out = []
    for item in filter(None, (x.strip() for x in v.split(","))):
        m = re.fullmatch(r"(\d+)@(\[[^\]]*\]|[^:@]+):(\d+)", item)
        if m is None:
            raise ValueError(f"{item!r} is not id@host:port")
        out.append(Voter(int(m.group(1)), m.group(2).strip("[]"), int(m.group(3))))
    if not out:
        raise ValueError("no voter given")
    ids = [x.node_id for x in out]
    if len(set(ids)) != len(ids):
        raise ValueError(f"voter ids must be unique, got {', '.join(map(str, ids))}")
    return tuple(out)


def _roles(v: str) -> frozenset[str]:
    roles = frozenset(x.strip().lower() for x in v.split(",") if x.strip())
    bad = roles - {"broker", "controller"}
    if bad or not roles:
        raise ValueError(f"expected broker, controller or both, got {v!r}")
    return roles


def _names(v: str) -> tuple[str, ...]:
    names = tuple(x.strip().upper() for x in v.split(",") if x.strip())
    if not names:
        raise ValueError("no listener name given")
    return names


def _dirs(v: str) -> tuple[str, ...]:
    dirs = tuple(x.strip() for x in v.split(",") if x.strip())
    if not dirs:
        raise ValueError("no directory given")
    return dirs


def _safeguards(v: str) -> frozenset[str]:
    try:
        return sg.parse_config(v)
    except sg.UnknownSafeguard as e:
        raise ValueError(str(e)) from None


def _protocol_map(v: str) -> dict[str, str]:
    out = {}
    for item in filter(None, (x.strip() for x in v.split(","))):
        name, sep, proto = item.partition(":")
        if not sep:
            raise ValueError(f"{item!r} is not NAME:PROTOCOL")
        if proto.strip().upper() != "PLAINTEXT":
            raise ValueError(f"{name}: only PLAINTEXT is supported, got {proto!r}")
        out[name.strip().upper()] = "PLAINTEXT"
    return out


def _join(values: Iterable[Any]) -> str:
    return ",".join(map(str, values))


BOOLEAN = ValueType("boolean", ConfigType.BOOLEAN, _bool, lambda b: str(b).lower())
STRING = ValueType("string", ConfigType.STRING, lambda v: v)
INT = _integer(-(2**31), INT_MAX)
LONG = _integer(LONG_MIN, LONG_MAX, ConfigType.LONG)
NODE_ID = _integer(0, INT_MAX)
POSITIVE = _integer(1, INT_MAX)
NON_NEGATIVE = _integer(0, INT_MAX)
POSITIVE_LONG = _integer(1, LONG_MAX, ConfigType.LONG)
NON_NEGATIVE_LONG = _integer(0, LONG_MAX, ConfigType.LONG)
LISTENERS = ValueType("list of NAME://host:port", ConfigType.LIST, _listeners,
                      lambda ls: _join(f"{li.name}://{_host(li.host)}:{li.port}" for li in ls))
VOTERS = ValueType("list of id@host:port", ConfigType.LIST, _voters,
                   lambda vs: _join(f"{v.node_id}@{_host(v.host)}:{v.port}" for v in vs))
ROLES = ValueType("list of broker, controller", ConfigType.LIST, _roles, lambda r: _join(sorted(r)))
LISTENER_NAMES = ValueType("list of names", ConfigType.LIST, _names, _join)
LISTENER_NAME = ValueType("string", ConfigType.STRING, lambda v: _names(v)[0])
DIRS = ValueType("list of paths", ConfigType.LIST, _dirs, _join)
DIR = ValueType("string", ConfigType.STRING, lambda v: _dirs(v)[0])
PROTOCOL_MAP = ValueType("list of NAME:PLAINTEXT", ConfigType.LIST, _protocol_map,
                         lambda m: _join(f"{k}:{v}" for k, v in m.items()))
SAFEGUARDS = ValueType("list of safeguard names", ConfigType.LIST, _safeguards, lambda s: _join(sorted(s)))
RECOVERY_STRATEGY = _choice(*RECOVERY_STRATEGIES)
LOG_LEVEL = _choice("DEBUG", "INFO", "WARNING", "ERROR", upper=True)


def _cleanup_policy(v: str) -> str:
    parts = sorted({x.strip().lower() for x in v.split(",") if x.strip()})
    if not parts or set(parts) - {"delete", "compact"}:
        raise ValueError(f"expected delete, compact or both, got {v!r}")
    return ",".join(parts)


CLEANUP_POLICY = ValueType("list of delete, compact", ConfigType.LIST, _cleanup_policy)
COMPRESSION_TYPE = _choice("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd")
TIMESTAMP_TYPE = _choice("CreateTime", "LogAppendTime")
CLUSTER_ID = ValueType("string", ConfigType.STRING, lambda v: v or "wrack-cluster")


# ---------------------------------------------------------------- the table
@dataclass(frozen=True)
class Property:
    """One broker property. `default` is text as in a properties file (None: no value;
    `default_doc` then says what applies, e.g. a default computed from other properties).
    `field` is the attribute it sets: `BrokerSettings.<field>` (scope broker) or
    `StorageConfig.<field>` (scope storage). `never`: a negative value or Long.MAX_VALUE
    means "never" (None in StorageConfig)."""

    name: str
    type: ValueType
    default: str | None
    scopes: frozenset[Scope]
    doc: str
    field: str | None = None
    aliases: tuple[str, ...] = ()
    topic_name: str | None = None
    default_doc: str | None = None
    never: bool = False
    ignored: bool = False

    def parse(self, text: str) -> Any:
        """The value of `text` (ValueError says why not)."""
        return self.type.parse(text.strip())

    def default_value(self) -> Any:
        """The parsed default (None when there is none)."""
        return None if self.default is None else self.type.parse(self.default)

    @property
    def settable_on_topics(self) -> bool:
        return Scope.TOPIC in self.scopes


B, S, T = frozenset({Scope.BROKER}), frozenset({Scope.STORAGE}), frozenset({Scope.BROKER, Scope.TOPIC})
ST = frozenset({Scope.STORAGE, Scope.TOPIC})  # read by the storage engine, per topic


def _ignored(name: str, doc: str, default: str | None = None, topic_name: str | None = None,
             on_topics: bool = False) -> Property:
    """A Kafka knob accepted without effect; `on_topics`: also settable (and ignored) per topic."""
    return Property(name, STRING, default, T if on_topics else B, doc, topic_name=topic_name, ignored=True)


PROPERTIES: tuple[Property, ...] = (
    # ---- identity, roles, listeners
    Property("node.id", NODE_ID, None, B, "This node's id, unique in the cluster.", field="node_id", aliases=("broker.id",),
       default_doc="required"),
    Property("process.roles", ROLES, None, B, "`broker`, `controller` or both; `controller` alone: a controller-only process.",
       field="process_roles",
       default_doc="`broker,controller` if `controller.quorum.voters` is absent or names this node, else `broker`"),
    Property("cluster.id", CLUSTER_ID, "wrack-cluster", B, "The cluster's id in Metadata answers.", field="cluster_id"),
    Property("listeners", LISTENERS, "PLAINTEXT://:9092", B, "`NAME://host:port,...` to listen on (empty host: every interface).",
       field="listeners"),
    Property("advertised.listeners", LISTENERS, None, B, "What Metadata answers and peers use.", field="advertised_listeners",
       default_doc="the non-controller listeners (empty host: the hostname)"),
    Property("controller.listener.names", LISTENER_NAMES, "CONTROLLER", B, "Listeners that carry only controller links.",
       field="controller_listener_names"),
    Property("inter.broker.listener.name", LISTENER_NAME, None, B, "The listener peers fetch from.",
       field="inter_broker_listener_name", default_doc="`PLAINTEXT` if there is one, else the first client listener"),
    Property("listener.security.protocol.map", PROTOCOL_MAP, None, B, "Only PLAINTEXT is supported: each NAME may only map to it.",
       default_doc="every listener PLAINTEXT"),
    # ---- the controller quorum (KRaft's names and defaults; docs/broker-raft.md)
    Property("controller.quorum.voters", VOTERS, None, B,
       "`id@host:port,...`: the controller quorum's voters (Raft, docs/broker-raft.md); a controller must be one of them.",
       field="controller_quorum_voters", default_doc="this node, when it is a controller"),
    Property("controller.quorum.election.timeout.ms", POSITIVE, "1000", B, "Raft election timeout.",
       field="controller_quorum_election_timeout_ms"),
    Property("controller.quorum.fetch.timeout.ms", POSITIVE, "2000", B,
             "A follower voter that hears no leader this long starts an election.",
       field="controller_quorum_fetch_timeout_ms"),
    Property("controller.quorum.request.timeout.ms", POSITIVE, "2000", B, "A quorum request unanswered this long is retried.",
       field="controller_quorum_request_timeout_ms"),
    Property("controller.quorum.retry.backoff.ms", POSITIVE, "20", B, "Wait before a quorum request is retried.",
       field="controller_quorum_retry_backoff_ms"),
    # ---- directories
    Property("log.dirs", DIRS, "/tmp/kafka-logs", B, "Data directories (comma-separated).", field="log_dirs", aliases=("log.dir",)),
    Property("metadata.log.dir", DIR, None, B, "Where the metadata log and quorum state live.", field="metadata_log_dir",
       default_doc="the first log dir"),
    # ---- topics and clients
    Property("min.insync.replicas", POSITIVE, "1", T, "acks=all needs this many in-sync replicas (capped at the replication factor).",
       field="min_insync_replicas", topic_name="min.insync.replicas"),
    Property("default.replication.factor", _integer(1, 32767), "1", B, "Replication factor of auto-created topics.",
       field="default_replication_factor"),
    Property("num.partitions", POSITIVE, "1", B, "Partitions of auto-created topics.", field="num_partitions"),
    Property("auto.create.topics.enable", BOOLEAN, "true", B, "Metadata requests create unknown topics.",
       field="auto_create_topics_enable"),
    Property("message.max.bytes", NON_NEGATIVE, "1048588", T, "Largest record batch a Produce may carry (after recompression).",
       field="message_max_bytes", topic_name="max.message.bytes"),
    Property("socket.request.max.bytes", POSITIVE, "104857600", B, "Largest request frame; a larger one closes the connection.",
       field="socket_request_max_bytes"),
    Property("log.cleanup.policy", CLEANUP_POLICY, "delete", ST,
       "`delete` (retention), `compact` (the log cleaner keeps the latest record per key) or both.",
       field="cleanup_policy", topic_name="cleanup.policy"),
    Property("compression.type", COMPRESSION_TYPE, "producer", T,
       "`producer` keeps the producer's codec; a codec recompresses batches on the leader (snappy and lz4 unavailable).",
       topic_name="compression.type"),
    Property("log.message.timestamp.type", TIMESTAMP_TYPE, "CreateTime", T,
       "`LogAppendTime`: the leader stamps each batch with its append time.", topic_name="message.timestamp.type"),
    # ---- replication and the controller
    Property("broker.heartbeat.interval.ms", POSITIVE, "2000", B, "A broker's heartbeat to the controller.",
       field="broker_heartbeat_interval_ms"),
    Property("broker.session.timeout.ms", POSITIVE, "9000", B, "The controller fences a broker it has not heard from this long.",
       field="broker_session_timeout_ms"),
    Property("replica.lag.time.max.ms", POSITIVE, "30000", B, "A follower not caught up this long leaves the ISR.",
       field="replica_lag_time_max_ms"),
    Property("replica.fetch.wait.max.ms", NON_NEGATIVE, "500", B, "Long-poll wait of a follower's fetch.",
       field="replica_fetch_wait_max_ms"),
    Property("replica.fetch.backoff.ms", NON_NEGATIVE, "1000", B, "Wait after a failed follower fetch.",
       field="replica_fetch_backoff_ms"),
    Property("replica.fetch.max.bytes", POSITIVE, "1048576", B,
             "Accepted; a follower fetches up to 1 MiB per partition (the default) whatever it says.",
       field="replica_fetch_max_bytes"),
    Property("replica.socket.timeout.ms", POSITIVE, "30000", B,
             "A fetch, metadata fetch or AlterPartition unanswered this long is given up and sent again.",
       field="replica_socket_timeout_ms"),
    Property("replica.high.watermark.checkpoint.interval.ms", POSITIVE, "5000", B, "How often high watermarks are checkpointed.",
       field="replica_high_watermark_checkpoint_interval_ms"),
    Property("retry.backoff.ms", POSITIVE, "100", B,
       "Registration and metadata fetch retried after a broken controller link: this, doubling (KIP-580).",
       field="retry_backoff_ms"),
    Property("retry.backoff.max.ms", POSITIVE, "1000", B, "The most `retry.backoff.ms` doubles to.", field="retry_backoff_max_ms"),
    Property("socket.connection.setup.timeout.ms", POSITIVE, "10000", B,
       "An inter-node link not connected by then (or by `wrack.link.timeout.ms`, whichever is first) is given up.",
       field="socket_connection_setup_timeout_ms"),
    Property("wrack.link.timeout.ms", _integer(100, INT_MAX), "3000", B,
       "An inter-node link that hears nothing (not even a ping) this long is closed; also its TCP_USER_TIMEOUT.",
       field="link_timeout_ms"),
    # ---- elections and safeguards
    Property("unclean.leader.election.enable", BOOLEAN, "false", T, "An out-of-sync replica may become leader (may lose data).",
       field="unclean_leader_election_enable", topic_name="unclean.leader.election.enable"),
    Property("unclean.recovery.strategy", RECOVERY_STRATEGY, "balanced", T,
       "How a partition without an eligible leader recovers (KIP-966).",
       field="unclean_recovery_strategy", topic_name="unclean.recovery.strategy"),
    Property("wrack.safeguards.off", SAFEGUARDS, "", T,
             "Safeguards switched off (docs/broker-replication.md); a topic's add to the node's.",
       field="safeguards_off", topic_name="wrack.safeguards.off"),
    # ---- shutdown
    Property("controlled.shutdown.enable", BOOLEAN, "true", B, "Accepted; SIGTERM always shuts down in a controlled way."),
    Property("wrack.controlled.shutdown.timeout.ms", POSITIVE, "8000", B,
       "After it, the logs are flushed and the clean-shutdown marker written anyway.",
       field="controlled_shutdown_timeout_ms"),
    # ---- consumer groups
    Property("group.initial.rebalance.delay.ms", NON_NEGATIVE, "3000", B, "Wait for more members before a new group's first rebalance.",
       field="group_initial_rebalance_delay_ms"),
    Property("group.min.session.timeout.ms", POSITIVE, "6000", B, "Smallest session timeout a member may ask for.",
       field="group_min_session_timeout_ms"),
    Property("group.max.session.timeout.ms", POSITIVE, "1800000", B, "Largest session timeout a member may ask for.",
       field="group_max_session_timeout_ms"),
    # ---- transactions
    Property("transaction.state.log.num.partitions", _integer(1, 1000), "4", B,
             "Partitions of the transaction state topic `__transaction_state` (Kafka's default is 50).",
       field="transaction_state_log_num_partitions"),
    Property("transaction.state.log.replication.factor", _integer(1, 32767), "3", B,
             "Replication factor of `__transaction_state` (capped at the registered brokers when it is created).",
       field="transaction_state_log_replication_factor"),
    Property("transaction.state.log.min.isr", POSITIVE, "2", B,
             "`min.insync.replicas` of `__transaction_state` (capped at its replication factor).",
       field="transaction_state_log_min_isr"),
    Property("transaction.max.timeout.ms", POSITIVE, "900000", B,
             "Largest transaction timeout a producer may ask for (INVALID_TRANSACTION_TIMEOUT).",
       field="transaction_max_timeout_ms"),
    Property("transaction.abort.timed.out.transaction.cleanup.interval.ms", POSITIVE, "10000", B,
             "How often the coordinator aborts transactions older than their timeout.",
       field="transaction_abort_interval_ms"),
    # ---- logging and tests
    Property("wrack.log.file", STRING, None, B, "The log file besides stderr; empty: stderr only.", field="log_file",
       default_doc="`<first log dir>/wrack-broker.log`"),
    Property("wrack.log.level", LOG_LEVEL, "INFO", B, "Log level.", field="log_level"),
    Property("wrack.test.never.serve.after.restart", BOOLEAN, "false", B,
       "Liveness tests only: a broker started again on a data dir it started from before never registers (`no-recovery`).",
       field="test_never_serve_after_restart"),
    # ---- storage (broker/storage, docs/broker-storage.md)
    Property("log.segment.bytes", _integer(14, INT_MAX), "1073741824", ST, "A segment rolls when an append would take it past this.",
       field="segment_bytes", topic_name="segment.bytes"),
    Property("log.index.interval.bytes", NON_NEGATIVE, "4096", ST, "Bytes appended between two offset-index entries.",
       field="index_interval_bytes", topic_name="index.interval.bytes"),
    Property("log.index.size.max.bytes", _integer(8, INT_MAX), "10485760", ST, "Size of a segment's index; a full index rolls the segment.",
       field="index_max_bytes", topic_name="segment.index.bytes"),
    Property("log.flush.interval.messages", POSITIVE_LONG, str(LONG_MAX), ST,
       "Flush (fdatasync) once this many messages are unflushed; 1: every write.",
       field="flush_interval_messages", topic_name="flush.messages", never=True),
    Property("log.flush.interval.ms", NON_NEGATIVE_LONG, None, ST, "Flush a log this long after its first unflushed append.",
       field="flush_interval_ms", topic_name="flush.ms", never=True, default_doc="`log.flush.scheduler.interval.ms`"),
    Property("log.flush.scheduler.interval.ms", NON_NEGATIVE_LONG, str(LONG_MAX), S,
       "`log.flush.interval.ms` when that is unset.", field="flush_scheduler_interval_ms", never=True),
    Property("log.flush.offset.checkpoint.interval.ms", POSITIVE, "60000", S, "How often the recovery points are checkpointed.",
       field="flush_offset_checkpoint_interval_ms"),
    Property("log.flush.start.offset.checkpoint.interval.ms", POSITIVE, "60000", S, "How often the log start offsets are checkpointed.",
       field="flush_start_offset_checkpoint_interval_ms"),
    Property("log.retention.ms", LONG, "-1", ST,
       "Delete segments older than this; -1: keep forever (Kafka keeps 7 days). Wins over minutes and hours.",
       field="retention_ms", topic_name="retention.ms", never=True),
    Property("log.retention.minutes", LONG, None, S, "Retention in minutes, when `log.retention.ms` is unset.", never=True),
    Property("log.retention.hours", LONG, None, S, "Retention in hours, when the two above are unset.", never=True,
       default_doc="unset (Kafka: 168)"),
    Property("log.retention.bytes", LONG, "-1", ST, "Delete the oldest segments while a log is larger than this; -1: no limit.",
       field="retention_bytes", topic_name="retention.bytes", never=True),
    Property("log.retention.check.interval.ms", POSITIVE_LONG, "300000", S,
       "How often retention is applied and compacted logs are cleaned.", field="retention_check_interval_ms"),
    Property("log.cleaner.delete.retention.ms", NON_NEGATIVE_LONG, "86400000", ST,
       "A compacted log keeps a tombstone (null value) this long after its batch's timestamp.",
       field="delete_retention_ms", topic_name="delete.retention.ms"),
    # ---- Kafka tuning knobs accepted without effect
    _ignored("num.network.threads", "Kafka's network threads: one asyncio loop here."),
    _ignored("num.io.threads", "Kafka's request handler threads: one asyncio loop here."),
    _ignored("num.replica.fetchers", "Kafka's fetcher threads."),
    _ignored("num.recovery.threads.per.data.dir", "Kafka's recovery threads."),
    _ignored("socket.send.buffer.bytes", "Kernel defaults apply."),
    _ignored("socket.receive.buffer.bytes", "Kernel defaults apply."),
    _ignored("offsets.topic.replication.factor", "No __consumer_offsets topic: offsets are stored per coordinator."),
    _ignored("log.cleaner.enable", "The cleaner always runs for compacted topics."),
    _ignored("log.message.format.version", "Deprecated: Kafka 3.x ignores it (record format v2 always); "
             "topics may set `message.format.version` too.", "3.0-IV1", "message.format.version", on_topics=True),
    _ignored("zookeeper.connect", "KRaft only."),
    _ignored("group.coordinator.rebalance.protocols", "The classic group protocol only."),
    _ignored("eligible.leader.replicas.enable", "ELR is a safeguard here (`wrack.safeguards.off=elr`)."),
    _ignored("log.segment.delete.delay.ms", "Segments are deleted at once."),
)

BY_NAME: dict[str, Property] = {n: p for p in PROPERTIES for n in (p.name, *p.aliases)}
BY_TOPIC_NAME: dict[str, Property] = {p.topic_name: p for p in PROPERTIES if p.topic_name is not None}


def lookup(name: str) -> Property | None:
    """The property called `name` (or one of its aliases), None if unknown."""
    return BY_NAME.get(name)


class Dynamic(StrEnum):
    """How a broker config may change at runtime (Kafka's DynamicBrokerConfig)."""

    CLUSTER = "cluster"  # per broker, or as the cluster-wide default
    PER_BROKER = "per-broker"  # per broker only (Kafka's PerBrokerConfigs)


LISTENER_PROPERTIES = frozenset({"listeners", "advertised.listeners", "listener.security.protocol.map"})
# Kafka's dynamic thread pools: accepted here without effect, as statically
_DYNAMIC_KNOBS = frozenset({"num.network.threads", "num.io.threads", "num.replica.fetchers",
                            "num.recovery.threads.per.data.dir"})


def dynamic(name: str) -> Dynamic | None:
    """Whether broker config `name` is dynamic (None: read-only, set in the properties).
    Dynamic: a topic config's synonym (e.g. `log.retention.ms`), Kafka's thread-pool knobs,
    the listeners (per broker), and a name the table does not know (Kafka accepts custom
    configs, e.g. `sasl.*` for listeners this broker has not), except `wrack.*` ones."""
    p = lookup(name)
    if p is None:
        return None if name.startswith("wrack.") else Dynamic.CLUSTER
    if p.name in LISTENER_PROPERTIES:
        return Dynamic.PER_BROKER
    return Dynamic.CLUSTER if p.topic_name is not None or p.name in _DYNAMIC_KNOBS else None


def in_scope(scope: Scope) -> tuple[Property, ...]:
    """The non-ignored properties with `scope`, in table order."""
    return tuple(p for p in PROPERTIES if scope in p.scopes and not p.ignored)


def storage_field(field: str) -> Property:
    """The storage property that sets `StorageConfig.<field>`."""
    return next(p for p in in_scope(Scope.STORAGE) if p.field == field)


def topic_value(key: str, value: str) -> str:
    """A topic config as stored (normalised: `TRUE` -> `true`); ValueError naming the
    config when the key cannot be set on a topic or the value is bad."""
    p = BY_TOPIC_NAME.get(key)
    if p is None or not p.settable_on_topics:
        raise ValueError(f"unknown topic config {key!r}")
    try:
        return p.type.show(p.parse(value))
    except ValueError as e:
        raise ValueError(f"{key}: {e}") from None


# ---------------------------------------------------------------- docs
def _default_cell(p: Property) -> str:
    if p.default_doc is not None:
        return p.default_doc
    if p.default is None:
        return "unset"
    return f"`{p.default}`" if p.default else "(empty)"


def _topic_cell(p: Property) -> str:
    if p.topic_name is None:
        return ""
    return f"`{p.topic_name}`" + ("" if p.settable_on_topics else " (read-only)")


def markdown_rows(which: str) -> list[list[str]]:
    """The cells of the docs' property table `which` (broker, storage or ignored)."""
    if which == "ignored":
        return [[f"`{p.name}`", p.doc] for p in PROPERTIES if p.ignored]
    scope = {"broker": Scope.BROKER, "storage": Scope.STORAGE}[which]
    return [[" / ".join(f"`{n}`" for n in (p.name, *p.aliases)), p.type.name, _default_cell(p),
             ", ".join(sorted(p.scopes)), _topic_cell(p), p.doc] for p in in_scope(scope)]


MARKDOWN_HEADERS = {
    "broker": ["property", "type", "default", "scope", "on topics", "description"],
    "storage": ["property", "type", "default", "scope", "on topics", "description"],
    "ignored": ["property", "why it has no effect"],
}


def markdown_table(which: str) -> str:
    """The docs' property table `which` (broker, storage or ignored) as markdown."""
    head = MARKDOWN_HEADERS[which]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    lines += ["| " + " | ".join(row) + " |" for row in markdown_rows(which)]
    return "\n".join(lines)


if __name__ == "__main__":
    for arg in sys.argv[1:] or ["broker", "storage", "ignored"]:
        print(markdown_table(arg), end="\n\n")
