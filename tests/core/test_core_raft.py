"""The controller quorum's rules, one by one (broker/core/raft.py, KIP-595 style), and
properties of its log and of divergence repair."""

from __future__ import annotations

import random
from collections import deque
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from broker.core.messages import EpochEndOffset
from broker.core.metadata import LeaderChangeRecord
from broker.core.raft import TRANSITIONS, NotLeaderError, RaftConfig, RaftNode, Role
from broker.core.raft_log import RaftLog
from broker.core.raft_messages import (
    NO_LEADER,
    BeginQuorumEpochRequest,
    FlushLog,
    LogTruncated,
    PersistQuorumState,
    RaftEntry,
    RaftFetchRequest,
    RaftFetchResponse,
    VoteRequest,
    VoteResponse,
)


def log_of(*epochs: int, tag: str = "r") -> RaftLog:
    return RaftLog([RaftEntry(e, f"{tag}{o}") for o, e in enumerate(epochs)])


def node(nid: int, voters=(1, 2, 3), log: RaftLog | None = None, state=None, now=0, **cfg) -> RaftNode:
    return RaftNode(nid, voters, log or RaftLog(), RaftConfig(**cfg), random.Random(nid), state, now)


class Net:
    """Delivers every message at once, in order, at a fixed time; ticks nodes whose
    deadline is due (an append's pending work)."""

    def __init__(self, *nodes: RaftNode, now: int = 0) -> None:
        self.nodes = {n.node_id: n for n in nodes}
        self.now = now
        self.down: set[int] = set()
        self.q: deque = deque()
        self.seen: list[tuple[int, int, object]] = []
        self.truncations: list[LogTruncated] = []

    def push(self, src: int, acts) -> None:
        self.truncations += [a for a in acts.other if isinstance(a, LogTruncated)]
        for s in acts.sends:
            self.q.append((src, s.to, s.message))

    def run(self, limit: int = 10000) -> None:
        for _ in range(limit):
            for n in self.nodes.values():
                if n.node_id not in self.down and (d := n.next_deadline()) is not None and d <= self.now:
                    self.push(n.node_id, n.tick(self.now))
            if not self.q:
                return
            src, dst, msg = self.q.popleft()
            self.seen.append((src, dst, msg))
            if dst in self.nodes and dst not in self.down and src not in self.down:
                self.push(dst, self.nodes[dst].handle(src, msg, self.now))
        raise AssertionError("messages still flowing")

    def elect(self, nid: int) -> None:
        """Let `nid` time out first and win."""
        n = self.nodes[nid]
        self.now = max(self.now, n._election_deadline or 0)
        self.push(nid, n.tick(self.now))
        self.run()


def trio(**cfg) -> list[RaftNode]:
    """Three voters; node 1's election timeout comes first."""
    return [node(1, **cfg), node(2, now=2000, **cfg), node(3, now=2000, **cfg)]


def sends_of(acts, kind):
    return [s for s in acts.sends if isinstance(s.message, kind)]


# ------------------------------------------------------------ states
def test_only_a_candidate_becomes_leader_and_every_role_has_its_row():
    assert set(TRANSITIONS) == set(Role)
    assert [r for r, to in TRANSITIONS.items() if Role.LEADER in to] == [Role.CANDIDATE]
    assert Role.VOTED not in TRANSITIONS[Role.VOTED]  # a second vote in an epoch is impossible


def test_restart_resumes_from_the_persisted_quorum_state():
    assert node(1, state=PersistQuorumState(4, 1, 1)).role is Role.RESIGNED
    assert node(1, state=PersistQuorumState(4, 2, 2)).role is Role.FOLLOWER
    assert node(1, state=PersistQuorumState(4, NO_LEADER, 3)).role is Role.VOTED
    assert node(1, state=PersistQuorumState(4, NO_LEADER, 1)).role is Role.UNATTACHED


def test_unknown_unsafe_switch_is_rejected():
    with pytest.raises(ValueError, match="unknown unsafe switch 'nope'"):
        RaftConfig(unsafe=frozenset({"nope"}))


