"""Log divergence: the leader's check on a fetch and the follower's truncation rule.

Leader side (KIP-595 / KIP-320, Partition.fetchRecords): a fetch with a last fetched
epoch E at fetch offset F diverges when the leader's end offset for E, (E', O) =
endOffsetFor(E), has E' < E or O < F; the leader answers DivergingEpoch(E', O) and no
records. Follower side (AbstractFetcherThread.getOffsetTruncationState, KIP-279): given
the leader's (E, O), look up the local (e', o') = endOffsetFor(E); if e' == E truncate to
min(o', O, LEO) (done); otherwise truncate to min(o', LEO) and fetch again, since the
leader does not know e' (another round follows with an older last fetched epoch).
"""

from __future__ import annotations

from broker.core.messages import EpochEndOffset
from broker.logapi import PartitionLog


def find_divergence(log: PartitionLog, fetch_offset: int, last_fetched_epoch: int) -> EpochEndOffset | None:
    """The DivergingEpoch the leader must return for this fetch, or None if the follower's
    log is a prefix of the leader's up to `fetch_offset`. `last_fetched_epoch` -1 (an
    empty follower log) never diverges."""
    if last_fetched_epoch < 0:
        return None
    epoch, end = log.end_offset_for_epoch(last_fetched_epoch)
    if epoch < last_fetched_epoch or end < fetch_offset:
        return EpochEndOffset(epoch, end)
    return None


def truncation_offset(log: PartitionLog, diverging: EpochEndOffset) -> tuple[int, bool]:
    """Where the follower truncates on a DivergingEpoch, and whether that is final."""
    leo = log.log_end_offset
    if diverging.end_offset < 0:
        return leo, True  # undefined: nothing known to diverge (a no-op here)
    if diverging.epoch < 0:
        return min(diverging.end_offset, leo), True
    local_epoch, local_end = log.end_offset_for_epoch(diverging.epoch)
    if local_epoch < 0:
        return min(diverging.end_offset, leo), True
    if local_epoch == diverging.epoch:
        return min(local_end, diverging.end_offset, leo), True
    return min(local_end, leo), False
