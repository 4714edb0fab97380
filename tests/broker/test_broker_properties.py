"""The one table of broker properties (broker/core/properties.py) and what derives from it:
settings parsing, StorageConfig, topic-config checks, DescribeConfigs entries, and the
property tables in docs/ (parsed here and compared with the table, so docs cannot drift)."""

from __future__ import annotations

import dataclasses
import logging
import re
import subprocess
from pathlib import Path

import pytest
from broker_procs import BROKER
from hypothesis import given
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode as E

from broker.config import (
    BrokerSettings,
    ConfigError,
    broker_config_entries,
    settings_from,
    topic_config_entries,
)
from broker.core import properties as props
from broker.core.messages import TopicPartition
from broker.core.properties import LONG_MAX, ConfigSource, Scope
from broker.records import encode_batch
from broker.server.logstore import open_store
from broker.storage import StorageConfig
from broker.wire import kafka as k
from broker.wire.client import RawClient

ROOT = Path(__file__).resolve().parents[2]
BASE = {"node.id": "0", "listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093", "log.dirs": "/x"}


def settings(extra: dict[str, str] | None = None, source: str = "--override") -> BrokerSettings:
    return settings_from([(k, v, source) for k, v in {**BASE, **(extra or {})}.items()])


# ---------------------------------------------------------------- docs
def markdown_tables(path: Path) -> list[tuple[list[str], list[list[str]]]]:
    """Every markdown table of `path`: (header cells, row cells)."""
    tables: list[tuple[list[str], list[list[str]]]] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        if lines[i].startswith("|") and i + 1 < len(lines) and re.fullmatch(r"\|( ?-+ ?\|)+", lines[i + 1].strip()):
            head = _cells(lines[i])
            rows = []
            i += 2
            while i < len(lines) and lines[i].startswith("|"):
                rows.append(_cells(lines[i]))
                i += 1
            tables.append((head, rows))
        else:
            i += 1
    return tables


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


@pytest.mark.parametrize(("doc", "which"), [("broker.md", "broker"), ("broker.md", "ignored"),
                                            ("broker-storage.md", "storage")])
def test_the_docs_tables_are_the_property_table(doc, which):
    """Every documented property is in the table with the same type, default, scope,
    topic name and doc, and every property of the table is documented."""
    head = props.MARKDOWN_HEADERS[which]
    found = [rows for h, rows in markdown_tables(ROOT / "docs" / doc) if h == head]
    assert len(found) == 1, f"docs/{doc}: expected one table headed {head}"
    documented = {r[0]: r for r in found[0]}
    table = {r[0]: r for r in props.markdown_rows(which)}
    assert sorted(set(documented) - set(table)) == [], f"docs/{doc} documents properties the table lacks"
    assert sorted(set(table) - set(documented)) == [], f"docs/{doc} lacks properties of the table"
    for name, row in table.items():
        assert documented[name] == row, f"docs/{doc}: {name} differs (regenerate: python -m broker.core.properties {which})"


def test_the_docs_table_cells_cannot_be_misread():
    for p in props.PROPERTIES:
        assert "|" not in p.doc + (p.default_doc or "") + (p.default or ""), p.name


# ---------------------------------------------------------------- the table itself
def test_names_are_unique_and_defaults_parse():
    names = [n for p in props.PROPERTIES for n in (p.name, *p.aliases)]
    assert len(names) == len(set(names))
    topic_names = [p.topic_name for p in props.PROPERTIES if p.topic_name]
    assert len(topic_names) == len(set(topic_names))
    for p in props.PROPERTIES:
        assert p.scopes and p.doc, p.name
        if p.default is not None:
            p.default_value()  # raises if the table's default is not a value of its type
        if p.settable_on_topics:
            assert p.topic_name is not None and (Scope.BROKER in p.scopes or Scope.STORAGE in p.scopes), p.name
        if p.ignored:
            assert p.field is None, p.name


