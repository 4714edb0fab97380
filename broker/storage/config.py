"""`StorageConfig`: the storage engine's settings, from Kafka's property names."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields

LONG_MAX = 9223372036854775807
INT_MAX = 2147483647


@dataclass(frozen=True)
class StorageConfig:
    """Kafka's log.* broker properties. None means "never" (Kafka's Long.MAX_VALUE / -1).

    Differences from Kafka's defaults: retention is off (Kafka keeps 7 days); a segment
    may exceed `segment_bytes` by one append when a single append is larger."""

    segment_bytes: int = 1 << 30  # log.segment.bytes
    index_interval_bytes: int = 4096  # log.index.interval.bytes
    index_max_bytes: int = 10 * 1024 * 1024  # log.index.size.max.bytes (roll when an index is full)
    flush_interval_messages: int | None = None  # log.flush.interval.messages (None: on segment roll only)
    flush_interval_ms: int | None = None  # log.flush.interval.ms
    flush_scheduler_interval_ms: int | None = None  # log.flush.scheduler.interval.ms
    flush_offset_checkpoint_interval_ms: int = 60_000  # log.flush.offset.checkpoint.interval.ms
    flush_start_offset_checkpoint_interval_ms: int = 60_000  # log.flush.start.offset.checkpoint.interval.ms
    retention_ms: int | None = None  # log.retention.ms / .minutes / .hours (None: keep forever)
    retention_bytes: int | None = None  # log.retention.bytes
    retention_check_interval_ms: int = 300_000  # log.retention.check.interval.ms

    PROPERTIES = {
        "log.segment.bytes": "segment_bytes",
        "log.index.interval.bytes": "index_interval_bytes",
        "log.index.size.max.bytes": "index_max_bytes",
        "log.flush.interval.messages": "flush_interval_messages",
        "log.flush.interval.ms": "flush_interval_ms",
        "log.flush.scheduler.interval.ms": "flush_scheduler_interval_ms",
        "log.flush.offset.checkpoint.interval.ms": "flush_offset_checkpoint_interval_ms",
        "log.flush.start.offset.checkpoint.interval.ms": "flush_start_offset_checkpoint_interval_ms",
        "log.retention.ms": "retention_ms",
        "log.retention.bytes": "retention_bytes",
        "log.retention.check.interval.ms": "retention_check_interval_ms",
    }
    _OPTIONAL = {"flush_interval_messages", "flush_interval_ms", "flush_scheduler_interval_ms", "retention_ms", "retention_bytes"}
    _MINIMUM = {"segment_bytes": 1, "index_interval_bytes": 0, "index_max_bytes": 8, "flush_interval_messages": 1}

    def __post_init__(self) -> None:
        for f in fields(self):
            v = getattr(self, f.name)
            if v is None and f.name in self._OPTIONAL:
                continue
            if not isinstance(v, int) or v < self._MINIMUM.get(f.name, 0 if f.name in self._OPTIONAL else 1):
                raise ValueError(f"{self._prop(f.name)}: {v!r} is out of range")
        if self.segment_bytes > INT_MAX or self.index_max_bytes > INT_MAX:
            raise ValueError("log.segment.bytes and log.index.size.max.bytes must fit in an int (2147483647)")

    @classmethod
    def _prop(cls, name: str) -> str:
        return next((k for k, v in cls.PROPERTIES.items() if v == name), name)

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> StorageConfig:
        """Pick the log.* properties this engine knows out of a broker's properties (others
        are ignored). Raises ValueError naming the property for a bad value."""
        kw: dict[str, int | None] = {}
        for key in ("log.retention.hours", "log.retention.minutes", "log.retention.ms"):  # most precise wins
            if key in props:
                scale = {"log.retention.hours": 3_600_000, "log.retention.minutes": 60_000}.get(key, 1)
                v = _parse(key, props[key])
                kw["retention_ms"] = None if v is None or v < 0 else v * scale
        for key, name in cls.PROPERTIES.items():
            if key in props and name != "retention_ms":
                v = _parse(key, props[key])
                if name in cls._OPTIONAL and (v is None or v < 0 or v == LONG_MAX):
                    v = None
                if v is None and name not in cls._OPTIONAL:
                    raise ValueError(f"{key}: a value is required")
                kw[name] = v
        if kw.get("flush_interval_messages") == LONG_MAX:
            kw["flush_interval_messages"] = None
        return cls(**kw)  # type: ignore[arg-type]

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


def _parse(key: str, raw: str) -> int | None:
    s = str(raw).strip()
    if s == "" or s.lower() == "null":
        return None
    try:
        return int(s)
    except ValueError:
        raise ValueError(f"{key}: {raw!r} is not an integer") from None
