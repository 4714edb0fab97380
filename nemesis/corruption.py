"""File corruption: bit flips and truncation in a stopped broker's segment files.

Segment files follow Kafka's layout: `<log dir>/<topic>-<partition>/<20-digit offset>.log`.
`select_segments` picks them (the last or a random segment of each partition, or all;
optionally one topic / partition); `plan_bitflips` and `plan_truncation` decide what to
change from a seed, so a run replays; `apply` (run *on the node*: `python -m
nemesis.corruption apply JSON`) changes the files with pwrite/ftruncate + fsync (through
LazyFS the change is then durable) and returns exactly what it changed:

    {"op": "bitflip", "file": F, "offset": 1234, "bit": 5, "before": 0x3a, "after": 0x1a}
    {"op": "truncate", "file": F, "old_size": 4096, "new_size": 4000,
     "removed_sha256": "...", "removed_head": "hex of up to 64 removed bytes"}

The fault `corrupt-file` (`install_corruption(nemesis, db)`), an instant, value:
    {"nodes": TARGET, "mode": "bitflip" | "truncate", "file": "last" | "random" | "all",
     "topic": T, "partition": P, "flips": N | "probability": p, "drop_bytes": N | "drop_fraction": f,
     "stop": "term" | "kill", "restart": true, "seed": S}
stops each target's broker (SIGTERM by default: with "kill" and a LazyFS hook that is also a
power loss), corrupts, restarts it, and records every change per node.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import sys
from dataclasses import asdict, dataclass
from typing import Any

from nemesis.nodeside import node_python

SEGMENT_RE = re.compile(r"^\d{20}\.log$")
PARTITION_DIR_RE = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)$")


@dataclass
class CorruptionSpec:
    mode: str = "bitflip"
    file: str = "last"
    topic: str | None = None
    partition: int | None = None
    flips: int | None = 1
    probability: float | None = None
    drop_bytes: int | None = None
    drop_fraction: float | None = None
    seed: int = 0

    def validate(self) -> CorruptionSpec:
        if self.mode not in ("bitflip", "truncate"):
            raise ValueError(f"corruption mode must be bitflip or truncate, not {self.mode!r}")
        if self.file not in ("last", "random", "all"):
            raise ValueError(f"corruption file must be last, random or all, not {self.file!r}")
        if self.probability is not None and not 0 <= self.probability <= 1:
            raise ValueError(f"probability must be in [0, 1], not {self.probability}")
        if self.drop_fraction is not None and not 0 <= self.drop_fraction <= 1:
            raise ValueError(f"drop_fraction must be in [0, 1], not {self.drop_fraction}")
        if self.flips is not None and self.flips < 0 or self.drop_bytes is not None and self.drop_bytes < 0:
            raise ValueError("flips and drop_bytes must be >= 0")
        return self


def segments(log_dir: str) -> dict[tuple[str, int], list[str]]:
    """(topic, partition) -> its segment files, sorted by base offset."""
    out: dict[tuple[str, int], list[str]] = {}
    try:
        entries = sorted(os.listdir(log_dir))
    except FileNotFoundError:
        return out
    for d in entries:
        m = PARTITION_DIR_RE.match(d)
        full = os.path.join(log_dir, d)
        if not m or not os.path.isdir(full):
            continue
        segs = sorted(f for f in os.listdir(full) if SEGMENT_RE.match(f))
        if segs:
            out[(m["topic"], int(m["partition"]))] = [os.path.join(full, f) for f in segs]
    return out


def select_segments(found: dict[tuple[str, int], list[str]], spec: CorruptionSpec, rng: random.Random) -> list[str]:
    files = []
    for (topic, part), segs in sorted(found.items()):
        if spec.topic is not None and topic != spec.topic:
            continue
        if spec.partition is not None and part != spec.partition:
            continue
        if spec.file == "last":
            files.append(segs[-1])
        elif spec.file == "random":
            files.append(segs[rng.randrange(len(segs))])
        else:
            files.extend(segs)
    return files


def plan_bitflips(sizes: dict[str, int], spec: CorruptionSpec, rng: random.Random) -> list[tuple[str, int, int]]:
    """(file, byte offset, bit) to flip: `flips` per file, or each bit with `probability`
    (sampled per byte as a binomial count, so a large file costs no per-bit work). Distinct
    positions, sorted."""
    out: set[tuple[str, int, int]] = set()
    for f, size in sorted(sizes.items()):
        if size == 0:
            continue
        if spec.probability is not None:
            nbits = size * 8
            n = sum(1 for _ in range(nbits) if rng.random() < spec.probability) if nbits <= 4096 \
                else max(0, round(rng.gauss(nbits * spec.probability, (nbits * spec.probability) ** 0.5)))
        else:
            n = spec.flips or 0
        n = min(n, size * 8)
        picked: set[int] = set()
        while len(picked) < n:
            picked.add(rng.randrange(size * 8))
        out |= {(f, b // 8, b % 8) for b in picked}
    return sorted(out)


def plan_truncation(size: int, spec: CorruptionSpec, rng: random.Random) -> int:
    """The new size: `drop_bytes` or `drop_fraction` of the file removed, default a random
    amount in [1, min(size, 4096)]."""
    if spec.drop_bytes is not None:
        drop = spec.drop_bytes
    elif spec.drop_fraction is not None:
        drop = int(round(size * spec.drop_fraction))
    else:
        drop = rng.randint(1, min(size, 4096)) if size else 0
    return max(0, size - min(drop, size))


def apply(log_dir: str, spec: CorruptionSpec) -> list[dict[str, Any]]:
    """Corrupt segment files below `log_dir` per `spec` (on the node); returns the changes."""
    spec.validate()
    rng = random.Random(spec.seed)
    files = select_segments(segments(log_dir), spec, rng)
    changes: list[dict[str, Any]] = []
    if spec.mode == "bitflip":
        sizes = {f: os.path.getsize(f) for f in files}
        by_file: dict[str, list[tuple[int, int]]] = {}
        for f, off, bit in plan_bitflips(sizes, spec, rng):
            by_file.setdefault(f, []).append((off, bit))
        for f, flips in by_file.items():
            fd = os.open(f, os.O_RDWR)
            try:
                for off, bit in flips:
                    before = os.pread(fd, 1, off)[0]
                    after = before ^ (1 << bit)
                    os.pwrite(fd, bytes([after]), off)
                    changes.append({"op": "bitflip", "file": f, "offset": off, "bit": bit,
                                    "before": before, "after": after})
                os.fsync(fd)
            finally:
                os.close(fd)
    else:
        for f in files:
            fd = os.open(f, os.O_RDWR)
            try:
                size = os.fstat(fd).st_size
                new = plan_truncation(size, spec, rng)
                if new == size:
                    continue
                removed = os.pread(fd, size - new, new)
                os.ftruncate(fd, new)
                os.fsync(fd)
            finally:
                os.close(fd)
            changes.append({"op": "truncate", "file": f, "old_size": size, "new_size": new,
                            "removed_sha256": hashlib.sha256(removed).hexdigest(), "removed_head": removed[:64].hex()})
    return changes


def install_corruption(nemesis: Any, db: Any | None = None) -> None:
    """Register `corrupt-file` on `nemesis` (module docstring)."""
    db = db if db is not None else nemesis.db
    if db is None:
        raise ValueError("file corruption needs a DB (its data dir and its stop/start)")

    def corrupt(value: Any) -> dict[str, Any]:
        v = dict(value or {})
        names = nemesis.targets(v.pop("nodes", None) or "one")
        stop = v.pop("stop", "term")
        restart = v.pop("restart", True)
        if stop not in ("term", "kill"):
            raise ValueError(f"stop must be term or kill, not {stop!r}")
        v.setdefault("seed", nemesis.rng.randrange(2**31))
        known = set(CorruptionSpec.__dataclass_fields__)
        if set(v) - known:
            raise ValueError(f"unknown corrupt-file keys {sorted(set(v) - known)}")
        spec = CorruptionSpec(**v).validate()
        changes: dict[str, list[dict[str, Any]]] = {}
        for i, name in enumerate(names):
            node = nemesis.cluster.node(name)
            (db.stop if stop == "term" else db.kill)(node)
            one = CorruptionSpec(**{**asdict(spec), "seed": spec.seed + i})
            res = node.exec([node_python(node), "-m", "nemesis.corruption", "apply", db.data_dir(node),
                             json.dumps(asdict(one))], timeout=300)
            changes[name] = json.loads(res.stdout)
            if restart:
                db.start(node)
                nemesis.killed.discard(name)
            else:
                nemesis.killed.add(name)
        return {"nodes": names, "mode": spec.mode, "file": spec.file, "seed": spec.seed, "stop": stop,
                "restart": restart, "changes": changes}

    nemesis.register("corrupt-file", corrupt)


def main(argv: list[str] | None = None) -> int:
    """`python -m nemesis.corruption apply LOG_DIR SPEC_JSON`: prints the changes as JSON."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 3 or args[0] != "apply":
        print("usage: python -m nemesis.corruption apply LOG_DIR SPEC_JSON", file=sys.stderr)
        return 254
    try:
        spec = CorruptionSpec(**json.loads(args[2])).validate()
    except (ValueError, TypeError) as e:
        print(f"corruption: bad spec: {e}", file=sys.stderr)
        return 254
    print(json.dumps(apply(args[1], spec)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
