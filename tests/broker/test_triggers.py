"""The bug triggers as data (broker/triggers): one name each, old names resolved, every role a
step names bound by the trigger's roles, every safeguard a trigger aims at a simulated one,
and the conditions evaluated on a view as the drivers see it."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from broker.core import safeguards as sg
from broker.triggers import ALIASES, TRIGGERS, resolve
from broker.triggers import steps as S


def named_roles(t: S.Trigger) -> set[str]:
    """Every role a trigger's steps name."""
    out: set[str] = set()
    for st in S.walk(t.steps):
        if isinstance(st, S.Drop):
            out |= set(st.rules) | {r for fs in st.rules.values() for r in fs}
        elif isinstance(st, S.Wait):
            c = st.cond
            out |= {getattr(c, a) for a in ("role", "other", "leader", "behind") if isinstance(getattr(c, a, None), str)}
            for x in (getattr(c, "who", None), getattr(c, "not_who", None)):
                if x is not None:
                    out |= set(S.roles_of(x))
        elif hasattr(st, "who"):
            out |= set(S.roles_of(st.who))  # type: ignore[attr-defined]
    return out


def test_one_name_per_trigger_and_old_names_resolve():
    assert len(TRIGGERS) == 8 and all(t.name == n for n, t in TRIGGERS.items())
    assert not set(ALIASES) & set(TRIGGERS)
    assert {ALIASES[a] for a in ("lrs", "leso", "wipe-follower", "leader-flap", "held-alter-partition",
                                 "restart-then-kill")} == {"last-replica-standing", "stale-hwm-leader",
                                                           "wipe-during-expansion", "leader-churn",
                                                           "stale-alter-partition", "hw-truncation"}
    assert resolve("lrs") is TRIGGERS["last-replica-standing"] is resolve("last-replica-standing")
    with pytest.raises(KeyError, match="unknown trigger 'nope'"):
        resolve("nope")


@pytest.mark.parametrize("name", list(TRIGGERS))
def test_every_role_a_step_names_is_bound(name):
    t = TRIGGERS[name]
    bound = {S.LEADER, S.FOLLOWERS, S.CONTROLLER, *t.roles.followers}
    assert named_roles(t) <= bound, named_roles(t) - bound
    assert t.roles.needed() >= 1 and (t.roles.nonvoter is None or t.roles.nonvoter in t.roles.followers)
    assert t.safeguard is None or sg.REGISTRY[t.safeguard].simulated  # the simulation can catch it


def test_lossy_triggers_are_those_that_lose_a_replicas_data():
    assert {n for n, t in TRIGGERS.items() if t.lossy} == {"last-replica-standing", "wipe-during-expansion"}
    assert {n for n, t in TRIGGERS.items() if t.power_loss} == {"last-replica-standing"}


@dataclass
class View:
    leader: str | None
    isr: list[str]


def test_view_conditions():
    roles = {S.LEADER: "n1", "b": "n2", "c": "n3", S.FOLLOWERS: ("n2", "n3")}
    v = View("n1", ["n1", "n2"])
    assert S.IsrIs(S.LEADER).holds(View("n1", ["n1"]), roles) and not S.IsrIs(S.LEADER).holds(v, roles)
    assert S.IsrIs((S.LEADER, "b")).holds(View("n1", ["n2", "n1"]), roles)  # a set
    assert S.InIsr("b").holds(v, roles) and S.NotInIsr("c").holds(v, roles)
    assert S.LeaderIs(S.LEADER).holds(v, roles) and not S.LeaderIs("b").holds(View(None, []), roles)
    assert S.NewLeader().holds(View("n2", ["n2"]), roles) and not S.NewLeader().holds(v, roles)
    assert not S.NewLeader((S.LEADER, "b")).holds(View("n2", ["n2"]), roles)
    assert S.All(S.HasLeader(), S.IsrSize(2)).holds(v, roles) and not S.HEALED.holds(View("n1", ["n1"]), roles)
    with pytest.raises(NotImplementedError):
        S.Live("b").holds(v, roles)  # a node condition: the drivers observe it


def test_drop_both_and_blocks():
    assert S.Drop.both("f", S.LEADER).rules == {"f": (S.LEADER,), S.LEADER: ("f",)}
    block = S.If(S.Wait("w", S.HasLeader(), 1), S.Stop("b"), S.Start("b"))
    assert block.steps == (S.Stop("b"), S.Start("b"))
    one = S.OneOf((S.Stop("b"),), (S.Kill("b"),), weights=(2, 1))
    assert one.alternatives == ((S.Stop("b"),), (S.Kill("b"),)) and one.weights == (2, 1)
    assert S.OneOf((S.Stop("b"),), ()).weights == (1.0, 1.0)
    assert [type(x).__name__ for x in S.walk((block, S.Repeat(2, one)))] == [
        "If", "Wait", "Stop", "Start", "Repeat", "OneOf", "Stop", "Kill"]
    assert S.Sleep("s", 1.0).sim_range() == (1.0, 1.0) and S.Wait("w", S.HasLeader(), 4, sim_timeout=2).sim_timeout_s() == 2
