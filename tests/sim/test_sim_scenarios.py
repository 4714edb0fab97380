"""The seed documents' stories and the bug triggers on the simulation: safeguard on keeps
acknowledged writes, safeguard off loses them (and the invariants say why). Each trigger
(broker/triggers, also played by the random runs and on real nodes) is played both ways on
the first cluster seed of `SEEDS` where it reaches its bug with its safeguard off, its steps'
registrations compared with what its definition says happens."""

from __future__ import annotations

import pytest

from broker.core import safeguards as sg
from broker.core.messages import NO_LEADER
from broker.core.metadata import RECOVERED
from broker.sim import scenarios as sc
from broker.triggers import TRIGGERS

OFF = frozenset
INVARIANTS = {"leader-completeness", "leader-candidate-completeness", "log-matching", "hwm-monotonicity",
              "one-leader-per-epoch", "acked-write-lost", "valid-controller-state"}


def values(acks):
    return sorted(a.value for a in acks)


SEEDS = range(1, 11)


def first_bite(name: str) -> tuple[sc.ScenarioResult, sc.ScenarioResult]:
    """(safeguard off, all on) on the first seed where the trigger breaks an invariant with
    its safeguard off (and loses an acknowledged write: leader-churn's losses are of records
    the HWM covered, not always acknowledged acks=all ones)."""
    t = TRIGGERS[name]
    for seed in SEEDS:
        lost = sc.trigger_scenario(name, OFF({t.safeguard}), seed)
        if lost.violations and (lost.lost or name == "leader-churn"):
            return lost, sc.trigger_scenario(name, seed=seed)
    pytest.fail(f"{name} reached no bug with {t.safeguard} off on seeds {SEEDS}")


AIMED = [name for name, t in TRIGGERS.items() if t.safeguard]  # the triggers of a safeguard's bug


@pytest.fixture(scope="module")
def played():
    """Each trigger aimed at a safeguard on its seed: (safeguard off, all on)."""
    return {name: first_bite(name) for name in AIMED}


@pytest.mark.parametrize("name", AIMED)
def test_each_trigger_breaks_an_invariant_with_its_safeguard_off_and_nothing_with_it_on(played, name):
    lost, kept = played[name]
    assert lost.violations and lost.violation_names() <= INVARIANTS, "\n".join(lost.log)
    assert kept.lost == [] and kept.violations == [], "\n".join(kept.log)
    assert len(kept.acked) > 20 and kept.steps["final"].isr == (1, 2, 3)  # healed, and writes went on


def test_last_replica_standing_loses_without_elr_and_elects_from_it_with(played):
    lost, kept = played["last-replica-standing"]
    leader, followers = kept.roles["leader"], set(kept.roles["followers"])
    assert kept.steps["isr-is-leader"].isr == (leader,) and set(kept.steps["isr-is-leader"].elr) == followers
    assert kept.final_leader in followers  # elected from the ELR; the lossy leader rejoined
    assert lost.steps["isr-is-leader"].elr == () and lost.final_leader == lost.roles["leader"]
    assert lost.lost and {"leader-completeness", "leader-candidate-completeness"} <= lost.violation_names()


def test_hw_truncation_loses_a_write_c_truncated_and_epochs_keep_it(played):
    for r in played["hw-truncation"]:
        b, c = r.roles["b"], r.roles["c"]
        assert r.steps["b-elected"].leader == b and r.steps["c-elected"].leader == c  # the trigger's elections
    lost, kept = played["hw-truncation"]
    assert lost.lost and lost.final_leader == lost.roles["c"] and "leader-completeness" in lost.violation_names()
    assert kept.lost == []


def test_stale_hwm_leader_lets_c_in_only_without_the_leso_check(played):
    lost, kept = played["stale-hwm-leader"]
    b, c = lost.roles["b"], lost.roles["c"]
    assert lost.steps["b-elected"].leader == b and c in lost.steps["c-in-isr"].isr and lost.final_leader == c
    assert lost.lost and "leader-candidate-completeness" in lost.violation_names()
    assert kept.steps["b-elected"].leader == kept.roles["b"] and "c-in-isr" not in kept.steps  # C stayed out