# ------------------------------------------------------------ elections
def test_a_single_voter_elects_itself_and_commits_its_appends():
    n = node(1, voters=(1,))
    acts = n.tick(n._election_deadline)
    assert n.role is Role.LEADER and n.epoch == 1
    assert n.log.entries[0] == RaftEntry(1, LeaderChangeRecord(1, 1, (1,)))
    assert FlushLog(1) in acts.other and n.committed_offset == 1
    assert n.append("a") == 1 and n.committed_offset == 1
    assert n.next_deadline() == n._now  # the append is pending work
    acts = n.tick(n._now)
    assert FlushLog(2) in acts.other and n.committed_offset == 2
    assert n.read_from(1, 10) == ("a",)


def test_a_candidate_persists_its_vote_for_itself_before_asking():
    n = node(1)
    acts = n.tick(n._election_deadline)
    assert n.role is Role.CANDIDATE and (n.epoch, n.voted_for) == (1, 1)
    assert PersistQuorumState(1, NO_LEADER, 1) in acts.other
    assert sorted(s.to for s in sends_of(acts, VoteRequest)) == [2, 3]
    assert acts.sends[0].message == VoteRequest(1, 1, -1, 0)


def test_a_voter_votes_once_per_epoch_and_persists_the_vote():
    v = node(2)
    acts = v.handle(1, VoteRequest(1, 1, -1, 0), 0)
    assert acts.sends[0].message == VoteResponse(2, 1, NO_LEADER, True)
    assert PersistQuorumState(1, NO_LEADER, 1) in acts.other and v.role is Role.VOTED
    again = v.handle(1, VoteRequest(1, 1, -1, 0), 1)
    assert again.sends[0].message.vote_granted  # the same candidate may ask again
    other = v.handle(3, VoteRequest(1, 3, -1, 0), 2)
    assert not other.sends[0].message.vote_granted and v.voted_for == 1


def test_forget_vote_switch_grants_a_second_vote():
    v = node(2, unsafe=frozenset({"forget-vote"}))
    v.handle(1, VoteRequest(1, 1, -1, 0), 0)
    assert v.handle(3, VoteRequest(1, 3, -1, 0), 1).sends[0].message.vote_granted


@pytest.mark.parametrize(
    ("voter_epochs", "cand_last_epoch", "cand_end", "granted"),
    [
        ((1, 1, 2), 2, 3, True),  # equal logs
        ((1, 1, 2), 2, 2, False),  # same last epoch, shorter
        ((1, 1, 2), 1, 5, False),  # longer but older last epoch
        ((1, 1, 2), 3, 1, True),  # newer last epoch wins however short
    ],
)
def test_votes_go_only_to_logs_at_least_as_up_to_date(voter_epochs, cand_last_epoch, cand_end, granted):
    v = node(2, log=log_of(*voter_epochs), state=PersistQuorumState(3, NO_LEADER, NO_LEADER))
    resp = v.handle(1, VoteRequest(4, 1, cand_last_epoch, cand_end), 0).sends[0].message
    assert resp.vote_granted is granted and v.epoch == 4
    unsafe = node(2, log=log_of(*voter_epochs), state=PersistQuorumState(3, NO_LEADER, NO_LEADER),
                  unsafe=frozenset({"vote-without-log-check"}))
    assert unsafe.handle(1, VoteRequest(4, 1, cand_last_epoch, cand_end), 0).sends[0].message.vote_granted


def test_a_stale_candidate_is_refused_and_told_the_epoch():
    v = node(2, state=PersistQuorumState(5, 3, 3))
    resp = v.handle(1, VoteRequest(4, 1, 9, 99), 0).sends[0].message
    assert resp == VoteResponse(2, 5, 3, False)


