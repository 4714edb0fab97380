"""Leader-side divergence detection and follower truncation (KIP-101/279/320/595)."""

from __future__ import annotations

from core_helpers import log_with
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.core.messages import EpochEndOffset
from broker.core.truncation import find_divergence, truncation_offset
from broker.sim.batches import encode_batch
from broker.sim.memlog import InMemoryPartitionLog


def test_prefix_does_not_diverge():
    leader = log_with([(0, 5), (2, 5)])
    assert find_divergence(leader, 5, 0) is None
    assert find_divergence(leader, 8, 2) is None
    assert find_divergence(leader, 0, -1) is None  # empty follower


def test_follower_suffix_in_an_epoch_the_leader_never_had():
    leader = log_with([(0, 5), (2, 5)])
    follower = log_with([(0, 5), (1, 3)])
    div = find_divergence(leader, follower.log_end_offset, follower.latest_epoch())
    assert div == EpochEndOffset(0, 5)
    assert truncation_offset(follower, div) == (5, True)


def test_follower_ahead_in_the_same_epoch_truncates_to_the_leaders_end_of_it():
    leader = log_with([(0, 6), (1, 2)])
    follower = log_with([(0, 10)])
    div = find_divergence(leader, 10, 0)
    assert div == EpochEndOffset(0, 6)
    assert truncation_offset(follower, div) == (6, True)


def test_multi_round_truncation_kip_279():
    leader = log_with([(0, 3), (2, 6), (4, 3)])
    follower = log_with([(0, 3), (1, 3), (3, 2)])
    div = find_divergence(leader, 8, 3)
    assert div == EpochEndOffset(2, 9)
    off, final = truncation_offset(follower, div)
    assert (off, final) == (6, False)  # the follower does not know epoch 2: one more round
    follower.truncate_to(off)
    div = find_divergence(leader, follower.log_end_offset, follower.latest_epoch())
    assert div == EpochEndOffset(0, 3)
    assert truncation_offset(follower, div) == (3, True)


def test_follower_epochs_older_than_every_leader_epoch():
    leader = log_with([(2, 4)])
    follower = log_with([(0, 4)])
    div = find_divergence(leader, 4, 0)
    assert div == EpochEndOffset(0, 0)
    assert truncation_offset(follower, div) == (0, True)


def test_leader_epoch_start_offset_lets_a_follower_of_a_later_epoch_truncate():
    # The new leader (epoch 3) assigns its LESO at its LEO before writing anything.
    leader = log_with([(0, 4)])
    leader.assign_epoch_start(3, 4)
    follower = log_with([(0, 4), (2, 2)])  # wrote in epoch 2, unknown to the leader
    div = find_divergence(leader, 6, 2)
    assert div == EpochEndOffset(0, 4)
    assert truncation_offset(follower, div) == (4, True)


def test_end_offset_for_epoch_matches_kafka():
    log = log_with([(1, 3), (3, 2)])
    assert log.end_offset_for_epoch(-1) == (-1, -1)
    assert log.end_offset_for_epoch(3) == (3, 5)  # latest: LEO
    assert log.end_offset_for_epoch(1) == (1, 3)
    assert log.end_offset_for_epoch(2) == (1, 3)  # floor epoch, start of the next
    assert log.end_offset_for_epoch(0) == (0, 0)  # below every epoch
    assert log.end_offset_for_epoch(7) == (-1, -1)  # above every epoch


def _sync(leader: InMemoryPartitionLog, follower: InMemoryPartitionLog) -> None:
    """Run the fetch protocol's truncation loop, then copy the leader's suffix."""
    for _ in range(50):
        div = find_divergence(leader, follower.log_end_offset, follower.latest_epoch())
        if div is None:
            break
        off, _final = truncation_offset(follower, div)
        follower.truncate_to(off)
    else:
        raise AssertionError("truncation did not converge")
    follower.append_as_follower(leader.read(follower.log_end_offset, 1 << 30))


def _content(log: InMemoryPartitionLog) -> list[tuple[int, bytes]]:
    return [(b.epoch, b.data) for b in log.batches()]


@settings(max_examples=200, deadline=None)
@given(
    prefix=st.lists(st.integers(0, 3), max_size=8),
    follower_suffix=st.integers(0, 5),
    leader_suffix=st.integers(0, 5),
    follower_extra_epochs=st.integers(0, 2),
)
def test_truncation_keeps_the_common_prefix_and_converges(prefix, follower_suffix, leader_suffix, follower_extra_epochs):
    """Two replicas share a prefix; the follower then wrote in epochs the leader never
    saw; the leader was elected later. After the loop the follower is an exact prefix of
    the leader and kept the whole common prefix."""
    leader, follower = InMemoryPartitionLog(), InMemoryPartitionLog()
    epoch = 0
    for i, step in enumerate(prefix):
        epoch += step
        b = encode_batch([f"p{i}".encode()])
        leader.append_as_leader(b, epoch)
        follower.append_as_follower(leader.read(follower.log_end_offset, 1 << 30))
    common = leader.log_end_offset
    f_epoch = epoch + 1
    for j in range(follower_suffix):
        follower.append_as_leader(encode_batch([f"f{j}".encode()]), f_epoch + (j % (follower_extra_epochs + 1)))
    l_epoch = f_epoch + follower_extra_epochs + 1
    leader.assign_epoch_start(l_epoch, leader.log_end_offset)
    for j in range(leader_suffix):
        leader.append_as_leader(encode_batch([f"l{j}".encode()]), l_epoch)
    _sync(leader, follower)
    assert _content(follower) == _content(leader)
    assert follower.log_end_offset >= common
