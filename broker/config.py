"""The broker's configuration: Kafka property names from a properties file and overrides.

`load_settings(config_file, overrides)` reads a Java-style properties file (optional),
applies `key=value` overrides (as kafka-server-start's `--override`), validates every
known property and returns `BrokerSettings`. Bad input raises `ConfigError` (an
`InputError`: one line naming the property and where it came from; exit 254).
Unknown properties are kept in `unknown` (the broker logs them once, like Kafka).

Defaults are Kafka's, except that a node without `process.roles` is a controller when
`controller.quorum.voters` is absent or names it (and a broker in both cases), so that
``wrack-broker --override node.id=0 --override listeners=PLAINTEXT://127.0.0.1:9092
--override log.dirs=/tmp/x`` starts a working single node.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from broker.core import safeguards as sg
from broker.core.controller import RECOVERY_STRATEGIES
from harness.errors import InputError


class ConfigError(InputError):
    """A bad property: the message names it and its source (FILE:LINE or --override)."""


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


@dataclass(frozen=True)
class BrokerSettings:
    """Everything the process needs, validated. Field names follow the Kafka property
    names (dots become underscores)."""

    node_id: int
    process_roles: frozenset[str]
    listeners: tuple[Listener, ...]
    advertised_listeners: tuple[Listener, ...]
    controller_listener_names: tuple[str, ...]
    inter_broker_listener_name: str
    controller_quorum_voters: tuple[Voter, ...]
    log_dirs: tuple[str, ...]
    metadata_log_dir: str
    cluster_id: str = "wrack-cluster"
    # topics and clients
    min_insync_replicas: int = 1
    default_replication_factor: int = 1
    num_partitions: int = 1
    auto_create_topics_enable: bool = True
    message_max_bytes: int = 1048588
    socket_request_max_bytes: int = 104857600
    # replication and the controller
    broker_heartbeat_interval_ms: int = 2000
    broker_session_timeout_ms: int = 9000
    replica_lag_time_max_ms: int = 30000
    replica_fetch_wait_max_ms: int = 500
    replica_fetch_backoff_ms: int = 1000
    retry_backoff_ms: int = 100
    retry_backoff_max_ms: int = 1000
    replica_fetch_max_bytes: int = 1048576
    replica_socket_timeout_ms: int = 30000
    replica_high_watermark_checkpoint_interval_ms: int = 5000
    socket_connection_setup_timeout_ms: int = 10000
    link_timeout_ms: int = 3000
    # the controller quorum (KRaft's controller.quorum.*)
    controller_quorum_election_timeout_ms: int = 1000
    controller_quorum_fetch_timeout_ms: int = 2000
    controller_quorum_request_timeout_ms: int = 2000
    controller_quorum_retry_backoff_ms: int = 20
    # liveness tests only: a broker started again on a data dir it started from before never
    # registers (never serves again), a cluster that cannot recover (checkers.liveness)
    test_never_serve_after_restart: bool = False
    unclean_leader_election_enable: bool = False
    unclean_recovery_strategy: str = "balanced"
    safeguards_off: frozenset[str] = frozenset()
    controlled_shutdown_timeout_ms: int = 8000
    # consumer groups
    group_initial_rebalance_delay_ms: int = 3000
    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 1800000
    # logging
    log_file: str | None = None
    log_level: str = "INFO"
    # storage properties (log.*), validated here, interpreted by broker/storage
    storage: dict[str, str] = field(default_factory=dict)
    # every property as given (after overrides), and those this broker does not know
    raw: dict[str, str] = field(default_factory=dict)
    unknown: tuple[str, ...] = ()

    @property
    def is_broker(self) -> bool:
        return "broker" in self.process_roles

    @property
    def is_controller(self) -> bool:
        return "controller" in self.process_roles

    def voter(self, node_id: int) -> Voter | None:
        return next((v for v in self.controller_quorum_voters if v.node_id == node_id), None)

    def listener(self, name: str) -> Listener | None:
        return next((li for li in self.listeners if li.name == name), None)

    def client_listeners(self) -> tuple[Listener, ...]:
        return tuple(li for li in self.listeners if li.name not in self.controller_listener_names)


# ---------------------------------------------------------------- properties files
def parse_properties(text: str, source: str) -> list[tuple[str, str, str]]:
    """Java properties syntax (comments with # or !, `key=value`, `key: value` or
    `key value`, backslash line continuations and escapes). Returns (key, value,
    'source:line') in file order."""
    out: list[tuple[str, str, str]] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        start = i
        line = lines[i].lstrip()
        i += 1
        if not line or line[0] in "#!":
            continue
        while _continues(line) and i < len(lines):
            line = line[:-1] + lines[i].lstrip()
            i += 1
        if _continues(line):
            line = line[:-1]
        m = re.match(r"((?:\\.|[^=:\s\\])*)\s*[=:\s]?\s*(.*)$", line, re.S)
        assert m is not None  # the pattern matches any string
        key, value = _unescape(m.group(1)), _unescape(m.group(2))
        if not key:
            raise ConfigError(f"no property name in {lines[start].strip()!r}", source, start + 1)
        out.append((key, value.strip(), f"{source}:{start + 1}"))
    return out


def _continues(line: str) -> bool:
    n = len(line) - len(line.rstrip("\\"))
    return n % 2 == 1


def _unescape(s: str) -> str:
    escapes = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
    return re.sub(r"\\(u[0-9a-fA-F]{4}|.)", lambda m: chr(int(m.group(1)[1:], 16)) if m.group(1)[0] == "u"
                  and len(m.group(1)) == 5 else escapes.get(m.group(1), m.group(1)), s)


def parse_override(arg: str) -> tuple[str, str]:
    """`key=value` of `--override` (the value may contain '=')."""
    key, sep, value = arg.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"--override {arg!r}: expected key=value")
    return key.strip(), value.strip()


# ---------------------------------------------------------------- value parsers
def _int(lo: int | None = None, hi: int | None = None) -> Callable[[str], int]:
    def parse(v: str) -> int:
        try:
            n = int(v)
        except ValueError:
            raise ValueError(f"expected an integer, got {v!r}") from None
        if lo is not None and n < lo:
            raise ValueError(f"must be at least {lo}, got {n}")
        if hi is not None and n > hi:
            raise ValueError(f"must be at most {hi}, got {n}")
        return n

    return parse


def _bool(v: str) -> bool:
    if v.lower() in ("true", "false"):
        return v.lower() == "true"
    raise ValueError(f"expected true or false, got {v!r}")


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


def _strategy(v: str) -> str:
    if v not in RECOVERY_STRATEGIES:
        raise ValueError(f"expected one of {', '.join(RECOVERY_STRATEGIES)}, got {v!r}")
    return v


def _safeguards(v: str) -> frozenset[str]:
    try:
        return sg.parse_config(v)
    except sg.UnknownSafeguard as e:
        raise ValueError(str(e)) from None


def _level(v: str) -> str:
    if v.upper() not in ("DEBUG", "INFO", "WARNING", "ERROR"):
        raise ValueError(f"expected DEBUG, INFO, WARNING or ERROR, got {v!r}")
    return v.upper()


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


_LONG = _int(-(2**63), 2**63 - 1)
_POS = _int(1, 2**31 - 1)
_MS = _int(0, 2**31 - 1)

# property -> (settings field or None, parser)
_SHELL: dict[str, tuple[str | None, Callable[[str], Any]]] = {
    "node.id": ("node_id", _int(0, 2**31 - 1)),
    "broker.id": ("node_id", _int(0, 2**31 - 1)),
    "process.roles": ("process_roles", _roles),
    "listeners": ("listeners", _listeners),
    "advertised.listeners": ("advertised_listeners", _listeners),
    "controller.listener.names": ("controller_listener_names", _names),
    "inter.broker.listener.name": ("inter_broker_listener_name", lambda v: _names(v)[0]),
    "listener.security.protocol.map": (None, _protocol_map),
    "controller.quorum.voters": ("controller_quorum_voters", _voters),
    "controller.quorum.election.timeout.ms": ("controller_quorum_election_timeout_ms", _POS),
    "controller.quorum.fetch.timeout.ms": ("controller_quorum_fetch_timeout_ms", _POS),
    "controller.quorum.request.timeout.ms": ("controller_quorum_request_timeout_ms", _POS),
    "controller.quorum.retry.backoff.ms": ("controller_quorum_retry_backoff_ms", _POS),
    "log.dirs": ("log_dirs", _dirs),
    "log.dir": ("log_dirs", _dirs),
    "metadata.log.dir": ("metadata_log_dir", lambda v: _dirs(v)[0]),
    "cluster.id": ("cluster_id", lambda v: v or "wrack-cluster"),
    "min.insync.replicas": ("min_insync_replicas", _POS),
    "default.replication.factor": ("default_replication_factor", _int(1, 32767)),
    "num.partitions": ("num_partitions", _POS),
    "auto.create.topics.enable": ("auto_create_topics_enable", _bool),
    "message.max.bytes": ("message_max_bytes", _int(0, 2**31 - 1)),
    "socket.request.max.bytes": ("socket_request_max_bytes", _POS),
    "broker.heartbeat.interval.ms": ("broker_heartbeat_interval_ms", _POS),
    "broker.session.timeout.ms": ("broker_session_timeout_ms", _POS),
    "replica.lag.time.max.ms": ("replica_lag_time_max_ms", _POS),
    "replica.fetch.wait.max.ms": ("replica_fetch_wait_max_ms", _MS),
    "replica.fetch.backoff.ms": ("replica_fetch_backoff_ms", _MS),
    "replica.fetch.max.bytes": ("replica_fetch_max_bytes", _POS),
    "retry.backoff.ms": ("retry_backoff_ms", _POS),
    "retry.backoff.max.ms": ("retry_backoff_max_ms", _POS),
    "replica.socket.timeout.ms": ("replica_socket_timeout_ms", _POS),
    "replica.high.watermark.checkpoint.interval.ms": ("replica_high_watermark_checkpoint_interval_ms", _POS),
    "socket.connection.setup.timeout.ms": ("socket_connection_setup_timeout_ms", _POS),
    "wrack.link.timeout.ms": ("link_timeout_ms", _int(100, 2**31 - 1)),
    "wrack.test.never.serve.after.restart": ("test_never_serve_after_restart", _bool),
    "unclean.leader.election.enable": ("unclean_leader_election_enable", _bool),
    "unclean.recovery.strategy": ("unclean_recovery_strategy", _strategy),
    "wrack.safeguards.off": ("safeguards_off", _safeguards),
    "controlled.shutdown.enable": (None, _bool),
    "wrack.controlled.shutdown.timeout.ms": ("controlled_shutdown_timeout_ms", _POS),
    "group.initial.rebalance.delay.ms": ("group_initial_rebalance_delay_ms", _MS),
    "group.min.session.timeout.ms": ("group_min_session_timeout_ms", _POS),
    "group.max.session.timeout.ms": ("group_max_session_timeout_ms", _POS),
    "wrack.log.file": ("log_file", lambda v: v or None),
    "wrack.log.level": ("log_level", _level),
}

# Storage properties (broker/storage's StorageConfig reads them from `settings.storage`).
STORAGE_PROPERTIES: dict[str, Callable[[str], Any]] = {
    "log.segment.bytes": _int(14, 2**31 - 1),
    "log.index.interval.bytes": _int(0, 2**31 - 1),
    "log.flush.interval.messages": _int(1, 2**63 - 1),
    "log.flush.interval.ms": _int(0, 2**63 - 1),
    "log.flush.scheduler.interval.ms": _int(0, 2**63 - 1),
    "log.flush.offset.checkpoint.interval.ms": _int(0, 2**31 - 1),
    "log.retention.ms": _LONG,
    "log.retention.minutes": _LONG,
    "log.retention.hours": _LONG,
    "log.retention.bytes": _LONG,
    "log.retention.check.interval.ms": _int(1, 2**63 - 1),
}

# Kafka properties accepted without effect (tuning knobs of Kafka's own implementation).
IGNORED = frozenset({
    "num.network.threads", "num.io.threads", "num.replica.fetchers", "num.recovery.threads.per.data.dir",
    "socket.send.buffer.bytes", "socket.receive.buffer.bytes", "offsets.topic.replication.factor",
    "transaction.state.log.replication.factor", "transaction.state.log.min.isr", "log.cleaner.enable",
    "zookeeper.connect", "group.coordinator.rebalance.protocols", "eligible.leader.replicas.enable",
    "log.segment.delete.delay.ms", "log.message.timestamp.type",
})


def load_settings(config_file: str | None = None, overrides: Iterable[str] = ()) -> BrokerSettings:
    """Read `config_file` (if any), apply `overrides` ("key=value"), validate."""
    entries: list[tuple[str, str, str]] = []
    if config_file is not None:
        try:
            text = Path(config_file).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise ConfigError(f"cannot read the config file: {e.strerror if isinstance(e, OSError) else e}", config_file) from None
        entries += parse_properties(text, config_file)
    for arg in overrides:
        k, v = parse_override(arg)
        entries.append((k, v, "--override"))
    return settings_from(entries)


def settings_from(entries: list[tuple[str, str, str]]) -> BrokerSettings:
    """Validate (key, value, source) entries (later entries win) into settings."""
    raw: dict[str, str] = {}
    where: dict[str, str] = {}
    for k, v, src in entries:
        raw[k] = v
        where[k] = src
    values: dict[str, Any] = {}
    storage: dict[str, str] = {}
    unknown = []

    def fail(key: str, msg: str) -> ConfigError:
        return ConfigError(f"{where.get(key, 'config')}: {key}: {msg}")

    for k, v in raw.items():
        if k in _SHELL:
            name, parse = _SHELL[k]
            try:
                parsed = parse(v)
            except ValueError as e:
                raise fail(k, str(e)) from None
            if name is not None and not (name == "node_id" and k == "broker.id" and "node.id" in raw):
                values[name] = parsed
        elif k in STORAGE_PROPERTIES:
            try:
                STORAGE_PROPERTIES[k](v)
            except ValueError as e:
                raise fail(k, str(e)) from None
            storage[k] = v
        elif k not in IGNORED:
            unknown.append(k)
    if "node_id" not in values:
        raise ConfigError("node.id is required (--override node.id=N)")
    nid = values["node_id"]
    listeners = values.get("listeners", (Listener("PLAINTEXT", "", 9092),))
    ctl_names = values.get("controller_listener_names", ("CONTROLLER",))
    voters = values.get("controller_quorum_voters")
    roles = values.get("process_roles")
    voter_ids = [v.node_id for v in voters] if voters is not None else None
    if roles is None:
        roles = frozenset({"broker", "controller"}) if voter_ids is None or nid in voter_ids else frozenset({"broker"})
    if voters is None:
        if "controller" not in roles:
            raise fail("process.roles", "a broker-only node needs controller.quorum.voters")
        li = next((x for x in listeners if x.name in ctl_names), None)
        voters = (Voter(nid, li.host or "127.0.0.1", li.port) if li else Voter(nid, "", -1),)
        voter_ids = [nid]
    if "controller" in roles and nid not in voter_ids:
        raise fail("controller.quorum.voters", f"this node ({nid}) is a controller but not a voter "
                                               f"({', '.join(map(str, voter_ids))})")
    if "controller" not in roles and nid in voter_ids:
        raise fail("process.roles", f"node {nid} is a controller.quorum.voters entry but process.roles has no controller")
    client = [li for li in listeners if li.name not in ctl_names]
    if "broker" in roles and not client:
        raise fail("listeners", "a broker needs a listener that is not a controller listener")
    if "controller" in roles and "broker" not in roles and not any(li.name in ctl_names for li in listeners):
        raise fail("listeners", f"a controller-only node needs a controller listener ({', '.join(ctl_names)})")
    if "controller" in roles and len(roles) == 1 and client:
        raise fail("listeners", f"a controller-only node serves no clients: {', '.join(li.name for li in client)}")
    ibl = values.get("inter_broker_listener_name", "PLAINTEXT" if any(li.name == "PLAINTEXT" for li in client) else
                     (client[0].name if client else "PLAINTEXT"))
    if "broker" in roles and not any(li.name == ibl for li in client):
        raise fail("inter.broker.listener.name", f"no listener named {ibl}")
    advertised = values.get("advertised_listeners")
    if advertised is None:
        advertised = tuple(
            Listener(li.name, socket.gethostname() if li.host in ("", "0.0.0.0", "::") else li.host, li.port) for li in client
        )
    for li in advertised:
        if li.name in ctl_names:
            raise fail("advertised.listeners", f"{li.name} is a controller listener")
        if not li.host or li.host in ("0.0.0.0", "::"):
            raise fail("advertised.listeners", f"{li.name}: advertise a reachable host, not {li.host!r}")
    log_dirs = values.get("log_dirs", ("/tmp/kafka-logs",))
    return BrokerSettings(
        **{k: v for k, v in values.items() if k not in ("listeners", "advertised_listeners", "process_roles",
                                                          "controller_listener_names", "controller_quorum_voters",
                                                          "log_dirs", "metadata_log_dir", "inter_broker_listener_name")},
        process_roles=roles,
        listeners=listeners,
        advertised_listeners=advertised,
        controller_listener_names=ctl_names,
        inter_broker_listener_name=ibl,
        controller_quorum_voters=voters,
        log_dirs=log_dirs,
        metadata_log_dir=values.get("metadata_log_dir", log_dirs[0]),
        storage=storage,
        raw=raw,
        unknown=tuple(unknown),
    )
