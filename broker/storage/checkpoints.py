"""Kafka's checkpoint files and the clean-shutdown marker (formats as Kafka writes them).

Offset checkpoints (`replication-offset-checkpoint`, `recovery-point-offset-checkpoint`,
`log-start-offset-checkpoint`, one per log dir):

    0                    <- version
    2                    <- number of entries
    topic-a 0 1234       <- topic partition offset
    topic-b 3 77

`leader-epoch-checkpoint` (one per partition dir): version 0, count, then `epoch offset`
lines. The clean-shutdown marker `.kafka_cleanshutdown` (Kafka 3.7+, KIP-966) holds
`{"version":0,"BrokerEpoch":N}`. Every write is atomic (tmp file, fsync, rename, dir fsync).
"""

from __future__ import annotations

import json
import os

from broker.core.messages import TopicPartition
from broker.storage.fileio import atomic_write

REPLICATION_CHECKPOINT = "replication-offset-checkpoint"
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_CHECKPOINT = "log-start-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"


class CheckpointError(ValueError):
    """A checkpoint file that does not parse; the message names the file and line."""


def _lines(path: str) -> list[str] | None:
    try:
        with open(path, encoding="utf-8", errors="strict") as f:
            return f.read().split("\n")
    except FileNotFoundError:
        return None
    except UnicodeDecodeError as e:
        raise CheckpointError(f"{path}: not text ({e.reason} at byte {e.start})") from None


def _entries(path: str, fields: int) -> list[list[str]] | None:
    lines = _lines(path)
    if lines is None:
        return None
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) < 2:
        raise CheckpointError(f"{path}: {len(lines)} lines, a checkpoint has at least 2")
    if lines[0].strip() != "0":
        raise CheckpointError(f"{path}:1: unsupported checkpoint version {lines[0]!r}")
    try:
        count = int(lines[1])
    except ValueError:
        raise CheckpointError(f"{path}:2: entry count {lines[1]!r} is not a number") from None
    if count != len(lines) - 2:
        raise CheckpointError(f"{path}:2: says {count} entries, the file has {len(lines) - 2}")
    out = []
    for i, line in enumerate(lines[2:], start=3):
        parts = line.split(" ")
        if len(parts) != fields:
            raise CheckpointError(f"{path}:{i}: expected {fields} fields, got {line!r}")
        out.append(parts)
    return out


def _int(path: str, line: int, s: str) -> int:
    try:
        return int(s)
    except ValueError:
        raise CheckpointError(f"{path}:{line}: {s!r} is not a number") from None


def read_offsets(path: str) -> dict[TopicPartition, int]:
    """An offset checkpoint ({} if the file is absent); CheckpointError if it is corrupt."""
    rows = _entries(path, 3)
    if rows is None:
        return {}
    out: dict[TopicPartition, int] = {}
    for i, (topic, part, off) in enumerate(rows, start=3):
        out[TopicPartition(topic, _int(path, i, part))] = _int(path, i, off)
    return out


def write_offsets(path: str, offsets: dict[TopicPartition, int]) -> None:
    body = "".join(f"{tp.topic} {tp.partition} {off}\n" for tp, off in sorted(offsets.items()))
    atomic_write(path, f"0\n{len(offsets)}\n{body}".encode())


def read_epochs(path: str) -> list[tuple[int, int]] | None:
    """A leader-epoch checkpoint (None if absent); CheckpointError if corrupt or not ascending."""
    rows = _entries(path, 2)
    if rows is None:
        return None
    out = [(_int(path, i, e), _int(path, i, o)) for i, (e, o) in enumerate(rows, start=3)]
    for i in range(1, len(out)):
        if out[i][0] <= out[i - 1][0] or out[i][1] < out[i - 1][1]:
            raise CheckpointError(f"{path}:{i + 3}: entry {out[i]} does not follow {out[i - 1]}")
    return out


def write_epochs(path: str, entries: list[tuple[int, int]]) -> None:
    body = "".join(f"{e} {o}\n" for e, o in entries)
    atomic_write(path, f"0\n{len(entries)}\n{body}".encode())


def read_clean_shutdown(path: str) -> int | None:
    """The broker epoch in a clean-shutdown marker; None if absent; CheckpointError if it
    does not parse."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        return None
    try:
        epoch = json.loads(raw)["BrokerEpoch"]
    except (ValueError, KeyError, TypeError):
        raise CheckpointError(f"{path}: not a clean-shutdown marker ({raw[:60]!r})") from None
    if not isinstance(epoch, int):
        raise CheckpointError(f"{path}: BrokerEpoch {epoch!r} is not an integer")
    return epoch


def write_clean_shutdown(path: str, broker_epoch: int) -> None:
    atomic_write(path, json.dumps({"version": 0, "BrokerEpoch": broker_epoch}).encode())


def remove(path: str) -> bool:
    try:
        os.unlink(path)
        return True
    except FileNotFoundError:
        return False