def test_election_with_three_voters_then_replication_and_commit():
    nodes = trio()
    net = Net(*nodes)
    net.elect(1)
    leader = nodes[0]
    assert leader.role is Role.LEADER and [n.role for n in nodes[1:]] == [Role.FOLLOWER] * 2
    assert any(isinstance(m, BeginQuorumEpochRequest) for _, _, m in net.seen)
    assert all(n.leader_id == 1 and n.epoch == 1 for n in nodes)
    assert all(n.committed_offset == 1 for n in nodes)  # the LeaderChangeRecord
    for v in "abc":
        leader.append(v)
    net.run()
    assert all(n.read_from(0, 10)[1:] == ("a", "b", "c") and n.committed_offset == 4 for n in nodes)


def test_append_on_a_non_leader_names_the_leader():
    n = node(2, state=PersistQuorumState(3, 1, 1))
    with pytest.raises(NotLeaderError) as e:
        n.append("x")
    assert (e.value.leader_id, e.value.epoch) == (1, 3)


def test_a_higher_epoch_steps_the_leader_down():
    nodes = trio()
    net = Net(*nodes)
    net.elect(1)
    acts = nodes[0].handle(3, VoteRequest(2, 3, 1, 1), net.now)
    assert nodes[0].role is Role.VOTED and nodes[0].epoch == 2
    with pytest.raises(NotLeaderError):
        nodes[0].append("x")
    assert PersistQuorumState(2, NO_LEADER, 3) in acts.other


def test_a_follower_that_loses_its_leader_stands_after_the_fetch_timeout():
    nodes = trio()
    net = Net(*nodes)
    net.elect(1)
    f = nodes[1]
    deadline = f._fetch_deadline
    f.tick(deadline - 1)
    assert f.role is Role.FOLLOWER
    acts = f.tick(deadline)
    assert f.role is Role.CANDIDATE and f.epoch == 2 and sends_of(acts, VoteRequest)


def test_pre_vote_keeps_the_epoch_and_is_refused_while_the_leader_is_heard():
    nodes = trio(pre_vote=True)
    net = Net(*nodes)
    net.elect(1)
    assert nodes[0].role is Role.LEADER and nodes[0].epoch == 1  # prospective, then candidate
    f2, f3 = nodes[1], nodes[2]
    acts = f2.tick(f2._fetch_deadline)
    assert f2.role is Role.PROSPECTIVE and f2.epoch == 1
    req = sends_of(acts, VoteRequest)[0].message
    assert req.pre_vote and req.candidate_epoch == 2
    heard = f3._fetch_deadline - 1  # f3 still hears the leader
    assert not f3.handle(2, req, heard).sends[0].message.vote_granted
    assert f3.epoch == 1 and f3.role is Role.FOLLOWER
    late = f3._fetch_deadline
    f3.tick(late)  # f3 gives up on the leader too
    assert f3.handle(2, req, late).sends[0].message.vote_granted and f3.epoch == 1


def test_check_quorum_makes_a_lonely_leader_resign_then_stand_again():
    nodes = trio()
    net = Net(*nodes)
    net.elect(1)
    leader = nodes[0]
    t = leader.next_deadline()
    while leader.role is Role.LEADER:
        leader.tick(t)
        t = leader.next_deadline()
    assert leader.role is Role.RESIGNED and leader.leader_id == 1
    with pytest.raises(NotLeaderError):
        leader.append("x")
    leader.tick(leader._election_deadline)
    assert leader.role is Role.CANDIDATE and leader.epoch == 2


# ------------------------------------------------------------ replication
def _leader_with(epochs, epoch, voters=(1, 2, 3), check_quorum=False, **cfg) -> RaftNode:
    """Node 1 as leader of `epoch` over a log of `epochs` (its LeaderChange appended),
    elected before time 0."""
    state = PersistQuorumState(epoch - 1, NO_LEADER, NO_LEADER)
    n = node(1, voters, log=log_of(*epochs, tag="L"), state=state, now=-10_000, check_quorum=check_quorum, **cfg)
    t = n._election_deadline
    n.tick(t)
    for v in voters[1:]:
        n.handle(v, VoteResponse(v, epoch, NO_LEADER, True), t)
    n.tick(t)
    assert n.role is Role.LEADER and n.epoch == epoch
    return n


