"""Where a broker sends its controller requests (`ControllerTarget`), and what a voter
that is not the active controller answers (broker/core/quorum_controller.py)."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from broker.core.controller import ControllerConfig
from broker.core.messages import BrokerRegistrationRequest, BrokerRegistrationResponse, NotController
from broker.core.quorum_controller import ControllerTarget, QuorumController
from broker.core.raft import RaftNode, Role
from broker.core.raft_messages import RaftFetchRequest, VoteRequest, VoteResponse

VOTERS = (100, 101, 102)
BROKER = 7


def test_a_broker_starts_at_its_own_controller_or_the_first_voter():
    assert ControllerTarget(VOTERS, BROKER).target == 100
    assert ControllerTarget((1, 2, 3), 2).target == 2


def test_not_controller_moves_to_the_named_leader_or_the_next_voter():
    t = ControllerTarget(VOTERS, BROKER)
    assert t.not_controller(100, -1, 1) and t.target == 101  # no leader known: the next voter
    assert t.not_controller(101, 102, 1) and t.target == 102  # the leader named
    assert not t.not_controller(100, -1, 1) and t.target == 102  # old news from a voter left behind


def test_a_voter_that_refuses_is_never_taken_for_the_leader():
    t = ControllerTarget(VOTERS, BROKER)
    t.not_controller(101, 100, 3)
    assert t.target == 100
    # the leader resigned (same epoch, it names nobody or itself): try the next voter
    assert t.not_controller(100, -1, 3) and t.target == 101
    t = ControllerTarget(VOTERS, BROKER)
    assert t.not_controller(100, 100, 3) and t.target == 101


def test_a_voter_left_in_an_old_epoch_does_not_keep_the_broker():
    t = ControllerTarget(VOTERS, BROKER)
    t.not_controller(100, 102, 5)
    t.link_lost(102)
    assert t.target == 100
    assert t.not_controller(100, -1, 3) and t.target == 102  # stale: back to the known leader


def test_a_combined_node_follows_its_own_controller_when_it_becomes_active():
    t = ControllerTarget((1, 2, 3), 2)
    t.not_controller(2, 1, 4)
    assert t.target == 1
    assert not t.activated(2, 3)  # an older epoch changes nothing
    assert t.activated(2, 5) and t.target == 2 and t.leader == 2


def test_a_lost_link_moves_on_only_from_the_target():
    t = ControllerTarget(VOTERS, BROKER)
    assert not t.link_lost(101) and t.target == 100
    assert t.link_lost(100) and t.target == 101
    assert t.link_lost(102) is False and t.link_lost(101) and t.target == 102
    assert t.link_lost(102) and t.target == 100


answers = st.lists(st.tuples(st.sampled_from(VOTERS), st.sampled_from((-1, *VOTERS)), st.integers(0, 6)), max_size=30)


@given(answers)
def test_the_target_is_a_voter_and_never_the_one_that_just_refused(events):
    t = ControllerTarget(VOTERS, BROKER)
    for src, leader, epoch in events:
        before = t.target
        resend = t.not_controller(src, leader, epoch)
        assert t.target in VOTERS
        assert t.target != src or src != before  # refused by the target: it moves
        assert resend == (src == before or t.target != before)
        assert t.leader != src


def _leader_of_fresh_quorum() -> QuorumController:
    """Node 100 wins an election; nobody has fetched its LeaderChangeRecord yet."""
    q = QuorumController(ControllerConfig(node_id=100), RaftNode(100, VOTERS, rng=random.Random(1)))
    acts = q.tick(q.next_deadline() or 0)
    req = next(s.message for s in acts.sends if isinstance(s.message, VoteRequest))
    q.handle(101, VoteResponse(101, req.candidate_epoch, -1, True), 3000)
    assert q.raft.role is Role.LEADER and q.controller is None
    return q


def test_a_leader_not_yet_active_keeps_requests_for_its_controller():
    q = _leader_of_fresh_quorum()
    acts = q.handle(BROKER, BrokerRegistrationRequest(1, BROKER, "inc-a"), 3001)
    assert not [s for s in acts.sends if s.to == BROKER]  # no "not controller, the leader is me"
    # the followers fetch the LeaderChangeRecord: it commits, the controller starts and
    # registers the broker; its answer waits for that record to commit too
    end = q.raft.end_offset
    for v in (101, 102):
        q.handle(v, RaftFetchRequest(1, v, q.epoch, end, q.epoch, 0), 3002)
    assert q.controller is not None and BROKER in q.controller.image.brokers
    sent = []
    for v in (101, 102):
        sent += q.handle(v, RaftFetchRequest(2, v, q.epoch, q.raft.end_offset, q.epoch, 0), 3003).sends
    assert [s.message.error.value for s in sent if isinstance(s.message, BrokerRegistrationResponse)] == [0]


def test_requests_kept_by_a_leader_that_resigns_are_refused_naming_nobody():
    q = _leader_of_fresh_quorum()
    q.handle(BROKER, BrokerRegistrationRequest(1, BROKER, "inc-a"), 3001)
    acts = q.tick(20000)  # check quorum: nobody fetched, it resigns
    assert q.raft.role is Role.RESIGNED
    assert [(s.to, s.message) for s in acts.sends if s.to == BROKER] == [(BROKER, NotController(-1, q.epoch))]
    acts = q.handle(BROKER, BrokerRegistrationRequest(2, BROKER, "inc-a"), 20001)
    assert [s.message for s in acts.sends] == [NotController(-1, q.epoch)]  # never itself
