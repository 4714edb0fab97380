"""Offsets committed inside transactions (TxnOffsetCommit), held by the group's
coordinator until the transaction ends: a COMMIT marker for the producer makes them the
group's committed offsets, an ABORT marker discards them (Kafka keeps them as pending
offsets of the group until the marker reaches __consumer_offsets).

Pending offsets live in memory: a group coordinator that restarts before the marker
arrives loses them (the transaction's offsets are then not committed; the committed
records still are). docs/broker.md says so.
"""

from __future__ import annotations

from broker.server.offsets import Committed, OffsetStore

Entries = dict[tuple[str, int], Committed]


class PendingTxnOffsets:
    """producer id -> group -> (topic, partition) -> offset, until the marker."""

    def __init__(self) -> None:
        self.pending: dict[int, dict[str, Entries]] = {}

    def add(self, producer_id: int, group: str, entries: Entries) -> None:
        self.pending.setdefault(producer_id, {}).setdefault(group, {}).update(entries)

    def complete(self, producer_id: int, commit: bool, store: OffsetStore) -> None:
        """The producer's transaction ended: commit its pending offsets to `store`, or drop them."""
        groups = self.pending.pop(producer_id, {})
        if commit:
            for group, entries in groups.items():
                store.commit(group, dict(entries))

    def pending_for(self, group: str) -> set[tuple[str, int]]:
        """The partitions of `group` with an offset waiting for a marker."""
        return {tp for groups in self.pending.values() for tp in groups.get(group, {})}
