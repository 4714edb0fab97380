"""The seed documents' stories on the simulation: safeguard on keeps acknowledged
writes, safeguard off loses them (and the invariants say why)."""

from __future__ import annotations

from broker.core import safeguards as sg
from broker.core.messages import NO_LEADER
from broker.core.metadata import RECOVERED
from broker.sim import scenarios as sc

OFF = frozenset


def values(acks):
    return sorted(a.value for a in acks)


def test_seed000_hw_truncation_loses_the_write_and_epochs_keep_it():
    kept = sc.hw_truncation()
    assert kept.final_leader == 3 and kept.lost == [] and kept.violations == []
    assert b"m1" in values(kept.acked)
    lost = sc.hw_truncation(OFF({sg.EPOCH_TRUNCATION}))
    assert values(lost.lost) == [b"m1"]
    assert "leader-completeness" in lost.violation_names()


def test_seed002_clean_elr_recovery_example_5_2_2():
    r = sc.clean_elr_recovery()
    s = r.steps
    assert (s["initial"].leader, s["initial"].isr, s["initial"].elr) == (1, (1, 2, 3), ())
    assert (s["2 removed"].isr, s["2 removed"].elr) == ((1, 3), ())
    assert (s["3 removed"].isr, s["3 removed"].elr) == ((1,), (3,))
    assert (s["3 elected"].leader, s["3 elected"].isr) == (3, (3,))
    assert (s["1 rejoined"].leader, s["1 rejoined"].isr, s["1 rejoined"].elr) == (3, (1, 3), ())
    assert r.lost == [] and r.violations == [] and len(r.acked) == 10 and r.unclean_events == []


def test_seed002_balanced_recovery_example_5_3_3():
    r = sc.balanced_recovery()
    s = r.steps
    assert (s["all fenced"].leader, s["all fenced"].isr, s["all fenced"].elr) == (NO_LEADER, (), (2, 3))
    assert (s["1 registered"].elr, s["1 registered"].last_known_elr) == ((2, 3), ())
    assert (s["2 registered"].elr, s["2 registered"].last_known_elr) == ((3,), (2,))
    assert (s["3 registered"].elr, s["3 registered"].last_known_elr) == ((), (2, 3))
    assert s["recovered"].leader == 2 and r.unclean_events == ["balanced unclean recovery"]
    assert r.lost == [] and len(r.acked) == 10
    assert (s["final"].leader_recovery_state, s["final"].isr) == (RECOVERED, (1, 2, 3))  # KIP-704: recovered, all back


def test_last_replica_standing_lost_without_elr_kept_with_it():
    kept = sc.last_replica_standing()
    assert kept.steps["ISR [1]"].elr == (3,) and kept.steps["1 fenced"].leader == 3
    assert kept.lost == [] and kept.violations == []
    lost = sc.last_replica_standing(OFF({sg.ELR}))
    assert lost.steps["1 fenced"].isr == (1,) and lost.steps["1 fenced"].leader == NO_LEADER
    assert lost.final_leader == 1 and values(lost.lost) == [b"r1", b"r2"]
    assert {"leader-completeness", "leader-candidate-completeness"} <= lost.violation_names()


def test_unclean_election_loses_acknowledged_writes():
    lost = sc.unclean_election(unclean=True)
    assert lost.final_leader == 3 and lost.unclean_events == ["unclean election"]
    assert values(lost.lost) == [b"r1", b"r2", b"r3"]
    assert (lost.steps["final"].leader_recovery_state, lost.steps["final"].isr) == (RECOVERED, (1, 2, 3))
    via_switch = sc.unclean_election(OFF({sg.CLEAN_ELECTION_ONLY}), unclean=False)
    assert values(via_switch.lost) == [b"r1", b"r2", b"r3"]
    kept = sc.unclean_election(unclean=False)
    assert kept.final_leader in (1, 2) and kept.lost == [] and kept.violations == []
    assert (kept.steps["final"].leader_recovery_state, kept.steps["final"].isr) == (RECOVERED, (1, 2, 3))


def test_leso_rule_keeps_a_lagging_follower_out_of_the_isr():
    kept = sc.leso_rule()
    assert kept.steps["3 back"].isr == (2,) and 3 not in kept.steps["3 back"].elr
    assert kept.lost == [] and kept.violations == []
    lost = sc.leso_rule(OFF({sg.LESO_CHECK}))
    assert lost.final_leader == 3 and values(lost.lost) == [b"A"]
    assert "leader-candidate-completeness" in lost.violation_names()


def test_kip_903_stale_broker_epoch_cannot_join_the_isr():
    kept = sc.stale_broker_epoch()
    assert kept.steps["stale proposal arrived"].isr == (1,)
    assert kept.lost == [] and kept.violations == []
    lost = sc.stale_broker_epoch(OFF({sg.BROKER_EPOCH_CHECK}))
    assert lost.steps["stale proposal arrived"].isr == (1, 2)
    assert lost.final_leader == 2 and len(lost.lost) == 4
    assert "leader-candidate-completeness" in lost.violation_names()


def test_stale_partition_epoch_alter_partition_is_refused():
    kept = sc.stale_partition_epoch()
    assert kept.steps["stale proposal arrived"].isr == (1,)
    assert kept.lost == [] and kept.violations == []
    lost = sc.stale_partition_epoch(OFF({sg.PARTITION_EPOCH_CHECK}))
    assert lost.steps["stale proposal arrived"].isr == (1, 3)
    assert lost.final_leader == 3 and values(lost.lost) == [b"s1", b"s2", b"s3"]
    assert "leader-candidate-completeness" in lost.violation_names()


def test_consumer_is_not_rewound_by_a_new_leader_with_a_lagging_hwm():
    """Regression (wrack test, acks=1 with the leader isolated; membership changes): a
    consumer fetch between the new leader's HWM and its LEO was OFFSET_OUT_OF_RANGE, and
    librdkafka reset the consumer to offset 0. Kafka answers it with no records."""
    r = sc.consumer_after_failover()
    assert r.leader_hwm_at_read == 6 and r.new_leader_hwm == 5 and r.position_on_new_leader == 6  # the story happened
    assert (r.steps["frozen"].leader, r.steps["frozen"].isr) == (r.steps["failover"].leader, (r.steps["failover"].leader,))
    assert r.rewinds == []
    assert [o for o, _ in r.reads] == list(range(9))
    assert [v for _, v in r.reads] == [b"a0", b"a1", b"a2", b"a3", b"a4", b"b5", b"c0", b"c1", b"c2"]
    assert r.violations == []


def test_an_idempotent_retry_at_a_new_leader_is_not_appended_twice():
    """KIP-98 across a failover: the retry of a batch the old leader committed (but whose
    answer was lost) reaches the new leader, which knows the producer's sequences from
    replication and answers with the first copy's offset."""
    r = sc.idempotent_retry_across_failover()
    assert r.first_answer is None  # the producer never heard of the first copy
    assert r.retry_answer is not None and r.retry_answer.error.name == "none" and r.retry_answer.base_offset == 3
    assert r.values == [b"s0", b"s1", b"s2", b"s3"]
    assert r.steps["failover"].leader != r.steps["created"].leader
    assert r.violations == []
