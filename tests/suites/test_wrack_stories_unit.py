"""Fault stories and the rotation schedule, without a cluster: the schedule's order and calm
share, `mix` expansion, the schedule's delays counted from the end of the previous op, the
roles read from metadata, and each story's steps against a small model of a partition's
leadership (nodes and the broker are stand-ins here; tests/suites/test_wrack_stories_e2e.py plays
the stories on real brokers)."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

import pytest

import suites
from broker.triggers import TRIGGERS
from broker.triggers.steps import Isolate, Roles, Stop, Trigger
from clusters.node import NodeError
from contracts.generator import NEMESIS_THREAD, Context
from harness.faults import (
    MIX,
    ScheduleGenerator,
    expand,
    fault_packages,
    known_packages,
    rotates,
)
from nemesis.core import FaultOp, Nemesis
from nemesis.schedule import FaultPackage, rotation
from nemesis.targets import Metadata, PartitionInfo, partition_view
from suites.wrack import stories
from suites.wrack.faults import MIX as DEFAULT_MIX
from suites.wrack.leadercut import install_leader_cut

WRACK = suites.get("wrack")
TOPICS = {"t": 2}


# ---------------------------------------------------------------------- the schedule


def test_mix_expands_to_the_stories_and_generic_packages():
    assert expand([MIX], DEFAULT_MIX) == list(DEFAULT_MIX)
    assert expand(["kill", MIX], DEFAULT_MIX) == ["kill", *[n for n in DEFAULT_MIX if n != "kill"]]
    assert rotates([MIX]) and not rotates(["partition", "kill"])
    names = [p.name for p in fault_packages([MIX], WRACK, TOPICS)]
    assert {"last-replica-standing", "hw-truncation", "stale-hwm-leader", "wipe-during-expansion", "partition",
            "kill"} <= set(names)  # the mix's old names (lrs, leso, wipe-follower) stand for the triggers
    assert set(stories.STORIES) <= set(known_packages(WRACK, TOPICS))  # every story by name, old names too
    with pytest.raises(ValueError, match="unknown nemesis nope"):
        fault_packages(["nope"], WRACK, TOPICS)


def test_rotation_plays_every_package_once_per_round_with_calm_periods():
    flip = [FaultPackage(k, lambda rng, k=k: FaultOp(f"start-{k}"), FaultOp(f"stop-{k}")) for k in ("a", "b")]
    instant = [FaultPackage(k, lambda rng, k=k: FaultOp(k), None) for k in ("s1", "s2", "s3")]
    pkgs = flip + instant
    ops = list(islice(rotation(pkgs, 10.0, random.Random(3)), 700))
    starts = [op.f for _, op in ops if not op.f.startswith("stop-")]
    for r in range(0, 100 * len(pkgs), len(pkgs)):  # each round: every package once, a new order
        assert sorted(starts[r:r + len(pkgs)]) == ["s1", "s2", "s3", "start-a", "start-b"]
    assert len({tuple(starts[r:r + len(pkgs)]) for r in range(0, 100 * len(pkgs), len(pkgs))}) > 10
    calm = held = 0.0
    for (_, op0), (d1, op1) in zip(ops, ops[1:], strict=False):
        if op0.f.startswith("start-"):  # a flip-flop's stop follows its start, about `interval` later
            assert op1.f == "stop-" + op0.f[6:] and 5.0 <= d1 <= 15.0
            held += d1
        else:  # after a stop or an instant: a calm period of interval/3 +-50%
            assert 10 / 3 * 0.5 <= d1 <= 10 / 3 * 1.5
            calm += d1
    # each fault (held about `interval`) is followed by interval/3 without faults on average:
    # a quarter of the time is calm
    gaps = len(starts) - 1
    assert 0.23 < (calm / gaps) / (calm / gaps + 10.0) < 0.27
    assert 9.0 < held / sum(1 for f in starts if f.startswith("start-")) < 11.0


def test_schedule_delays_count_from_the_end_of_the_previous_op():
    pkgs = fault_packages(["lrs"], WRACK, TOPICS)
    g = ScheduleGenerator(pkgs, 4.0, random.Random(1), rotate=True)
    ctx = Context(0, random.Random(0), {NEMESIS_THREAD: "nemesis"}, frozenset([NEMESIS_THREAD]))
    op1 = g.op(ctx)
    assert op1["f"] == "last-replica-standing" and 0 < op1["time"] <= int(4.0 * 1.5 / 3 * 1e9)
    later = 60 * 10**9  # the story took a minute: the next calm period starts now
    op2 = g.op(Context(later, random.Random(0), {NEMESIS_THREAD: "nemesis"}, frozenset([NEMESIS_THREAD])))
    assert later < op2["time"] <= later + int(4.0 * 1.5 / 3 * 1e9)


def test_partition_view_names_roles_in_assignment_order():
    addrs = {f"n{i}": f"10.0.0.{i}" for i in range(1, 6)}
    md = Metadata({i: f"10.0.0.{i + 1}" for i in range(5)}, 0,
                  {("t", 0): PartitionInfo(leader=3, replicas=[3, 1, 4], isrs=[4, 3, 1])})
    v = partition_view(md, "t", 0, addrs)
    assert (v.leader, v.replicas, v.isr, v.followers, v.controller) == ("n4", ["n4", "n2", "n5"],
                                                                        ["n4", "n2", "n5"], ["n2", "n5"], "n1")


# ---------------------------------------------------------------------- stories on a model


@dataclass
class Model:
    """One partition's leadership, as the controller would move it (enough for the stories'
    waits): replicas n2, n3, n4 (assignment order), controller n1."""

    replicas: list[str] = field(default_factory=lambda: ["n2", "n3", "n4"])
    leader: str | None = "n2"
    isr: list[str] = field(default_factory=lambda: ["n2", "n3", "n4"])
    down: set[str] = field(default_factory=set)
    cut: set[str] = field(default_factory=set)  # nodes that hear nobody
    unclean: set[str] = field(default_factory=set)  # lost power: not electable from the ELR

    def lose(self, node: str) -> None:
        self.isr = [n for n in self.isr if n != node]
        if self.leader == node:
            self.leader = next((n for n in self.isr if n not in self.down), None)

    def settle(self) -> None:
        if self.leader is None and not self.isr:  # elected from the ELR
            self.leader = next((n for n in self.replicas if n not in self.down | self.cut | self.unclean), None)
            self.isr = [self.leader] if self.leader else []
        for n in list(self.isr):
            if n != self.leader and (n in self.cut or n in self.down):
                self.isr.remove(n)
        for n in self.replicas:
            if self.leader and n not in self.isr and n not in self.down and n not in self.cut and self.leader not in self.cut:
                self.isr = [r for r in self.replicas if r in self.isr or r == n]

    def metadata(self) -> Metadata:
        self.settle()
        ids = {f"n{i}": i - 1 for i in range(1, 6)}
        info = PartitionInfo(ids[self.leader] if self.leader else -1, [ids[r] for r in self.replicas],
                             [ids[r] for r in self.isr])
        return Metadata({i - 1: f"10.0.0.{i}" for i in range(1, 6)}, 0, {("t", 0): info})


class StandInNode:
    def __init__(self, name: str):
        self.name, self.address = name, f"10.0.0.{name[1:]}"


class StandInCluster:
    def __init__(self) -> None:
        self.nodes = [StandInNode(f"n{i}") for i in range(1, 6)]

    def node(self, name: str) -> StandInNode:
        return next(n for n in self.nodes if n.name == name)


class ModelDB:
    def __init__(self, model: Model):
        self.m = model

    def kill(self, node: Any) -> None:
        self.m.down.add(node.name)
        self.m.lose(node.name)

    stop = kill

    def start(self, node: Any) -> int:
        self.m.down.discard(node.name)
        if self.m.leader is None and node.name in self.m.isr:
            self.m.leader = node.name
        return 1

    def pause(self, node: Any) -> None: ...
    def resume(self, node: Any) -> None: ...
    def wipe(self, node: Any) -> None: ...
    def running(self, node: Any) -> bool:
        return node.name not in self.m.down

    def wait_ready(self, node: Any, timeout: float = 30.0) -> None:
        assert self.running(node)


class Events(list):
    def append(self, ev: dict[str, Any]) -> dict[str, Any]:  # type: ignore[override]
        super().append(ev)
        return ev


def model_nemesis(model: Model) -> tuple[Nemesis, Events]:
    ev = Events()
    nem = Nemesis(StandInCluster(), ModelDB(model), ev, rng=random.Random(1), metadata=model.metadata)  # type: ignore[arg-type]

    def partition(spec: Any) -> dict[str, Any]:
        if "isolate" in spec:  # the followers isolated from everyone leave the ISR
            model.cut |= set(nem.targets(spec["isolate"]))
        if "cut" in spec:  # the followers cut off from the leader leave the ISR (the model: from everyone)
            model.cut |= set(nem.targets(spec["cut"][1]))
        return {"spec": spec}

    def heal(_v: Any = None) -> dict[str, Any]:
        model.cut.clear()
        return {"healed": "network"}

    def power_loss(v: Any) -> dict[str, Any]:
        for n in nem.targets(v["nodes"]):
            model.down.add(n)
            model.lose(n)
            model.unclean.add(n)
            model.down.discard(n)
        return {"nodes": v["nodes"]}

    nem.register("start-partition", partition)
    nem.register("stop-partition", heal)
    nem.register("power-loss", power_loss)
    stories.install_stories(nem, lambda rng: [("t", 0)])
    return nem, ev


@pytest.fixture(autouse=True)
def fast_polls(monkeypatch):
    monkeypatch.setattr(stories, "POLL_S", 0.0)
    monkeypatch.setattr(stories, "TIME_SCALE", 0.001)

    def no_broker(address: str, **kw: Any) -> Metadata:  # no broker here: the Nemesis's source answers
        raise OSError(f"no broker at {address}")

    monkeypatch.setattr(stories, "node_metadata", no_broker)
    monkeypatch.setattr(stories.time, "sleep", lambda s: None)


def faults(ev: list[dict[str, Any]]) -> list[str]:
    return [e["f"] for e in ev if e["f"] != "story-step"]


def steps(ev: list[dict[str, Any]]) -> list[tuple[str, bool]]:
    return [(e["value"]["step"], e["value"]["ok"]) for e in ev if e["f"] == "story-step"]


def test_last_replica_standing_isolates_followers_waits_for_isr_then_power_loss_of_leader():
    m = Model()
    nem, ev = model_nemesis(m)
    nem.invoke(FaultOp("last-replica-standing"))
    assert faults(ev) == ["start-last-replica-standing", "start-partition", "power-loss", "stop-partition",
                          "stop-last-replica-standing"]
    assert ev[2]["value"]["spec"] == {"isolate": ["n3", "n4"]}
    assert ev[4]["value"]["nodes"] == ["n2"]
    assert ("isr-is-leader", True) in steps(ev) and ("healed", True) in steps(ev)
    assert "error" not in ev[-1]["value"] and not m.cut


def test_leader_cut_waits_for_the_leader_alone_and_power_loss_strikes_it():
    m = Model()
    nem, ev = model_nemesis(m)
    install_leader_cut(nem)
    nem.invoke(FaultOp("cut-leader", {"candidates": [["t", 0]]}))
    assert faults(ev) == ["start-partition", "cut-leader"]
    assert ev[0]["value"]["spec"] == {"cut": [["n2"], ["n3", "n4"]]}
    assert ev[1]["value"] | {"waited_s": 0} == {"topic": "t", "partition": 0, "leader": "n2", "followers": ["n3", "n4"],
                                               "keeps_controller": True, "isr_alone": True, "waited_s": 0}
    nem.invoke(FaultOp("power-loss", {"nodes": {"role": "lone-leader", "topics": ["t"], "else": "one"}}))
    assert m.unclean == {"n2"}


def test_leader_cut_with_a_follower_on_the_controllers_node_does_not_wait():
    m = Model(replicas=["n2", "n1", "n3"], isr=["n2", "n1", "n3"])  # the controller (n1) follows
    nem, ev = model_nemesis(m)
    install_leader_cut(nem)
    nem.invoke(FaultOp("cut-leader", {"candidates": [["t", 0]]}))
    assert ev[0]["value"]["spec"] == {"cut": [["n2"], ["n1", "n3"]]}
    assert ev[1]["value"]["keeps_controller"] is False and ev[1]["value"]["isr_alone"] is False
    assert ev[1]["value"]["waited_s"] < 1


def test_leader_cut_of_the_controllers_node_waits_only_if_it_keeps_its_quorum():
    # the leader is the active controller (n1); its followers n2 and n3 are the other two of
    # three voters: cut off from it, they elect a controller of their own, which fences it
    m = Model(replicas=["n1", "n2", "n3"], isr=["n1", "n2", "n3"], leader="n1")
    nem, ev = model_nemesis(m)
    nem.db.controller_nodes = lambda: [StandInNode(n) for n in ("n1", "n2", "n3")]
    install_leader_cut(nem)
    nem.invoke(FaultOp("cut-leader", {"candidates": [["t", 0]]}))
    assert ev[0]["value"]["spec"] == {"cut": [["n1"], ["n2", "n3"]]}
    assert ev[1]["value"]["keeps_controller"] is False and ev[1]["value"]["waited_s"] < 1
    # five voters: n1, n4 and n5 stay a majority; the followers leave the ISR, the leader stays
    m = Model(replicas=["n1", "n2", "n3"], isr=["n1", "n2", "n3"], leader="n1")
    nem, ev = model_nemesis(m)
    nem.db.controller_nodes = lambda: [StandInNode(f"n{i}") for i in range(1, 6)]
    install_leader_cut(nem)
    nem.invoke(FaultOp("cut-leader", {"candidates": [["t", 0]]}))
    assert ev[1]["value"]["keeps_controller"] is True and ev[1]["value"]["isr_alone"] is True


def test_hw_truncation_stops_leader_crash_restarts_the_new_one_and_starts_everything():
    m = Model()
    nem, ev = model_nemesis(m)
    nem.invoke(FaultOp("hw-truncation"))
    assert faults(ev) == ["start-hw-truncation", "start-partition", "stop", "kill", "start", "stop-partition",
                          "start", "stop-hw-truncation"]
    assert [e["value"]["nodes"] for e in ev if e["f"] == "start"] == [["n3"], ["n2"]]
    assert ev[2]["value"]["spec"] == {"drop": {"n4": ["n3", "n2"], "n3": ["n4"]}}
    assert [s for s in steps(ev) if s[0] in ("b-elected", "c-elected")] == [("b-elected", True), ("c-elected", True)]
    assert not m.down and nem.killed == set()


def test_a_restarted_node_is_awaited_before_the_next_step(monkeypatch):
    """The steps after a start count from a live broker; one that never answers is said
    (ready_s None) and the story goes on."""
    m = Model()
    nem, ev = model_nemesis(m)
    asked = []
    monkeypatch.setattr(ModelDB, "wait_ready", lambda self, node, timeout=30.0: asked.append(node.name))
    nem.invoke(FaultOp("hw-truncation"))
    played = ev[-1]["value"]["steps"]
    assert asked == ["n3", "n2"]
    assert [type(x["ready_s"]) for x in played if x.get("fault") == "start"] == [float, float]

    def never(self: Any, node: Any, timeout: float = 30.0) -> None:
        raise NodeError(f"{node.name}: wrack-broker exited")

    monkeypatch.setattr(ModelDB, "wait_ready", never)
    nem.invoke(FaultOp("hw-truncation"))
    played = ev[-1]["value"]["steps"]
    assert [x["ready_s"] for x in played if x.get("fault") == "start"] == [None, None]
    assert "error" not in ev[-1]["value"]


def test_leader_churn_changes_leader_three_times():
    m = Model()
    nem, ev = model_nemesis(m)
    nem.invoke(FaultOp("leader-churn"))
    assert faults(ev).count("kill") == 3 and faults(ev).count("start") == 3
    assert [s for s in steps(ev) if s[0].startswith("leader-")] == [("leader-2", True), ("leader-3", True),
                                                                     ("leader-4", True)]


def test_a_story_that_fails_undoes_its_faults_and_says_why():
    m = Model()
    nem, ev = model_nemesis(m)

    class Unknown:  # a step the real-node driver cannot play
        pass

    broken = Trigger("broken", "elr", "a trigger whose third step fails", Roles(followers=("b", "c")),
                     (Isolate("b"), Stop("c"), Unknown()))  # type: ignore[arg-type]
    stories.STORIES["broken"] = broken
    try:
        stories.install_stories(nem, lambda rng: [("t", 0)], ["broken"])
        nem.invoke(FaultOp("broken"))
    finally:
        del stories.STORIES["broken"]
    assert faults(ev) == ["start-broken", "start-partition", "stop", "stop-partition", "start", "stop-broken"]
    assert ev[-1]["value"]["error"].startswith("StoryError: a real-node story cannot play")
    assert not m.cut and not m.down


def test_a_story_without_the_roles_it_needs_does_nothing():
    m = Model(isr=["n2"])
    m.down = {"n3", "n4"}
    nem, ev = model_nemesis(m)
    nem.invoke(FaultOp("hw-truncation"))
    assert faults(ev) == ["start-hw-truncation", "stop-hw-truncation"]
    assert "no partition without a controller replica has a leader and 2 ISR followers" in ev[-1]["value"]["error"]


def test_waits_are_bounded():
    m = Model()
    nem, ev = model_nemesis(m)
    m.settle = lambda: None  # type: ignore[method-assign]  # the ISR never shrinks
    nem.invoke(FaultOp("last-replica-standing"))
    assert steps(ev) == [("roles", True), ("isr-is-leader", False)]
    assert faults(ev) == ["start-last-replica-standing", "start-partition", "stop-partition",
                          "stop-last-replica-standing"]


def test_rotation_plays_stories_first_in_each_round():
    stories_in_mix = {p.name: p.tier for p in fault_packages([MIX], WRACK, TOPICS) if p.name in TRIGGERS}
    assert stories_in_mix == dict.fromkeys(("last-replica-standing", "hw-truncation", "stale-hwm-leader",
                                            "wipe-during-expansion", "stale-alter-partition",
                                            "unclean-candidates", "lagging-follower-in-isr"), 0)
    # the mix's old names, with two generic packages (tier 1): each round plays the stories first
    pkgs = fault_packages(["lrs", "hw-truncation", "leso", "wipe-follower", "stale-alter-partition", "unclean-candidates",
                           "lagging-follower-in-isr", "kill", "partition"], WRACK, TOPICS)
    ops = [op for _, op in islice(rotation(pkgs, 10.0, random.Random(9)), 200)]
    starts = [op.f for op in ops if not (op.f in ("start", "stop-partition") and op.value in ("all", None))]
    n = len(pkgs)
    for r in range(0, len(starts) - n, n):
        assert set(starts[r:r + len(stories_in_mix)]) == set(stories_in_mix)


def test_lossy_stories_keep_their_losses_apart(monkeypatch):
    monkeypatch.setattr(stories, "LOSSY_GAP_S", 10000.0)  # 10 s at the tests' time scale: a loaded machine's delays fit
    m = Model()
    nem, ev = model_nemesis(m)

    def spacings() -> list[float]:
        return [e["value"]["waited_s"] for e in ev if e["f"] == "story-step" and e["value"]["step"] == "lossy-spacing"]

    nem.invoke(FaultOp("last-replica-standing"))
    assert nem.last_lossy is not None and spacings() == []  # the first loss waits for nothing
    nem.invoke(FaultOp("last-replica-standing"))  # right after: waits until LOSSY_GAP_S after the previous loss
    assert len(spacings()) == 1 and 0 < spacings()[0] <= stories.LOSSY_GAP_S * stories.TIME_SCALE


class VoterDB(ModelDB):
    def controller_nodes(self) -> list[StandInNode]:
        return [StandInNode(n) for n in ("n1", "n2", "n3")]


def test_wipe_follower_prefers_a_leader_outside_the_controller_quorum():
    """Cut from the active controller, a leader that is a voter calls an election and may
    become the controller: its proposal is never held, and the stale broker epoch never
    reaches the controller. The story picks a partition led by a non-voter when there is one."""
    ids = {f"n{i}": i - 1 for i in range(1, 6)}

    def md() -> Metadata:
        parts = {("t", 0): PartitionInfo(ids["n2"], [ids[n] for n in ("n2", "n4", "n5")], [ids[n] for n in ("n2", "n4", "n5")]),
                 ("t", 1): PartitionInfo(ids["n4"], [ids[n] for n in ("n4", "n5", "n2")], [ids[n] for n in ("n4", "n5", "n2")])}
        return Metadata({i - 1: f"10.0.0.{i}" for i in range(1, 6)}, 0, parts)

    nem = Nemesis(StandInCluster(), VoterDB(Model()), Events(), rng=random.Random(1), metadata=md)  # type: ignore[arg-type]
    story = stories.Story(nem, "wipe-follower")
    assert story.voters() == {"n1", "n2", "n3"}
    tp, v = story.choose([("t", 0), ("t", 1)], 2, prefer_leader_not=story.voters())
    assert tp == ("t", 1) and v.leader == "n4"
    assert story.choose([("t", 0)], 2, prefer_leader_not=story.voters())[0] == ("t", 0)  # only a voter leads: that one
    assert stories.Story(model_nemesis(Model())[0], "x").voters() == set()  # a DB without a quorum


def test_stories_prefer_a_partition_whose_replicas_leave_the_quorum_a_majority():
    """hw-truncation stops the leader and kills B: with both of them voters the quorum of
    three has one member left and C is never elected. A partition with at most one voter
    among its replicas comes first, whatever its leader."""
    ids = {f"n{i}": i - 1 for i in range(1, 6)}

    def md() -> Metadata:
        two = [ids[n] for n in ("n2", "n3", "n4")]
        one = [ids[n] for n in ("n4", "n3", "n5")]
        return Metadata({i - 1: f"10.0.0.{i}" for i in range(1, 6)}, 0,
                        {("t", 0): PartitionInfo(two[0], two, two), ("t", 1): PartitionInfo(one[0], one, one)})

    nem = Nemesis(StandInCluster(), VoterDB(Model()), Events(), rng=random.Random(1), metadata=md)  # type: ignore[arg-type]
    story = stories.Story(nem, "hw-truncation")
    v0, v1 = story.view(("t", 0)), story.view(("t", 1))
    assert not story.quorum_safe(v0) and story.quorum_safe(v1)
    assert story.choose([("t", 0), ("t", 1)], 2)[0] == ("t", 1)
    assert story.choose([("t", 0), ("t", 1)], 2, prefer_leader_not={"n4"})[0] == ("t", 1)  # safety first
    assert story.choose([("t", 0)], 2)[0] == ("t", 0)  # none safe: the first that fits
    assert stories.Story(model_nemesis(Model())[0], "x").quorum_safe(v0)  # no quorum: nothing to keep


def test_the_view_asks_the_active_controllers_node_not_whichever_broker(monkeypatch):
    """With a controller quorum, a story reads the partition from the broker beside the
    active controller: librdkafka may ask a broker the story cut off, whose cache is stale."""
    m = Model()
    stale = m.metadata()  # what an isolated broker still says: the full ISR
    m.cut = {"n3", "n4"}
    fresh = m.metadata()
    asked: list[str] = []

    def node_md(address: str, **kw: Any) -> Metadata:
        asked.append(address)
        return fresh

    class QuorumDB(ModelDB):
        def active_controller(self) -> str:
            return "10.0.0.3"

    monkeypatch.setattr(stories, "node_metadata", node_md)
    nem = Nemesis(StandInCluster(), QuorumDB(m), Events(), rng=random.Random(1), metadata=lambda: stale)  # type: ignore[arg-type]
    v = stories.Story(nem, "lrs").view(("t", 0))
    assert asked == ["10.0.0.3"] and v.isr == ["n2"] and v.controller == "n3"
    no_quorum = Nemesis(StandInCluster(), ModelDB(m), Events(), rng=random.Random(1), metadata=lambda: stale)  # type: ignore[arg-type]
    assert stories.Story(no_quorum, "lrs").view(("t", 0)).isr == ["n2", "n3", "n4"]  # nobody to ask: the source


def test_commits_without_a_cut_off_replica_are_awaited_by_offsets(monkeypatch):
    """`wait_commits_without`: done once the leader's high watermark is `count` past the
    cut-off replica's log end (both read from the nodes), not after a fixed time: the
    acknowledgements right after an ISR change may all be of records every replica had."""
    nem, ev = model_nemesis(Model())
    hwm = iter([90, 100, 149, 150])
    asked: list[tuple[str, bool]] = []

    def offset(address: str, topic: str, partition: int, log_end: bool = False, **kw: Any) -> int:
        asked.append((address, log_end))
        if address == "10.0.0.4" and not log_end:
            raise stories.TargetError("not the leader")  # a node that cannot answer: polled again
        return 100 if log_end else next(hwm)

    monkeypatch.setattr(stories, "node_offset", offset)
    s = stories.Story(nem, "t")
    assert s.wait_commits_without("w", ("t", 0), "n2", "n3", 50, 10)
    done = ev[-1]["value"]
    assert (done["step"], done["ok"], done["behind_end"], done["high_watermark"]) == ("w", True, 100, 150)
    assert ("10.0.0.3", True) in asked and ("10.0.0.2", False) in asked
    assert not s.wait_commits_without("w", ("t", 0), "n4", "n3", 50, 10)  # never answered: bounded
    assert ev[-1]["value"]["ok"] is False


@pytest.mark.parametrize("name", list(TRIGGERS))
def test_every_trigger_becomes_faults_on_named_nodes_and_is_undone(name, monkeypatch):
    """Each trigger played by the real-node driver with every wait met (the model moves no
    leadership for raw drops): its drops are grudges between node names (a frame, a size or
    `keep` as the vocabulary says), and the story heals everything it did."""
    m = Model()
    nem, ev = model_nemesis(m)
    met = lambda self, step, *a, **k: (self.step(step, ok=True), True)[1]  # noqa: E731
    monkeypatch.setattr(stories.Story, "wait", lambda self, step, tp, pred, timeout, bug_only=False: (
        self.step(step, ok=True), self.view(tp))[1])
    for poll in ("wait_dropped", "wait_live", "wait_commits_without", "wait_ahead"):
        monkeypatch.setattr(stories.Story, poll, met)
    nem.invoke(FaultOp(name))
    assert ev[0]["f"] == f"start-{name}" and ev[-1]["f"] == f"stop-{name}" and "error" not in ev[-1]["value"]
    names = {n.name for n in nem.cluster.nodes}
    partitioned = False
    for e in ev:
        if e["f"] == "start-partition":
            spec = e["value"]["spec"]
            if "drop" in spec:
                assert set(spec["drop"]) | {n for v in spec["drop"].values() for n in v} <= names, spec
                assert spec.get("frame") in (None, "FetchResponse", "AlterPartitionRequest")
                assert spec.get("min_bytes") in (None, stories.LARGE_BYTES)
                assert not spec.get("keep") or partitioned  # keep adds to a partition in force
            partitioned = True
        elif e["f"] == "stop-partition":
            partitioned = False
    assert not partitioned and not m.cut and not m.down and nem.killed == set() and nem.paused == set()
    steps_seen = [s for s, _ in steps(ev)]
    assert steps_seen[0] == "roles" and steps_seen[-1] == "healed"


def test_old_names_install_the_triggers_op():
    nem, ev = model_nemesis(Model())
    stories.install_stories(nem, lambda rng: [("t", 0)], ["lrs", "wipe-follower"])
    assert {"last-replica-standing", "wipe-during-expansion"} <= set(nem.handlers) and "lrs" not in nem.handlers
    assert stories.STORIES["leso"] is TRIGGERS["stale-hwm-leader"]
