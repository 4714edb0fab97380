"""The fault stories keep the active controller out of the partition they play on
(suites/wrack/stories.py `Story.choose`): in a default test some partition must avoid every
voter that may lead the controller quorum, or no story ever runs (seen: every story of a
bug-zoo run failed with "no partition without a controller replica")."""

from __future__ import annotations

from broker.core.placement import assign_replicas
from harness.options import DEFAULTS
from suites.wrack.db import default_controllers
from workloads.base import WorkloadOptions
from workloads.queue import QueueWorkload


def default_placement(nodes: int) -> list[tuple[int, ...]]:
    """The replicas of every partition of the default topics, created in order as the
    controller places them (each topic starts after the partitions before it)."""
    topics = QueueWorkload(WorkloadOptions.from_test(DEFAULTS.to_dict())).topics()
    out: list[tuple[int, ...]] = []
    for partitions in topics.values():
        out += assign_replicas(list(range(nodes)), partitions, DEFAULTS.rf, start=len(out))
    return out


def test_every_possible_active_controller_leaves_a_partition_to_play_on():
    for nodes in (DEFAULTS.nodes, 4, 6, 7):
        placement = default_placement(nodes)
        for controller in range(default_controllers(nodes)):
            free = [r for r in placement if controller not in r]
            assert free, f"{nodes} nodes, active controller {controller}: every partition has a replica on it"


def test_the_default_cluster_leaves_a_partition_whose_loss_keeps_the_quorum():
    """A story may take down every replica but one: on the default cluster some partition
    the active controller has no replica of holds at most the quorum's spare voters, so the
    story's elections still happen (Story.quorum_safe)."""
    nodes = DEFAULTS.nodes
    voters = set(range(default_controllers(nodes)))
    spare = len(voters) - (len(voters) // 2 + 1)
    placement = default_placement(nodes)
    for controller in voters:
        safe = [r for r in placement if controller not in r and len(voters & set(r)) <= spare]
        assert safe, f"active controller {controller}: every free partition holds {spare + 1}+ voters"
