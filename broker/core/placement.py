"""Replica placement for new topics (seed 004, Kafka's AdminUtils without racks).

Brokers are sorted; partition i's first (preferred) replica is on broker (i mod n); the
j-th further replica is shifted by 1 + (shift + j - 1) mod (n - 1), where `shift` grows by
one every n partitions, so the followers of one broker's partitions spread over all the
other brokers and a failed broker's load spreads evenly.
"""

from __future__ import annotations


class PlacementError(ValueError):
    """Not enough brokers for the replication factor, or a non-positive count."""


def assign_replicas(brokers: list[int], num_partitions: int, replication_factor: int) -> list[tuple[int, ...]]:
    """The replica list of each partition; the first entry is the preferred leader."""
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
        first = i % n
        shift = i // n
        replicas = [ids[first]]
        for j in range(1, replication_factor):
            replicas.append(ids[(first + 1 + (shift + j - 1) % (n - 1)) % n])
        out.append(tuple(replicas))
    return out