def test_the_leader_sends_diverging_epoch_and_the_follower_truncates_to_the_common_prefix():
    leader = _leader_with((1, 1, 2, 2), 4)  # log 1 1 2 2 4
    f = node(2, log=RaftLog([*leader.log.entries[:2], RaftEntry(1, "F2"), RaftEntry(3, "F3")]), state=PersistQuorumState(4, 1, 1))
    net = Net(leader, f)
    net.push(2, f.tick(0))
    net.run()
    assert [e.epoch for e in f.log.entries] == [1, 1, 2, 2, 4]
    assert f.log.entries == leader.log.entries
    diverging = [m.diverging_epoch for _, _, m in net.seen if isinstance(m, RaftFetchResponse) and m.diverging_epoch]
    assert diverging[0].epoch == 2 and diverging[0].end_offset == 4  # leader's end of epoch 2 (<= 3)


def test_divergence_check_can_be_switched_off_and_then_logs_do_not_match():
    leader = _leader_with((1, 1, 2, 2), 4, unsafe=frozenset({"skip-divergence-check"}))
    f = node(2, log=RaftLog([*leader.log.entries[:2], RaftEntry(1, "F2"), RaftEntry(3, "F3")]), state=PersistQuorumState(4, 1, 1))
    net = Net(leader, f)
    net.push(2, f.tick(0))
    net.run()
    assert f.log.entries[:4] != leader.log.entries[:4] and f.log.entries[4] == leader.log.entries[4]


def test_the_hwm_moves_only_over_an_entry_of_the_leaders_epoch():
    leader = _leader_with((1, 1, 2), 5)  # old entries 0..2 uncommitted, LeaderChange at 3
    assert leader.committed_offset == 0
    ack = leader.handle(2, RaftFetchRequest(1, 2, 5, 3, 2), 0)  # voter 2 holds 0..2, not 3
    assert leader.committed_offset == 0
    assert ack.sends[0].message.entries == (leader.log.entries[3],)
    leader.handle(2, RaftFetchRequest(2, 2, 5, 4, 5), 0)
    assert leader.committed_offset == 4  # the LeaderChange commits everything before it
    unsafe = _leader_with((1, 1, 2), 5, unsafe=frozenset({"commit-old-epoch"}))
    unsafe.handle(2, RaftFetchRequest(1, 2, 5, 3, 2), 0)
    assert unsafe.committed_offset == 3


def test_a_follower_flushes_before_its_fetch_acknowledges():
    leader = _leader_with((), 1)
    leader.append("a")
    leader.tick(0)
    f = node(2, state=PersistQuorumState(1, 1, 1))
    f.tick(0)
    resp = leader.handle(2, RaftFetchRequest(1, 2, 1, 0, -1), 0).sends[0].message
    acts = f.handle(1, replace(resp, correlation_id=f._inflight.correlation_id), 0)
    fetch = sends_of(acts, RaftFetchRequest)[0].message
    assert fetch.fetch_offset == 2 and FlushLog(2) in acts.other


def test_truncation_is_reported():
    f = node(2, log=log_of(1, 3, tag="F"), state=PersistQuorumState(4, 1, 1))
    f.tick(0)
    acts = f.handle(1, RaftFetchResponse(f._inflight.correlation_id, ErrorCode.none, 4, 1, 0, 2, (), EpochEndOffset(1, 1)), 0)
    assert LogTruncated(2, 1, 4) in acts.other and f.log.end_offset == 1


def test_a_parked_fetch_is_answered_by_the_next_append_or_its_timeout():
    leader = _leader_with((), 1)
    leader.handle(2, RaftFetchRequest(1, 2, 1, 1, 1, max_wait_ms=500), 10)
    acts = leader.handle(2, RaftFetchRequest(2, 2, 1, 1, 1, max_wait_ms=500), 10)
    assert not acts.sends  # nothing new: parked
    leader.append("a")
    acts = leader.tick(11)
    assert [s.message.entries for s in sends_of(acts, RaftFetchResponse)] == [(RaftEntry(1, "a"),)]
    acts = leader.handle(2, RaftFetchRequest(3, 2, 1, 2, 1, max_wait_ms=500), 12)
    assert acts.sends[0].message.high_watermark == 2  # HWM news goes at once
    assert not leader.handle(2, RaftFetchRequest(4, 2, 1, 2, 1, max_wait_ms=500), 12).sends
    assert leader.next_deadline() <= 512
    acts = leader.tick(512)
    assert [s.message.correlation_id for s in acts.sends if isinstance(s.message, RaftFetchResponse)] == [4]