def test_every_settings_and_storage_field_has_one_property():
    settings_fields = {f.name for f in dataclasses.fields(BrokerSettings)} - {"storage", "raw", "unknown"}
    broker = [p.field for p in props.in_scope(Scope.BROKER) if p.field]
    assert sorted(broker) == sorted(settings_fields) and len(broker) == len(set(broker))
    storage = [p.field for p in props.in_scope(Scope.STORAGE) if p.field]
    assert sorted(storage) == sorted(f.name for f in dataclasses.fields(StorageConfig)) and len(storage) == len(set(storage))


def test_settings_defaults_are_the_tables():
    s = settings()
    for p in props.in_scope(Scope.BROKER):
        if p.field and p.default is not None and p.name not in BASE:
            assert getattr(s, p.field) == p.default_value(), p.name
    assert StorageConfig.from_properties({}) == StorageConfig()
    assert StorageConfig().flush_interval_messages is None and StorageConfig().retention_ms is None  # "never" defaults
    assert StorageConfig().segment_bytes == 1 << 30 and StorageConfig().index_max_bytes == 10 << 20


# ---------------------------------------------------------------- parsing
def test_the_two_storage_properties_are_accepted_and_honoured(tmp_path):
    """Issue 15: both were documented but dropped as "unknown property"."""
    s = settings({"log.dirs": str(tmp_path), "log.index.size.max.bytes": "24", "log.index.interval.bytes": "0",
                  "log.flush.start.offset.checkpoint.interval.ms": "1500"})
    assert s.unknown == ()
    assert s.storage == {"log.index.size.max.bytes": "24", "log.index.interval.bytes": "0",
                         "log.flush.start.offset.checkpoint.interval.ms": "1500"}
    now = [1_000]
    store = open_store(list(s.log_dirs), dict(s.storage), logging.getLogger("wrack.test.props"), lambda: now[0])
    try:
        store.startup()
        assert store.next_flush_deadline() == 1_000 + 1_500  # the log-start checkpoint, not the 60 s default
        log = store.get_or_create(TopicPartition("t", 0))
        for _ in range(12):
            log.append_as_leader(encode_batch([b"v"]), 0)
        assert len(log.segment_files()) >= 3  # 24-byte indexes hold 3 entries: full ones roll the segment
        now[0] = 2_500
        store.flush_due(now[0])
        assert (tmp_path / "log-start-offset-checkpoint").exists()
        assert store.next_flush_deadline() == 2_500 + 1_500
    finally:
        store.close()


def test_an_alias_loses_to_the_name():
    assert settings({"broker.id": "7"}).node_id == 0
    assert settings({"log.dir": "/a", "log.dirs": "/b"}).log_dirs == ("/b",)
    assert settings({"log.dirs": "/b", "log.dir": "/a"}).log_dirs == ("/b",)
    assert settings_from([("broker.id", "4", "f:1")]).node_id == 4


def test_ignored_properties_are_accepted_unknown_ones_reported():
    s = settings({"num.io.threads": "lots", "log.message.timestamp.type": "LogAppendTime", "no.such.thing": "1"})
    assert s.unknown == ("no.such.thing",)


INT_PROPS = [p for p in props.PROPERTIES if not p.ignored and p.type.lo is not None and p.name not in BASE]


@given(st.sampled_from(INT_PROPS), st.integers(-(2**64), 2**64), st.sampled_from(["f.properties:3", "--override"]))
def test_integer_properties_check_their_bounds_naming_property_and_source(p, n, source):
    assert p.type.lo is not None and p.type.hi is not None
    if p.type.lo <= n <= p.type.hi:
        s = settings({p.name: str(n)}, source)
        if Scope.STORAGE in p.scopes:
            assert s.storage[p.name] == str(n)
        elif p.field is not None:
            assert getattr(s, p.field) == n
        return
    with pytest.raises(ConfigError) as e:
        settings({p.name: str(n)}, source)
    msg = str(e.value)
    assert msg.startswith(f"{source}: {p.name}: must be at ") and "\n" not in msg


