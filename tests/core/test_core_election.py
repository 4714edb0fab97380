"""Election order and ELR bookkeeping (PartitionChangeBuilder; seed 002 cases A-G)."""

from __future__ import annotations

from broker.core.election import ElectionPolicy, change_partition
from broker.core.messages import NO_LEADER
from broker.core.metadata import RECOVERING, PartitionRegistration

REG = PartitionRegistration(replicas=(1, 2, 3), isr=(1, 2, 3), leader=1)
MIN2 = ElectionPolicy(min_isr=2)


def up(*ids):
    return lambda b: b in ids


def test_keeps_a_valid_leader_and_bumps_only_the_partition_epoch():
    res = change_partition(REG, target_isr=(1, 2), usable=up(1, 2, 3), policy=MIN2)
    assert res.registration.leader == 1 and res.registration.isr == (1, 2)
    assert (res.registration.leader_epoch, res.registration.partition_epoch) == (0, 1)
    assert not res.leader_changed


def test_no_change_is_none():
    assert change_partition(REG, target_isr=(3, 2, 1), usable=up(1, 2, 3), policy=MIN2) is None


def test_elects_the_first_usable_isr_member_in_assignment_order():
    res = change_partition(REG, target_isr=(3, 2), usable=up(2, 3), policy=MIN2)
    assert res.registration.leader == 2 and res.registration.leader_epoch == 1
    res = change_partition(REG, target_isr=(3, 2), usable=up(3), policy=MIN2)
    assert res.registration.leader == 3


def test_case_a_and_f_removal_goes_to_the_elr_only_below_min_isr():
    r1 = change_partition(REG, target_isr=(1, 3), usable=up(1, 2, 3), policy=MIN2).registration
    assert r1.elr == ()  # case F: ISR still >= MinISR
    r2 = change_partition(r1, target_isr=(1,), usable=up(1, 2, 3), policy=MIN2).registration
    assert r2.isr == (1,) and r2.elr == (3,)  # case A


def test_case_b_c_leader_fenced_elects_from_the_elr_and_keeps_the_old_leader_eligible():
    reg = PartitionRegistration(replicas=(1, 2, 3), isr=(1,), leader=1, elr=(3,))
    res = change_partition(reg, target_isr=(), usable=up(2, 3), policy=MIN2)
    r = res.registration
    assert r.leader == 3 and r.isr == (3,) and r.elr == (1,)
    assert r.leader_epoch == 1 and not res.unclean


def test_case_g_reaching_min_isr_clears_elr_and_last_known_elr():
    reg = PartitionRegistration(replicas=(1, 2, 3), isr=(3,), leader=3, elr=(1,), last_known_elr=(2,))
    r = change_partition(reg, target_isr=(1, 3), usable=up(1, 3), policy=MIN2).registration
    assert r.isr == (1, 3) and r.elr == () and r.last_known_elr == ()


def test_no_candidate_means_no_leader_and_the_elr_keeps_the_last_members():
    reg = PartitionRegistration(replicas=(1, 2, 3), isr=(3,), leader=3, elr=(2,))
    r = change_partition(reg, target_isr=(), usable=up(1), policy=MIN2).registration
    assert r.leader == NO_LEADER and r.isr == () and r.elr == (2, 3)


def test_unclean_shutdown_moves_an_elr_member_to_last_known_elr():
    reg = PartitionRegistration(replicas=(1, 2, 3), isr=(), leader=NO_LEADER, elr=(2, 3))
    r = change_partition(reg, target_isr=(), usable=up(), policy=MIN2, unclean_shutdown=frozenset({2})).registration
    assert r.elr == (3,) and r.last_known_elr == (2,)


def test_without_elr_the_isr_never_becomes_empty():
    reg = PartitionRegistration(replicas=(1, 2, 3), isr=(1,), leader=1)
    r = change_partition(reg, target_isr=(), usable=up(2, 3), policy=ElectionPolicy(2, elr=False)).registration
    assert r.isr == (1,) and r.leader == NO_LEADER and r.elr == ()


def test_unclean_election_picks_any_usable_replica_and_enters_recovering():
    reg = PartitionRegistration(replicas=(1, 2, 3), isr=(1,), leader=1)
    res = change_partition(reg, target_isr=(), usable=up(3), policy=ElectionPolicy(2, unclean=True))
    r = res.registration
    assert res.unclean and r.leader == 3 and r.isr == (3,) and r.elr == () and r.leader_recovery_state == RECOVERING


def test_clean_candidates_win_over_unclean_election():
    reg = PartitionRegistration(replicas=(1, 2, 3), isr=(1,), leader=1, elr=(2,))
    res = change_partition(reg, target_isr=(), usable=up(2, 3), policy=ElectionPolicy(2, unclean=True))
    assert res.registration.leader == 2 and not res.unclean


def test_forced_leader_from_log_inspection():
    reg = PartitionRegistration(replicas=(1, 2, 3), isr=(), leader=NO_LEADER, last_known_elr=(2, 3))
    res = change_partition(reg, target_isr=(), usable=up(2, 3), policy=MIN2, force_leader=2)
    assert res.unclean and res.registration.leader == 2 and res.registration.last_known_elr == ()