def test_a_fetch_in_an_old_epoch_is_fenced_and_told_the_leader():
    leader = _leader_with((), 3)
    resp = leader.handle(2, RaftFetchRequest(1, 2, 2, 0, -1), 0).sends[0].message
    assert (resp.error, resp.leader_epoch, resp.leader_id) == (ErrorCode.fenced_leader_epoch, 3, 1)


# ------------------------------------------------------------ observers
def test_an_observer_finds_the_leader_gets_only_committed_entries_and_never_votes():
    nodes = trio()
    obs = node(100)
    assert not obs.is_voter
    net = Net(*nodes, obs)
    net.elect(1)
    net.down = {3}
    nodes[0].append("a")
    net.run()
    net.now += 600  # long polls time out; the observer asks a voter, is redirected
    net.run()
    assert obs.role is Role.FOLLOWER and obs.leader_id == 1
    assert obs.log.end_offset <= nodes[0].committed_offset
    assert not obs.handle(2, VoteRequest(9, 2, 9, 9), net.now).sends[0].message.vote_granted
    assert obs.epoch == 1 and obs.role is Role.FOLLOWER
    obs.tick(10**6)
    assert obs.role in (Role.UNATTACHED, Role.FOLLOWER)  # never a candidate


# ------------------------------------------------------------ properties
epochs_st = st.lists(st.integers(1, 6), max_size=12).map(sorted)


@given(epochs_st, st.integers(-1, 8))
def test_end_offset_for_epoch_matches_a_scan(epochs, asked):
    log = log_of(*epochs)
    have = [e for e in epochs if e <= asked]
    expected = (have[-1], max(i for i, e in enumerate(epochs) if e == have[-1]) + 1) if have else (-1, 0)
    assert log.end_offset_for_epoch(asked) == expected


@given(epochs_st, st.integers(0, 12))
def test_truncation_keeps_the_epoch_index(epochs, to):
    log = log_of(*epochs)
    log.truncate(to)
    assert [e.epoch for e in log.entries] == epochs[:to]
    assert log.last_epoch == (epochs[:to][-1] if epochs[:to] else -1)
    assert log.end_offset_for_epoch(99) == (log.last_epoch, log.end_offset)


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_fetching_repairs_any_divergence_without_losing_the_common_prefix(data):
    """A leader and a follower sharing a prefix, then each with entries of epochs the
    other never saw: fetching makes them equal, and no truncation cuts the prefix."""
    common = data.draw(st.lists(st.integers(1, 3), max_size=6).map(sorted))
    top = common[-1] if common else 1
    later = data.draw(st.lists(st.booleans(), min_size=4, max_size=4))  # epochs top+1.. : whose
    lead_epochs = [top + 1 + i for i, mine in enumerate(later) if mine]
    fol_epochs = [top + 1 + i for i, mine in enumerate(later) if not mine]
    if data.draw(st.booleans()):  # one side may go on with the last common epoch
        (lead_epochs if data.draw(st.booleans()) else fol_epochs).insert(0, top)
    lead_tail = [e for e in lead_epochs for _ in range(data.draw(st.integers(0, 2)))]
    fol_tail = [e for e in fol_epochs for _ in range(data.draw(st.integers(0, 2)))]
    leader = _leader_with((*common, *lead_tail), 9)
    f_log = RaftLog([*leader.log.entries[: len(common)], *(RaftEntry(e, f"F{i}") for i, e in enumerate(fol_tail))])
    f = node(2, log=f_log, state=PersistQuorumState(9, 1, 1))
    net = Net(leader, f)
    net.push(2, f.tick(0))
    net.run()
    assert f.log.entries == leader.log.entries
    assert all(t.to >= len(common) for t in net.truncations)
