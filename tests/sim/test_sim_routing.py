"""The routing layer both shells run (broker/io/router.py `NodeRouter`): which link carries
which message, the durability order, the controller target, the waiters, what a lost link
means; and the simulation's links (broker/sim/links.py) that it routes over."""

from __future__ import annotations

from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode as E

from broker.core.messages import (
    Actions,
    AlterPartitionRequest,
    AlterPartitionResponse,
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    CreateTopicRequest,
    CreateTopicResponse,
    FetchRequest,
    FetchResponse,
    MetadataFetchRequest,
    MetadataResponse,
    NotController,
    ProduceRequest,
    TopicPartition,
)
from broker.core.quorum_controller import ControllerActivated
from broker.core.raft_messages import FlushLog, PersistQuorumState, RoleChanged, VoteRequest
from broker.io.effects import (
    BROKER,
    CONTROLLER,
    CloseLink,
    Deliver,
    Perform,
    PersistState,
    SyncLog,
    TargetMoved,
    ToClient,
    Transmit,
    Wake,
)
from broker.io.links import ROLE_ALTER_PARTITION, ROLE_BROKER, ROLE_CONTROLLER, ROLE_RAFT, LinkBook, LinkKey
from broker.io.router import NodeRouter
from broker.sim.cluster import SimCluster

TP = TopicPartition("t", 0)
VOTERS = (100, 101, 102)


@dataclass
class FakeBroker:
    """A broker core that answers each call with canned actions and records the calls."""

    calls: list[tuple] = field(default_factory=list)
    answer: Actions = field(default_factory=Actions)
    resend: list[object] = field(default_factory=list)  # what it sends the controller again

    def handle(self, src, msg, now):
        self.calls.append(("handle", src, msg))
        acts, self.answer = self.answer, Actions()
        return acts

    def connection_lost(self, node, now, outbound_only=False):
        self.calls.append(("connection_lost", node, outbound_only))
        return Actions()

    def controller_connection_lost(self, now):
        self.calls.append(("controller_connection_lost",))
        return Actions([], []) if not self.resend else _sends(*[(100, m) for m in self.resend])

    def alter_channel_lost(self, now):
        self.calls.append(("alter_channel_lost",))
        return Actions()


@dataclass
class FakeQuorum:
    answer: Actions = field(default_factory=Actions)

    def handle(self, src, msg, now):
        acts, self.answer = self.answer, Actions()
        return acts


def _sends(*pairs: tuple[object, object], other: tuple = ()) -> Actions:
    acts = Actions()
    for to, m in pairs:
        acts.send(to, m)  # type: ignore[arg-type]
    acts.other.extend(other)
    return acts


def router(node_id: int = 1, quorum: bool = False, **kw) -> tuple[NodeRouter, FakeBroker]:
    r = NodeRouter(node_id, VOTERS if not quorum else (node_id, 2, 3), **kw)
    b = FakeBroker()
    r.broker = b  # type: ignore[assignment]
    if quorum:
        r.quorum = FakeQuorum()  # type: ignore[assignment]
    return r, b


def transmits(effects) -> list[tuple[LinkKey, str]]:
    return [(e.key, type(e.message).__name__) for e in effects if isinstance(e, Transmit)]


# ---------------------------------------------------------------- which link carries what
def test_controller_requests_go_to_the_target_alter_partition_on_its_own_link():
    r, _ = router()
    hb, ap = BrokerHeartbeatRequest(1, 1, 5, 0), AlterPartitionRequest(2, 1, 5, TP, 0, 0, ())
    out = r.on_broker_actions(_sends((0, hb), (0, ap)), 0)  # the core's controller id is ignored
    assert transmits(out) == [
        (LinkKey(100, ROLE_CONTROLLER, True), "BrokerHeartbeatRequest"),
        (LinkKey(100, ROLE_ALTER_PARTITION, True), "AlterPartitionRequest"),
    ]


def test_a_combined_nodes_broker_reaches_its_own_controller_in_process():
    r, _ = router(quorum=True)
    assert r.target.target == 1
    out = r.on_broker_actions(_sends((1, MetadataFetchRequest(3, 1, 0))), 0)
    assert out == [Deliver(CONTROLLER, 1, MetadataFetchRequest(3, 1, 0))]


def test_replies_to_a_peer_go_on_the_link_it_opened_else_on_ours_else_nowhere():
    r, _ = router()
    resp = FetchResponse(7, ())
    assert transmits(r.on_broker_actions(_sends((2, resp)), 0)) == []
    r.links.put(LinkKey(2, ROLE_BROKER, True), "ours")
    assert transmits(r.on_broker_actions(_sends((2, resp)), 0)) == [
        (LinkKey(2, ROLE_BROKER, True), "FetchResponse")
    ]
    r.links.put(LinkKey(2, ROLE_BROKER, False), "theirs")
    assert transmits(r.on_broker_actions(_sends((2, resp)), 0)) == [
        (LinkKey(2, ROLE_BROKER, False), "FetchResponse")
    ]


