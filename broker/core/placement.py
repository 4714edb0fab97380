"""Replica placement for new topics (seed 004, Kafka's AdminUtils without racks).

Brokers are sorted; partition i's first (preferred) replica is on broker ((start + i) mod n);
the j-th further replica is shifted by 1 + (shift + j - 1) mod (n - 1), where `shift` grows by
one every n partitions, so the followers of one broker's partitions spread over all the
other brokers and a failed broker's load spreads evenly. Kafka starts each topic at a random
broker (AdminUtils, no fixed start index) so that topics spread over the brokers too; the
controller passes `start` = the number of partitions the cluster already has, which spreads
them the same way and keeps placement deterministic.
"""

from __future__ import annotations


class PlacementError(ValueError):
    """Not enough brokers for the replication factor, or a non-positive count."""


def assign_replicas(brokers: list[int], num_partitions: int, replication_factor: int,
                    start: int = 0) -> list[tuple[int, ...]]:
    """The replica list of each partition; the first entry is the preferred leader, on the
    broker `start` places after the first for partition 0."""
    if num_partitions <= 0:
        raise PlacementError(f"number of partitions must be positive, got {num_partitions}")
    if replication_factor <= 0:
        raise PlacementError(f"replication factor must be positive, got {replication_factor}")
    ids = sorted(brokers)
    n = len(ids)
    if replication_factor > n:
        raise PlacementError(f"replication factor {replication_factor} larger than the {n} available brokers")
    out: list[tuple[int, ...]] = []
    for i in range(num_partitions):
        first = (start + i) % n
        shift = i // n
        replicas = [ids[first]]
        for j in range(1, replication_factor):
            replicas.append(ids[(first + 1 + (shift + j - 1) % (n - 1)) % n])
        out.append(tuple(replicas))
    return out
