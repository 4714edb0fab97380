"""Committed consumer-group offsets: a persistent, per-broker store.

One JSON object per line, appended and fsynced on every commit:
``{"g": group, "t": topic, "p": partition, "o": offset, "e": leader epoch, "m": metadata}``
(``"o": null`` forgets the entry: its topic or group was deleted, or OffsetDelete). Loading replays the
file; a torn last line (a crash mid-write) is dropped, any other bad line is bad input
(`OffsetStoreError` names FILE:LINE). The file is rewritten (atomically) at startup when
it holds many superseded lines.

Which broker stores a group's offsets is decided by the group coordinator
(`coordinator_for`): a hash of the group id over every registered broker, so it never
moves while the cluster's membership is stable (offsets stay where they were committed).
"""

from __future__ import annotations

import json
import os
import zlib
from dataclasses import dataclass
from pathlib import Path

from contracts.errors import InputError


class OffsetStoreError(InputError):
    """The offsets file has a bad line."""


@dataclass(frozen=True, slots=True)
class Committed:
    offset: int
    leader_epoch: int
    metadata: str | None


class OffsetStore:
    """group -> (topic, partition) -> Committed, persisted in `path`."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.groups: dict[str, dict[tuple[str, int], Committed]] = {}
        self._lines = 0
        self._fh = None

    def load(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.exists():
            raw = self.path.read_bytes()
            lines = raw.split(b"\n")
            for i, line in enumerate(lines, start=1):
                if not line.strip():
                    continue
                last = i == len(lines)  # no newline after it: possibly torn
                try:
                    d = json.loads(line)
                    g, t, p, o = d["g"], d["t"], d["p"], d["o"]
                    if not (isinstance(g, str) and isinstance(t, str) and isinstance(p, int)):
                        raise ValueError("bad field types")
                    if o is None:
                        self.groups.get(g, {}).pop((t, p), None)
                    else:
                        self.groups.setdefault(g, {})[(t, p)] = Committed(int(o), int(d.get("e", -1)), d.get("m"))
                    self._lines += 1
                except (ValueError, KeyError, TypeError) as e:
                    if last:
                        break
                    raise OffsetStoreError(f"bad committed-offset record ({e})", str(self.path), i) from None
            live = sum(len(v) for v in self.groups.values())
            if self._lines > 2 * live + 1000:
                self._rewrite()
        self._fh = open(self.path, "ab")  # noqa: SIM115 - kept open for appends

    def _rewrite(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        with open(tmp, "wb") as f:
            for g, entries in self.groups.items():
                for (t, p), c in entries.items():
                    f.write(_line(g, t, p, c))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        _fsync_dir(self.path.parent)
        self._lines = sum(len(v) for v in self.groups.values())

    def commit(self, group: str, entries: dict[tuple[str, int], Committed | None]) -> None:
        """Record (and fsync) the commits of one request; None forgets an entry."""
        assert self._fh is not None, "load() first"
        out = []
        g = self.groups.setdefault(group, {})
        for (t, p), c in entries.items():
            if c is None:
                if g.pop((t, p), None) is None:
                    continue
                out.append(json.dumps({"g": group, "t": t, "p": p, "o": None}).encode() + b"\n")
            else:
                g[(t, p)] = c
                out.append(_line(group, t, p, c))
        if out:
            self._fh.write(b"".join(out))
            self._fh.flush()
            os.fsync(self._fh.fileno())
            self._lines += len(out)

    def fetch(self, group: str) -> dict[tuple[str, int], Committed]:
        return self.groups.get(group, {})

    def forget(self, group: str, partitions: list[tuple[str, int]] | None = None) -> None:
        """Forget (durably) the group's offsets of `partitions`, or all of them
        (DeleteGroups, OffsetDelete)."""
        entries = self.groups.get(group, {})
        gone = [tp for tp in (entries if partitions is None else partitions) if tp in entries]
        if gone:
            self.commit(group, dict.fromkeys(gone))
        if not self.groups.get(group):
            self.groups.pop(group, None)

    def forget_topic(self, topic: str) -> None:
        for group, entries in list(self.groups.items()):
            gone = {k: None for k in entries if k[0] == topic}
            if gone:
                self.commit(group, gone)  # type: ignore[arg-type]

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None


def _line(group: str, topic: str, partition: int, c: Committed) -> bytes:
    d = {"g": group, "t": topic, "p": partition, "o": c.offset, "e": c.leader_epoch, "m": c.metadata}
    return json.dumps(d, separators=(",", ":")).encode() + b"\n"


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def coordinator_for(group: str, brokers: list[int]) -> int:
    """The broker that stores `group`'s offsets: crc32(group) over the sorted brokers."""
    if not brokers:
        return -1
    ordered = sorted(brokers)
    return ordered[zlib.crc32(group.encode("utf-8")) % len(ordered)]
