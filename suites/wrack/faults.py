"""The wrack broker's faults: the generic packages, and those aimed at the roles of its Kafka
partitions and controller quorum, found through the cluster's metadata at the moment of the fault.

- `kill-leader`: SIGKILL the current leader of a random topic-partition, later start all;
- `partition-leader`: the current leader of a random topic-partition isolated from every
  other node or (the next time: they alternate) cut off from its ISR followers only, keeping
  the controller (`suites.wrack.leadercut`: the op returns once the ISR is the leader alone), later heal;
- `power-loss`: one node at a time, a leader that stands alone in its ISR when there is one
  (`nemesis.targets` role `lone-leader`: the ELR's case), else one at random;
- `kill-controller` / `partition-controller`: the same for the active controller's node;
- the fault stories of `suites.wrack.stories` (lrs, hw-truncation, leso, wipe-follower,
  stale-alter-partition, unclean-candidates, lagging-follower-in-isr, leader-churn), each
  aimed at one of the workload's partitions;
- `client-path` (nemesis/clientpath.py: the Kafka-aware proxy between the clients and the
  brokers delays, drops, duplicates or reorders Produce, Fetch, EndTxn, AddPartitionsToTxn,
  InitProducerId and OffsetCommit requests or answers), and `client-path-TYPE` for one
  request type of `CLIENT_APIS` (e.g. `client-path-EndTxn`);
- `retry-failover`: a leader's Produce answers dropped, then the leader killed or restarted
  (its producers' retries meet the next leader: idempotence across a failover);
- `txn-coordinator`, `delay-markers`, `fence-producer` (nemesis/txnfaults.py): the
  transaction coordinator killed, paused or isolated in the middle of a commit or abort,
  the transaction markers held in the network, a client's transactional producer fenced;
- `flaky-net` (nemesis/flakynet.py): lossy and slow links between the nodes.

`MIX` (what `--nemesis mix`, the default, stands for): seven stories with the generic
packages and those above, played by `nemesis.layers.layered`: each package in turn
(`nemesis.schedule.rotation`, a random order per round, about a quarter of the time
fault-free; first, in a random order, the trigger shapes of tier 0: the stories, the
ISR-shrinking leader cut `partition-leader`, `txn-coordinator`, `delay-markers`,
`retry-failover`), but for the background ones (the client path's faults, fencing), which
play beside the rotation on their own clocks. The transaction faults skip their turn at
once (recorded as skipped) when no client has used a transactional id: they act whenever
transactions run, at no cost to runs without them.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from typing import Any

from nemesis.clientpath import client_path_package, retry_failover_package
from nemesis.core import FaultOp
from nemesis.flakynet import flaky_net_package
from nemesis.schedule import (
    PACKAGES,
    FaultPackage,
    isolate_target_package,
    kill_target_package,
    power_loss_package,
)
from nemesis.txnfaults import delay_markers_package, fence_producer_package, txn_coordinator_package
from suites.wrack.leadercut import install_leader_cut
from suites.wrack.stories import STORIES, story_package

# the stories that reach their trigger on wrack-broker (unclean-candidates: every ISR member
# killed while a follower is out of it; lagging-follower-in-isr: a shape no safeguard brings
# back, elected as soon as a lagging follower is let into the ISR), then generic faults; leader-churn is left out
# (docs/nemesis.md "Fault stories": no bug found with it alone, and it left partitions
# without a full ISR 30 s after the heal)
# the ISR-shrinking leader cut (partition-leader), the coordinator's faults, the client
# path's and the network's (issue 25: every trigger shape the nemeses know)
MIX = ("lrs", "hw-truncation", "leso", "wipe-follower", "stale-alter-partition", "unclean-candidates",
       "lagging-follower-in-isr", "kill-leader",
       "partition", "kill",
       "partition-leader", "txn-coordinator", "delay-markers", "retry-failover", "flaky-net", "client-path",
       "fence-producer")
# the request types a client sends, each a `client-path-TYPE` package
CLIENT_APIS = ("Produce", "Fetch", "ListOffsets", "Metadata", "OffsetCommit", "OffsetFetch", "FindCoordinator",
               "JoinGroup", "Heartbeat", "SyncGroup", "LeaveGroup", "InitProducerId", "AddPartitionsToTxn",
               "AddOffsetsToTxn", "EndTxn", "TxnOffsetCommit")
CONTROLLER = {"role": "controller"}


def _leader_target(topics: Mapping[str, int]) -> Callable[[random.Random], dict[str, Any]]:
    names = sorted(topics)

    def pick(rng: random.Random) -> dict[str, Any]:
        t = names[rng.randrange(len(names))]
        return {"role": "leader", "topic": t, "partition": rng.randrange(max(1, topics[t]))}

    return pick


def partition_leader_start(leader: Callable[[random.Random], dict[str, Any]],
                           candidates: Callable[[random.Random], list[tuple[str, int]]]
                           ) -> Callable[[random.Random], FaultOp]:
    """`partition-leader`'s start: a drawn partition's leader either isolated from every other
    node (the controller fences it and elects a follower: what acks=1 loses) or cut off from
    its ISR followers only (`suites.wrack.leadercut`, the workload's partitions in a drawn order as
    candidates: the leader keeps the controller and shrinks the ISR to itself, the ELR's
    case). The first start draws the shape, the next ones alternate: a run with two leader
    partitions has both (drawn each time, three in a row were isolations in 2 of 5 runs)."""
    isolate_next: list[bool] = []

    def start(rng: random.Random) -> FaultOp:
        isolate = rng.random() < 0.5 if not isolate_next else isolate_next[0]
        isolate_next[:] = [not isolate]
        if isolate:
            return FaultOp("start-partition", {"isolate": leader(rng)})
        return FaultOp("cut-leader", {"candidates": [list(c) for c in candidates(rng)]})

    return start


def partition_packages(topics: Mapping[str, int]) -> dict[str, Callable[[], FaultPackage]]:
    """The packages aimed at the workload's partitions (none without topics)."""
    if not topics:
        return {}
    leader = _leader_target(topics)
    every = [(t, p) for t in sorted(topics) for p in range(max(1, topics[t]))]

    def candidates(rng: random.Random) -> list[tuple[str, int]]:
        order = list(every)
        rng.shuffle(order)
        return order

    stories = {name: (lambda name=name: story_package(name, candidates)) for name in STORIES}
    # a power loss strikes a leader that stands alone in its ISR when there is one (seed 002:
    # the ELR's case), else one node at random
    lone = {"role": "lone-leader", "topics": sorted(topics), "else": "one"}
    return {
        **stories,
        "power-loss": lambda: power_loss_package((lone,)),
        "kill-leader": lambda: kill_target_package("kill-leader", leader, "#E9A4A0"),
        "partition-leader": lambda: FaultPackage(
            "partition-leader", partition_leader_start(leader, candidates), FaultOp("stop-partition"),
            [FaultOp("stop-partition")], "#E9DCA0", install_leader_cut, tier=0),
        "retry-failover": lambda: retry_failover_package(candidates),
    }


def client_packages() -> dict[str, Callable[[], FaultPackage]]:
    """The client path's, the transactions' and the network's packages (module docstring)."""
    one_type = {f"client-path-{a}": (lambda a=a: client_path_package((a,), f"client-path-{a}")) for a in CLIENT_APIS}
    return {"client-path": client_path_package, **one_type, "txn-coordinator": txn_coordinator_package,
            "delay-markers": delay_markers_package, "fence-producer": fence_producer_package,
            "flaky-net": flaky_net_package}


def controller_packages() -> dict[str, Callable[[], FaultPackage]]:
    """`kill-controller` (SIGKILL the active controller's node, later start all) and
    `partition-controller` (isolate it from every other node, later heal)."""
    return {
        "kill-controller": lambda: kill_target_package("kill-controller", CONTROLLER, "#D98880"),
        "partition-controller": lambda: isolate_target_package("partition-controller", CONTROLLER, "#D9C880"),
    }


def packages(topics: Mapping[str, int]) -> dict[str, Callable[[], FaultPackage]]:
    """Every package `--nemesis` may name for the broker."""
    return {**PACKAGES, **partition_packages(topics), **controller_packages(), **client_packages()}