def test_a_fetch_goes_on_a_link_this_broker_opens():
    r, _ = router()
    fetch = FetchRequest(8, 1, 5, ())
    assert transmits(r.on_broker_actions(_sends((3, fetch)), 0)) == [
        (LinkKey(3, ROLE_BROKER, True), "FetchRequest")
    ]


def test_a_clients_answer_wakes_its_waiter_else_goes_out_to_the_client():
    r, b = router()
    b.answer = _sends(("k1", MetadataResponse(9, (), ())))
    waiter = object()
    assert r.on_client("k1", ProduceRequest(9, TP, 1, b""), 0, waiter) == [
        Wake(waiter, MetadataResponse(9, (), ()))
    ]
    b.answer = _sends(("k1", MetadataResponse(10, (), ())))
    assert r.on_client("k1", ProduceRequest(10, TP, 1, b""), 0) == [
        ToClient("k1", MetadataResponse(10, (), ()))
    ]


def test_the_quorum_is_durable_before_it_sends_and_answers_brokers_on_their_links():
    r, _ = router(node_id=2, quorum=True, sync_log_each_call=True)
    r.links.put(LinkKey(5, ROLE_CONTROLLER, False), "ctl")
    r.links.put(LinkKey(5, ROLE_ALTER_PARTITION, False), "alter")
    state = PersistQuorumState(3, 2, 2)
    acts = _sends(
        (3, VoteRequest(3, 2, 0, 0)),
        (5, BrokerHeartbeatResponse(1, E.none)),
        (5, AlterPartitionResponse(2, TP, E.none)),
        (2, NotController(2, 3)),
        other=(state, FlushLog(4)),
    )
    out = r.on_quorum_actions(acts, 0)
    assert out[:3] == [PersistState(state), SyncLog(4), SyncLog(None)]
    assert transmits(out) == [
        (LinkKey(3, ROLE_RAFT, True), "VoteRequest"),
        (LinkKey(5, ROLE_CONTROLLER, False), "BrokerHeartbeatResponse"),
        (LinkKey(5, ROLE_ALTER_PARTITION, False), "AlterPartitionResponse"),
    ]
    assert Deliver(BROKER, 2, NotController(2, 3)) in out  # its own broker, in process


# ---------------------------------------------------------------- what a link may carry
def test_a_message_a_link_may_not_carry_closes_it():
    r, b = router(quorum=True)
    assert r.on_link_message(LinkKey(2, ROLE_BROKER, False), ProduceRequest(1, TP, 1, b""), 0) == [
        CloseLink(LinkKey(2, ROLE_BROKER, False), "unexpected ProduceRequest")
    ]
    # a controller-bound message naming another broker than the link's
    assert isinstance(
        r.on_link_message(LinkKey(2, ROLE_CONTROLLER, False), BrokerHeartbeatRequest(1, 3, 5, 0), 0)[0],
        CloseLink,
    )
    assert isinstance(
        r.on_link_message(LinkKey(9, ROLE_RAFT, True), VoteRequest(1, 9, 0, 0), 0)[0], CloseLink
    )
    assert b.calls == []
    r.on_link_message(LinkKey(2, ROLE_BROKER, False), FetchRequest(1, 2, 5, ()), 0)
    assert b.calls == [("handle", 2, FetchRequest(1, 2, 5, ()))]


def test_refused_links():
    r, _ = router()
    assert r.refuse_link(LinkKey(1, ROLE_BROKER, False)) == "a peer claims this node's id"
    assert r.refuse_link(LinkKey(2, ROLE_CONTROLLER, False)) == "no controller on this node"
    assert r.refuse_link(LinkKey(2, ROLE_BROKER, False)) is None


# ---------------------------------------------------------------- what a lost link means
def test_only_a_lost_link_the_peer_opened_drops_its_parked_fetches():
    r, b = router()
    r.on_link_lost(LinkKey(2, ROLE_BROKER, True), 0)
    r.on_link_lost(LinkKey(2, ROLE_BROKER, False), 0)
    assert b.calls == [("connection_lost", 2, True), ("connection_lost", 2, False)]


