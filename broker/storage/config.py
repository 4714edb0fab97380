"""`StorageConfig`: the storage engine's settings, from Kafka's property names.

The names, types, bounds and defaults are the storage properties of the broker's one
table (`broker/core/properties.py`, scope storage); each field is the `field` of one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from broker.core import properties as props
from broker.core.properties import LONG_MAX, Scope

# log.retention.ms, .minutes and .hours all set `retention_ms`; the most precise one given wins
RETENTION_TIME = (("log.retention.ms", 1), ("log.retention.minutes", 60_000), ("log.retention.hours", 3_600_000))


def _never(p: props.Property, v: int | None) -> int | None:
    """None for "never" (a negative value or Long.MAX_VALUE of a property that allows it)."""
    return None if v is None or (p.never and (v < 0 or v == LONG_MAX)) else v


def _default(name: str) -> Any:
    p = props.BY_NAME[name]
    return _never(p, p.default_value())


@dataclass(frozen=True)
class StorageConfig:
    """Kafka's log.* broker properties. None means "never" (Kafka's Long.MAX_VALUE / -1).

    Differences from Kafka's defaults: retention is off (Kafka keeps 7 days); a segment
    may exceed `segment_bytes` by one append when a single append is larger."""

    segment_bytes: int = _default("log.segment.bytes")
    index_interval_bytes: int = _default("log.index.interval.bytes")
    index_max_bytes: int = _default("log.index.size.max.bytes")  # roll when an index is full
    flush_interval_messages: int | None = _default("log.flush.interval.messages")  # None: on segment roll only
    flush_interval_ms: int | None = _default("log.flush.interval.ms")
    flush_scheduler_interval_ms: int | None = _default("log.flush.scheduler.interval.ms")
    flush_offset_checkpoint_interval_ms: int = _default("log.flush.offset.checkpoint.interval.ms")
    flush_start_offset_checkpoint_interval_ms: int = _default("log.flush.start.offset.checkpoint.interval.ms")
    retention_ms: int | None = _default("log.retention.ms")  # None: keep forever
    retention_bytes: int | None = _default("log.retention.bytes")
    retention_check_interval_ms: int = _default("log.retention.check.interval.ms")
    cleanup_policy: str = _default("log.cleanup.policy")  # "delete", "compact" or "compact,delete"
    delete_retention_ms: int = _default("log.cleaner.delete.retention.ms")

    def __post_init__(self) -> None:
        for f in fields(self):
            p = props.storage_field(f.name)
            v = getattr(self, f.name)
            if v is None and p.never:
                continue
            if isinstance(v, str):
                p.parse(v)  # raises ValueError saying why
                continue
            if not isinstance(v, int) or isinstance(v, bool):
                raise ValueError(f"{p.name}: {v!r} is not an integer")
            if p.never and v < 0:
                raise ValueError(f"{p.name}: {v} is negative (None means never)")
            try:
                p.type.check(v)
            except ValueError as e:
                raise ValueError(f"{p.name}: {e}") from None

    @classmethod
    def from_properties(cls, properties: Mapping[str, str]) -> StorageConfig:
        """Pick the storage properties out of a broker's properties (others are ignored).
        Raises ValueError naming the property for a bad value."""
        given: dict[str, int | None] = {}
        for p in props.in_scope(Scope.STORAGE):
            if p.name in properties:
                try:
                    given[p.name] = _never(p, p.parse(properties[p.name]))
                except ValueError as e:
                    raise ValueError(f"{p.name}: {e}") from None
        kw = {p.field: given[p.name] for p in props.in_scope(Scope.STORAGE)
              if p.name in given and p.field is not None and p.field != "retention_ms"}
        for name, scale in reversed(RETENTION_TIME):  # the most precise one given, last, wins
            if name in given:
                v = given[name]
                kw["retention_ms"] = None if v is None else v * scale
        return cls(**kw)  # type: ignore[arg-type]

    def for_topic(self, configs: Mapping[str, str]) -> StorageConfig:
        """This config with a topic's values of the storage properties settable per topic
        (Kafka's LogConfig: the topic's value, else the broker's). A value that does not
        parse (the controller validates them) leaves the broker's."""
        kw: dict[str, object] = {}
        for p in props.in_scope(Scope.STORAGE):
            if p.settable_on_topics and p.field is not None and p.topic_name in configs:
                try:
                    kw[p.field] = _never(p, p.parse(configs[p.topic_name]))
                except ValueError:
                    continue
        return replace(self, **kw) if kw else self  # type: ignore[arg-type]

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy.split(",")

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy.split(",")

    @property
    def effective_flush_ms(self) -> int | None:
        """log.flush.interval.ms, which defaults to log.flush.scheduler.interval.ms (as in Kafka)."""
        return self.flush_interval_ms if self.flush_interval_ms is not None else self.flush_scheduler_interval_ms

    def describe_flush_policy(self) -> str:
        parts = []
        if self.flush_interval_messages == 1:
            parts.append("every write (log.flush.interval.messages=1)")
        elif self.flush_interval_messages is not None:
            parts.append(f"every {self.flush_interval_messages} messages (log.flush.interval.messages)")
        if self.flush_interval_ms is not None:
            parts.append(f"every {self.flush_interval_ms} ms (log.flush.interval.ms)")
        elif self.flush_scheduler_interval_ms is not None:
            parts.append(f"every {self.flush_scheduler_interval_ms} ms (log.flush.scheduler.interval.ms)")
        if not parts:
            return "on segment roll only, asynchronously (default; log.flush.interval.messages and log.flush.interval.ms unset)"
        return " and ".join(parts) + ", and on segment roll"
