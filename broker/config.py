"""The broker's configuration: Kafka property names from a properties file and overrides.

`load_settings(config_file, overrides)` reads a Java-style properties file (optional),
applies `key=value` overrides (as kafka-server-start's `--override`), validates every
known property and returns `BrokerSettings`. Bad input raises `ConfigError` (an
`InputError`: one line naming the property and where it came from; exit 254).
Unknown properties are kept in `unknown` (the broker logs them once, like Kafka).

Names, types, defaults and scopes come from the one table, `broker/core/properties.py`.
Defaults are Kafka's, except that a node without `process.roles` is a controller when
`controller.quorum.voters` is absent or names it (and a broker in both cases), so that
``wrack-broker --override node.id=0 --override listeners=PLAINTEXT://127.0.0.1:9092
--override log.dirs=/tmp/x`` starts a working single node.

`broker_config_entries` and `topic_config_entries` are what DescribeConfigs answers.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from broker.core import properties as props
from broker.core.properties import ConfigSource, ConfigType, Listener, Property, Scope, Voter
from contracts.errors import InputError

__all__ = ["BrokerSettings", "ConfigEntry", "ConfigError", "Listener", "Voter", "broker_config_entries",
           "load_settings", "parse_override", "parse_properties", "settings_from", "topic_config_entries"]


class ConfigError(InputError):
    """A bad property: the message names it and its source (FILE:LINE or --override)."""


@dataclass(frozen=True)
class BrokerSettings:
    """Everything the process needs, validated. Each field is set by the property whose
    `field` names it in `broker.core.properties.PROPERTIES` (from the value given or the
    table's default; field names follow the property names, dots become underscores)."""

    node_id: int
    process_roles: frozenset[str]
    listeners: tuple[Listener, ...]
    advertised_listeners: tuple[Listener, ...]
    controller_listener_names: tuple[str, ...]
    inter_broker_listener_name: str
    controller_quorum_voters: tuple[Voter, ...]
    log_dirs: tuple[str, ...]
    metadata_log_dir: str
    cluster_id: str
    # topics and clients
    min_insync_replicas: int
    default_replication_factor: int
    num_partitions: int
    auto_create_topics_enable: bool
    message_max_bytes: int
    socket_request_max_bytes: int
    # replication and the controller
    broker_heartbeat_interval_ms: int
    broker_session_timeout_ms: int
    replica_lag_time_max_ms: int
    replica_fetch_wait_max_ms: int
    replica_fetch_backoff_ms: int
    retry_backoff_ms: int
    retry_backoff_max_ms: int
    replica_fetch_max_bytes: int
    replica_socket_timeout_ms: int
    replica_high_watermark_checkpoint_interval_ms: int
    socket_connection_setup_timeout_ms: int
    link_timeout_ms: int
    # the controller quorum (KRaft's controller.quorum.*)
    controller_quorum_election_timeout_ms: int
    controller_quorum_fetch_timeout_ms: int
    controller_quorum_request_timeout_ms: int
    controller_quorum_retry_backoff_ms: int
    # liveness tests only: a broker started again on a data dir it started from before never
    # registers (never serves again), a cluster that cannot recover (checkers.liveness)
    test_never_serve_after_restart: bool
    unclean_leader_election_enable: bool
    unclean_recovery_strategy: str
    safeguards_off: frozenset[str]
    controlled_shutdown_timeout_ms: int
    # consumer groups
    group_initial_rebalance_delay_ms: int
    group_min_session_timeout_ms: int
    group_max_session_timeout_ms: int
    # transactions
    transaction_state_log_num_partitions: int
    transaction_state_log_replication_factor: int
    transaction_state_log_min_isr: int
    transaction_max_timeout_ms: int
    transaction_abort_interval_ms: int
    # logging (log_file None: <first log dir>/wrack-broker.log; "": stderr only)
    log_file: str | None
    log_level: str
    # storage properties (scope storage) as given, validated here, interpreted by broker/storage
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

    def fail(key: str, msg: str) -> ConfigError:
        return ConfigError(f"{where.get(key, 'config')}: {key}: {msg}")

    values, storage, unknown = _parse_known(raw, fail)
    for p in props.in_scope(Scope.BROKER):
        if p.field is not None and p.field not in values:
            values[p.field] = p.default_value()  # None: computed below
    if values["node_id"] is None:
        raise ConfigError("node.id is required (--override node.id=N)")
    roles, voters = _roles_and_voters(values, fail)
    ibl, advertised = _client_listeners(values, roles, fail)
    values.update(
        process_roles=roles,
        advertised_listeners=advertised,
        inter_broker_listener_name=ibl,
        controller_quorum_voters=voters,
        metadata_log_dir=values["metadata_log_dir"] or values["log_dirs"][0],
    )
    return BrokerSettings(**values, storage=storage, raw=raw, unknown=tuple(unknown))


def _parse_known(raw: dict[str, str], fail: Callable[[str, str], ConfigError]) -> tuple[dict[str, Any], dict[str, str], list[str]]:
    """Each known key of `raw` parsed: (the broker's settings by field, the storage
    properties as given, the unknown keys). An alias loses to its property's own name."""
    values: dict[str, Any] = {}
    storage: dict[str, str] = {}
    unknown = []
    for k, v in raw.items():
        p = props.lookup(k)
        if p is None:
            unknown.append(k)
            continue
        if p.ignored:
            continue
        try:
            parsed = p.parse(v)
        except ValueError as e:
            raise fail(k, str(e)) from None
        if Scope.STORAGE in p.scopes:
            storage[k] = v
        elif p.field is not None and (k == p.name or p.name not in raw):  # the name wins over an alias
            values[p.field] = parsed
    return values, storage, unknown


def _roles_and_voters(values: dict[str, Any], fail: Callable[[str, str], ConfigError]) -> tuple[frozenset[str], tuple[Voter, ...]]:
    """process.roles (default: broker, and controller when a voter or no voters are
    given) and controller.quorum.voters (default: this node alone, on its controller
    listener), checked against each other."""
    nid = values["node_id"]
    listeners = values["listeners"]
    ctl_names = values["controller_listener_names"]
    voters = values["controller_quorum_voters"]
    roles = values["process_roles"]
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
    return roles, voters


def _client_listeners(values: dict[str, Any], roles: frozenset[str],
                      fail: Callable[[str, str], ConfigError]) -> tuple[str, tuple[Listener, ...]]:
    """The listeners checked against the roles, and the inter-broker listener name and
    the advertised listeners (defaults: PLAINTEXT or the first client listener; the
    client listeners on this host's name where they bind every address)."""
    listeners = values["listeners"]
    ctl_names = values["controller_listener_names"]
    client = [li for li in listeners if li.name not in ctl_names]
    if "broker" in roles and not client:
        raise fail("listeners", "a broker needs a listener that is not a controller listener")
    if "controller" in roles and "broker" not in roles and not any(li.name in ctl_names for li in listeners):
        raise fail("listeners", f"a controller-only node needs a controller listener ({', '.join(ctl_names)})")
    if "controller" in roles and len(roles) == 1 and client:
        raise fail("listeners", f"a controller-only node serves no clients: {', '.join(li.name for li in client)}")
    ibl = values["inter_broker_listener_name"]
    if ibl is None:
        ibl = "PLAINTEXT" if any(li.name == "PLAINTEXT" for li in client) else (client[0].name if client else "PLAINTEXT")
    if "broker" in roles and not any(li.name == ibl for li in client):
        raise fail("inter.broker.listener.name", f"no listener named {ibl}")
    advertised = values["advertised_listeners"]
    if advertised is None:
        advertised = tuple(
            Listener(li.name, socket.gethostname() if li.host in ("", "0.0.0.0", "::") else li.host, li.port) for li in client
        )
    for li in advertised:
        if li.name in ctl_names:
            raise fail("advertised.listeners", f"{li.name} is a controller listener")
        if not li.host or li.host in ("0.0.0.0", "::"):
            raise fail("advertised.listeners", f"{li.name}: advertise a reachable host, not {li.host!r}")
    return ibl, advertised


# ---------------------------------------------------------------- DescribeConfigs
@dataclass(frozen=True, slots=True)
class ConfigEntry:
    """One DescribeConfigs answer: a property's value (None: no value) and where it came from."""

    name: str
    value: str | None
    source: ConfigSource
    type: ConfigType
    doc: str


def _given(p: Property, raw: Mapping[str, str]) -> bool:
    return any(n in raw for n in (p.name, *p.aliases))


def _broker_value(p: Property, s: BrokerSettings) -> str | None:
    """What the broker runs with: the settings' value, else the text given, else the default."""
    if p.ignored:
        return p.default  # what is given has no effect
    if p.field is not None and Scope.BROKER in p.scopes:
        value = getattr(s, p.field)
        return None if value is None else p.type.show(value)
    if p.name in s.raw:
        return p.type.show(p.parse(s.raw[p.name]))
    return p.default


def _broker_entry(p: Property, s: BrokerSettings, name: str) -> ConfigEntry:
    given = _given(p, s.raw) and not p.ignored
    return ConfigEntry(name, _broker_value(p, s), ConfigSource.STATIC_BROKER_CONFIG if given else ConfigSource.DEFAULT_CONFIG,
                       p.type.config_type, p.doc)


def _entry(key: str, value: str | None, source: ConfigSource) -> ConfigEntry:
    """A DescribeConfigs line of a config given by name (the table's type and doc if known)."""
    p = props.lookup(key)
    return ConfigEntry(key, value, source, p.type.config_type if p else ConfigType.STRING, p.doc if p else "")


def dynamic_config_entries(configs: Mapping[str, str], source: ConfigSource) -> dict[str, ConfigEntry]:
    """DescribeConfigs lines of dynamic broker configs (DYNAMIC_BROKER_CONFIG for a broker's
    own, DYNAMIC_DEFAULT_BROKER_CONFIG for the cluster-wide defaults)."""
    return {key: _entry(key, value, source) for key, value in configs.items()}


def broker_config_entries(s: BrokerSettings, cluster_dynamic: Mapping[str, str] | None = None,
                          broker_dynamic: Mapping[str, str] | None = None) -> dict[str, ConfigEntry]:
    """A broker's DescribeConfigs: every broker and storage property of the table (from
    the properties given: STATIC_BROKER_CONFIG, else DEFAULT_CONFIG), every other property
    given (an alias, an ignored or an unknown one) with its text, and over them the dynamic
    configs: the cluster-wide defaults, then this broker's own."""
    out = {p.name: _broker_entry(p, s, p.name) for p in props.PROPERTIES if not p.ignored}
    for key, value in s.raw.items():
        if key not in out:
            out[key] = _entry(key, value, ConfigSource.STATIC_BROKER_CONFIG)
    out.update(dynamic_config_entries(cluster_dynamic or {}, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG))
    out.update(dynamic_config_entries(broker_dynamic or {}, ConfigSource.DYNAMIC_BROKER_CONFIG))
    return out


def topic_config_entries(s: BrokerSettings, topic_configs: Mapping[str, str], cluster_dynamic: Mapping[str, str] | None = None,
                         broker_dynamic: Mapping[str, str] | None = None) -> dict[str, ConfigEntry]:
    """A topic's DescribeConfigs: every property with a topic name, set on the topic
    (TOPIC_CONFIG), or else the broker's: its dynamic config (DYNAMIC_BROKER_CONFIG), the
    cluster-wide dynamic default (DYNAMIC_DEFAULT_BROKER_CONFIG), or its static one
    (STATIC_BROKER_CONFIG or DEFAULT_CONFIG)."""
    out = {}
    dynamic = [(broker_dynamic or {}, ConfigSource.DYNAMIC_BROKER_CONFIG),
               (cluster_dynamic or {}, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)]
    for name, p in props.BY_TOPIC_NAME.items():
        if name in topic_configs:
            out[name] = ConfigEntry(name, topic_configs[name], ConfigSource.TOPIC_CONFIG, p.type.config_type, p.doc)
        elif (hit := next(((c[p.name], src) for c, src in dynamic if p.name in c), None)) is not None:
            out[name] = ConfigEntry(name, hit[0], hit[1], p.type.config_type, p.doc)
        else:
            e = _broker_entry(p, s, name)
            # a topic has no unset value: "never" is Long.MAX_VALUE there (Kafka's flush.ms);
            # clients set the values they read back (librdkafka 0092 refused a null)
            out[name] = replace(e, value=str(props.LONG_MAX)) if e.value is None and p.never else e
    for name, value in topic_configs.items():  # none unless an older broker stored it
        out.setdefault(name, ConfigEntry(name, value, ConfigSource.TOPIC_CONFIG, ConfigType.STRING, ""))
    return out