def test_a_lost_link_to_the_target_moves_it_and_sends_again_others_change_nothing():
    r, b = router()
    ap = AlterPartitionRequest(2, 1, 5, TP, 0, 0, ())
    b.resend = [ap]
    assert r.on_link_lost(LinkKey(101, ROLE_CONTROLLER, True), 0) == []  # not the target
    assert r.on_link_lost(LinkKey(100, ROLE_RAFT, True), 0) == []
    assert r.on_link_lost(LinkKey(5, ROLE_CONTROLLER, False), 0) == []
    out = r.on_link_lost(LinkKey(100, ROLE_CONTROLLER, True), 0)
    assert r.target.target == 101
    assert out[0] == Perform(BROKER, TargetMoved(101, 100, -1))
    assert transmits(out) == [(LinkKey(101, ROLE_ALTER_PARTITION, True), "AlterPartitionRequest")]
    assert r.on_link_lost(LinkKey(100, ROLE_ALTER_PARTITION, True), 0) == []  # the old target's
    r.on_link_lost(LinkKey(101, ROLE_ALTER_PARTITION, True), 0)
    assert b.calls == [("controller_connection_lost",), ("alter_channel_lost",)]


def test_a_send_that_fails_counts_as_a_lost_link_for_fetches_only():
    r, b = router()
    r.on_send_failed(LinkKey(100, ROLE_CONTROLLER, True), 0)
    r.on_send_failed(LinkKey(3, ROLE_BROKER, True), 0)
    assert b.calls == [("connection_lost", 3, True)]


# ---------------------------------------------------------------- the controller target
def test_not_controller_moves_the_target_and_forwarded_admin_requests_follow():
    r, b = router()
    req = CreateTopicRequest(40, "t", 1, 3, ())
    waiter = object()
    assert transmits(r.on_admin(req, waiter)) == [(LinkKey(100, ROLE_CONTROLLER, True), "CreateTopicRequest")]
    out = r.on_link_message(LinkKey(100, ROLE_CONTROLLER, True), NotController(102, 4), 0)
    assert r.target.target == 102 and b.calls == [("controller_connection_lost",)]
    assert transmits(out) == [(LinkKey(102, ROLE_CONTROLLER, True), "CreateTopicRequest")]
    answer = CreateTopicResponse(40, "t", E.none)
    assert r.on_link_message(LinkKey(102, ROLE_CONTROLLER, True), answer, 0) == [Wake(waiter, answer)]
    assert r.waiters.admin == {}


def test_a_combined_nodes_broker_follows_its_own_quorum_member():
    r, b = router(quorum=True)
    out = r.on_quorum_actions(_sends(other=(RoleChanged("follower", 5, 3),)), 0)
    assert r.target.target == 3 and Perform(BROKER, TargetMoved(3, 1, 5)) in out
    out = r.on_quorum_actions(_sends(other=(ControllerActivated(6, 10),)), 0)
    assert r.target.target == 1 and Perform(BROKER, TargetMoved(1, 3, 6)) in out
    assert b.calls == [("controller_connection_lost",), ("controller_connection_lost",)]


def test_a_book_keeps_the_current_link_per_key():
    book: LinkBook[str] = LinkBook()
    k = LinkKey(2, ROLE_BROKER, False)
    assert book.put(k, "a") is None and book.put(k, "b") == "a"
    assert not book.forget(k, "a") and book.get(k) == "b"  # a replaced link's loss is no news
    assert book.forget(k, "b") and book.get(k) is None


# ---------------------------------------------------------------- the simulation's links
def test_the_simulation_routes_over_links_that_a_kill_resets_and_a_fault_breaks():
    c = SimCluster(4)
    assert c.run_until_true(
        lambda: (
            c.controller is not None and sum(not b.fenced for b in c.controller.image.brokers.values()) == 3
        ),
        30000,
    )
    c.create_topic("t", 1, 3)
    leader = c.leader(TP)
    f = next(r for r in c.registration(TP).replicas if r != leader)
    assert c.run_until_true(lambda: c.link(f, leader) is not None, 5000)
    fetch_link = c.link(f, leader)
    assert c.link(leader, f, outbound=False) is fetch_link  # the leader took it as f's
    assert c.link(f, leader, ROLE_CONTROLLER) is None  # f's controller is a dedicated node
    assert not c.lose_link(f, 100, ROLE_RAFT)
    assert c.lose_link(f, leader)  # f's fetch link: f backs off and fetches on a new one
    assert c.link(f, leader) is None
    assert c.run_until_true(
        lambda: c.link(f, leader) is not None and c.link(leader, f, outbound=False) is c.link(f, leader), 5000
    )
    assert c.link(f, leader) is not fetch_link  # it replaced the lost one at the leader
    c.crash(f)  # the leader's host hears the reset
    c.run_for(10)
    assert c.link(leader, f, outbound=False) is None
    c.start_broker(f)
    assert c.run_until_true(
        lambda: f in c.registration(TP).isr and c.link(leader, f, outbound=False) is not None, 20000
    )
    assert c.produce_and_wait(TP, b"x") is not None
    assert c.violations() == []
