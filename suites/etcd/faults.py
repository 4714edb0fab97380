"""etcd's faults: the generic packages that reach it, and its Raft leader as a role target.

`kill-leader` / `partition-leader` aim at the member the DB reports as leader (the metadata's
controller: suites/base.py's `LeaderMetadata`). Left out: clock skew (libfaketime does not
reach a Go program's clock), corruption and membership (written for the broker's segment
files and node ids) and the broker's fault stories (Kafka partitions)."""

from __future__ import annotations

from collections.abc import Callable

from nemesis.schedule import PACKAGES, FaultPackage, isolate_target_package, kill_target_package

GENERIC = ("partition", "kill", "pause", "restart", "rolling-restart", "power-loss", "power-loss-many")
MIX = ("partition", "kill", "pause", "kill-leader", "partition-leader")
LEADER = {"role": "controller"}


def packages() -> dict[str, Callable[[], FaultPackage]]:
    return {
        **{n: PACKAGES[n] for n in GENERIC},
        "kill-leader": lambda: kill_target_package("kill-leader", LEADER, "#D98880"),
        "partition-leader": lambda: isolate_target_package("partition-leader", LEADER, "#D9C880"),
    }