@given(st.sampled_from([p for p in props.PROPERTIES if not p.ignored and p.name not in BASE]),
       st.sampled_from(["often", "1.5", "0x10", "yes"]))
def test_a_bad_value_is_one_line_naming_property_and_source(p, text):
    try:
        p.parse(text)
    except ValueError:
        with pytest.raises(ConfigError, match=re.escape(f"f.properties:9: {p.name}: ")) as e:
            settings({p.name: text}, "f.properties:9")
        assert "\n" not in str(e.value)


def test_a_bad_storage_property_exits_254_with_one_line(tmp_path):
    r = subprocess.run([BROKER, "--override", "node.id=0", "--override", f"log.dirs={tmp_path}",
                        "--override", "log.index.size.max.bytes=4"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 254, r.stderr
    assert r.stderr.strip().count("\n") == 0 and "--override: log.index.size.max.bytes: must be at least 8" in r.stderr


def test_storage_never_values():
    c = StorageConfig.from_properties({"log.flush.interval.messages": str(LONG_MAX), "log.retention.bytes": "-1",
                                       "log.retention.minutes": "-1", "log.flush.scheduler.interval.ms": "100"})
    assert (c.flush_interval_messages, c.retention_bytes, c.retention_ms, c.effective_flush_ms) == (None, None, None, 100)
    assert StorageConfig.from_properties({"log.retention.minutes": "2", "log.retention.hours": "1"}).retention_ms == 120_000
    with pytest.raises(ValueError, match="log.retention.ms: -5 is negative"):
        StorageConfig(retention_ms=-5)
    with pytest.raises(ValueError, match="log.index.size.max.bytes: must be at least 8"):
        StorageConfig(index_max_bytes=4)


# ---------------------------------------------------------------- topic configs
def test_topic_configs_are_the_topic_scope():
    assert props.topic_value("min.insync.replicas", "2") == "2"
    assert props.topic_value("unclean.leader.election.enable", "TRUE") == "true"  # stored as the controller reads it
    assert props.topic_value("wrack.safeguards.off", "elr, epoch-truncation") == "elr,epoch-truncation"
    assert props.topic_value("cleanup.policy", "delete, compact") == "compact,delete"
    for key, value in (("retention.ms", "1000"), ("retention.bytes", "-1"), ("segment.bytes", "1048576"),
                       ("max.message.bytes", "1000"), ("compression.type", "zstd"), ("delete.retention.ms", "0"),
                       ("message.timestamp.type", "LogAppendTime"), ("index.interval.bytes", "0"),
                       ("segment.index.bytes", "4096")):
        assert props.topic_value(key, value) == value  # issue 16: the configs Kafka users set
    for key, value, msg in (("min.insync.replicas", "0", "min.insync.replicas: must be at least 1"),
                            ("unclean.recovery.strategy", "eager", "unclean.recovery.strategy: expected one of balanced"),
                            ("wrack.safeguards.off", "bogus", "unknown safeguard 'bogus'"),
                            ("index.interval.bytes", "-1", "index.interval.bytes: must be at least 0"),
                            ("segment.index.bytes", "7", "segment.index.bytes: must be at least 8"),
                            ("cleanup.policy", "shred", "cleanup.policy: expected delete, compact or both"),
                            ("compression.type", "brotli", "compression.type: expected one of producer"),
                            ("bogus", "1", "unknown topic config 'bogus'")):
        with pytest.raises(ValueError, match=re.escape(msg)):
            props.topic_value(key, value)


# ---------------------------------------------------------------- DescribeConfigs
def test_broker_entries_answer_every_property_with_value_and_source():
    s = settings({"min.insync.replicas": "2", "log.flush.interval.messages": "1", "num.io.threads": "8", "x.y": "z"})
    e = broker_config_entries(s)
    assert {p.name for p in props.PROPERTIES if not p.ignored} <= set(e)
    static = {n for n, x in e.items() if x.source == ConfigSource.STATIC_BROKER_CONFIG}
    assert static == {*BASE, "min.insync.replicas", "log.flush.interval.messages", "num.io.threads", "x.y"}
    assert e["min.insync.replicas"].value == "2" and e["log.flush.interval.messages"].value == "1"
    assert e["num.partitions"].value == "1" and e["num.partitions"].source == ConfigSource.DEFAULT_CONFIG
    assert e["log.flush.interval.messages"].type == props.ConfigType.LONG
    assert e["process.roles"].value == "broker,controller" and e["process.roles"].source == ConfigSource.DEFAULT_CONFIG
    assert e["log.flush.interval.ms"].value is None  # unset: log.flush.scheduler.interval.ms applies
    assert e["log.index.size.max.bytes"].value == "10485760"


def test_topic_entries_come_from_the_topic_then_the_broker():
    s = settings({"log.segment.bytes": "1048576", "unclean.leader.election.enable": "true"})
    e = topic_config_entries(s, {"min.insync.replicas": "2"})
    assert set(e) == set(props.BY_TOPIC_NAME)
    src = {n: (x.value, x.source) for n, x in e.items()}
    assert src["min.insync.replicas"] == ("2", ConfigSource.TOPIC_CONFIG)
    assert src["segment.bytes"] == ("1048576", ConfigSource.STATIC_BROKER_CONFIG)
    assert src["unclean.leader.election.enable"] == ("true", ConfigSource.STATIC_BROKER_CONFIG)
    assert src["flush.messages"] == (str(LONG_MAX), ConfigSource.DEFAULT_CONFIG)
    assert src["max.message.bytes"] == ("1048588", ConfigSource.DEFAULT_CONFIG)
    assert src["cleanup.policy"] == ("delete", ConfigSource.DEFAULT_CONFIG)
    assert src["message.timestamp.type"] == ("CreateTime", ConfigSource.DEFAULT_CONFIG)


def test_describe_configs_on_the_wire(fleet):
    """A real broker answers DescribeConfigs v4 from the table: sources, types and docs."""
    b = fleet.single(extra={"log.index.size.max.bytes": "4096", "unclean.leader.election.enable": "true"}).start()
    with RawClient(b.host, b.port) as c:
        r = c.call(k.CREATE_TOPICS, 7, {"topics": [{"name": "t", "num_partitions": 1, "replication_factor": 1,
                                                    "assignments": [], "configs": [{"name": "min.insync.replicas",
                                                                                    "value": "1"}]}], "timeout": 10000})
        assert r.topics[0].error_code is E.none
        r = c.call(k.DESCRIBE_CONFIGS, 4, {"resources": [
            {"resource_type": 2, "resource_name": "t", "configuration_keys": None},
            {"resource_type": 4, "resource_name": "0", "configuration_keys": ["log.index.size.max.bytes", "num.partitions"]},
        ], "include_synonyms": False, "include_documentation": True})
    topic, broker = ({x.name: x for x in res.configs} for res in r.results)
    assert all(res.error_code is E.none for res in r.results)
    assert (topic["min.insync.replicas"].value, topic["min.insync.replicas"].config_source) == ("1", ConfigSource.TOPIC_CONFIG)
    assert (topic["segment.index.bytes"].value, topic["segment.index.bytes"].config_source) == (
        "4096", ConfigSource.STATIC_BROKER_CONFIG)
    assert topic["unclean.leader.election.enable"].config_source == ConfigSource.STATIC_BROKER_CONFIG
    assert topic["segment.bytes"].config_source == ConfigSource.DEFAULT_CONFIG
    assert topic["segment.bytes"].config_type == props.ConfigType.INT
    assert set(broker) == {"log.index.size.max.bytes", "num.partitions"}
    assert broker["num.partitions"].documentation == props.BY_NAME["num.partitions"].doc
    assert broker["log.index.size.max.bytes"].config_source == ConfigSource.STATIC_BROKER_CONFIG
    assert "Traceback" not in b.log_text()