def test_wipe_during_expansion_lets_the_empty_follower_in_only_without_the_broker_epoch_check(played):
    lost, kept = played["wipe-during-expansion"]
    f = lost.roles["f"]
    assert f in lost.steps["f-in-isr"].isr and lost.steps["new-leader"].leader == f and lost.lost
    assert "f-in-isr" not in kept.steps and kept.steps["final"].leader == kept.roles["leader"]


def test_stale_alter_partition_is_applied_only_without_the_partition_epoch_check(played):
    lost, kept = played["stale-alter-partition"]
    for r in (lost, kept):
        leader, a = r.roles["leader"], r.roles["a"]
        assert r.steps["b-fenced-out"].isr == tuple(sorted((leader, a)))  # fenced, the ISR went on without B
    assert set(lost.steps["stale-isr"].isr) == {lost.roles["leader"], lost.roles["b"]}  # the stale request applied
    assert lost.steps["new-leader"].leader == lost.roles["b"] and lost.lost
    assert "stale-isr" not in kept.steps  # INVALID_UPDATE_VERSION


def test_leader_churn_moves_leadership_three_times(played):
    for r in played["leader-churn"]:
        leaders = [r.steps[f"leader-{n}"].leader for n in (2, 3, 4)]
        assert NO_LEADER not in leaders and all(x != y for x, y in zip(leaders, leaders[1:], strict=False))


def test_unclean_candidates_elect_the_follower_that_lacks_the_writes_only_when_unclean(played):
    lost, kept = played["unclean-candidates"]
    x = lost.roles["x"]
    assert lost.steps["x-elected"].leader == x and lost.unclean_events == ["unclean election"] and lost.lost
    assert "x-elected" not in kept.steps and kept.final_leader in (kept.roles["leader"], kept.roles["y"])
    # unclean.leader.election.enable=true, all safeguards on
    via_topic = next(r for seed in SEEDS if (r := sc.trigger_scenario("unclean-candidates", seed=seed, unclean=True)).lost)
    assert via_topic.unclean_events == ["unclean election"]
    assert (via_topic.steps["final"].leader_recovery_state, via_topic.steps["final"].isr) == (RECOVERED, (1, 2, 3))


def test_old_names_play_the_same_triggers():
    r = sc.trigger_scenario("lrs", OFF({sg.ELR}))  # the real-node story's name
    assert r.roles == sc.trigger_scenario("last-replica-standing", OFF({sg.ELR})).roles and r.lost


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


def test_the_lagging_follower_shape_loses_nothing_as_is_and_reaches_a_premature_expansion(monkeypatch):
    """lagging-follower-in-isr has no safeguard: on the broker as it is, the lagging follower
    stays out of the ISR and nothing is lost; on a broker that lets a follower in before it
    reaches the high watermark (KAFKA-4485's kind, patched in here), that follower is elected
    and committed writes are lost."""
    from broker.core.replica_isr import IsrRules
    for seed in (1, 2):
        kept = sc.trigger_scenario("lagging-follower-in-isr", seed=seed)
        assert kept.lost == [] and kept.violations == [], "\n".join(kept.log)
        assert "c-in-isr" not in kept.steps and kept.steps["final"].isr == (1, 2, 3)
    expand = IsrRules.maybe_expand_isr

    def premature(self, rid, f, image, now, ev):  # the follower's log end as if it were at the HWM
        saved = f.log_end_offset
        f.log_end_offset = max(saved, self.high_watermark)
        try:
            expand(self, rid, f, image, now, ev)
        finally:
            f.log_end_offset = saved
    monkeypatch.setattr(IsrRules, "maybe_expand_isr", premature)
    bit = sc.trigger_scenario("lagging-follower-in-isr", seed=1)
    assert "c-in-isr" in bit.steps and bit.steps["c-elected"].leader == bit.roles["followers"][1]
    assert bit.violations and bit.violation_names() <= INVARIANTS, "\n".join(bit.log)
