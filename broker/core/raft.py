"""The controller quorum: one node of a Raft group (KIP-595, as KRaft), sans-IO.

`RaftNode(node_id, voters, log, config, rng, state, now_ms)` is a voter (it may vote,
stand and lead) or, when `node_id` is not in `voters`, an observer (a broker: it fetches
the committed log from the leader, never votes). Like the other core machines,
`handle(src, msg, now_ms)` and `tick(now_ms)` return `Actions`; `next_deadline()` says
when to call `tick` next (the current time when work is pending, e.g. after `append`).
The shell performs `Actions.other` (`PersistQuorumState`, `FlushLog`, in order) before it
sends `Actions.sends`.

Rules (docs/broker-raft.md):
- Epochs only grow; a message from a higher epoch moves the node into it. In an epoch a
  voter votes at most once, for a candidate whose log is at least as up to date
  (last epoch, then end offset); the vote is persisted before it is sent.
- Timeouts are randomised from the injected `rng`: an unattached voter or a candidate
  stands after `election_timeout_ms` plus jitter, a follower after `fetch_timeout_ms`
  without a successful fetch. With `pre_vote` (KIP-996) it first asks for pre-votes.
- A new leader appends a `LeaderChangeRecord` and sends `BeginQuorumEpochRequest`.
  Replication is pull: followers send `RaftFetchRequest(epoch, fetch_offset,
  last_fetched_epoch)`; the leader answers entries, or a `diverging_epoch` (its end
  offset for that epoch) on which the follower truncates and fetches again.
- The high watermark is the largest offset a majority of voters holds durably (the
  leader counts its own flushed end); it only moves to an offset whose entry is of the
  leader's epoch (Raft: commit only your own epoch's entries, earlier ones with them).
- With `check_quorum`, a leader without fetches from a majority for 1.5 fetch timeouts
  resigns. Observers get only committed entries and never count.

`MetadataQuorum` (controller.py) on top: `end_offset`, `committed_offset` (the HWM),
`append(record)` (leader only, else `NotLeaderError`), `read_from(offset, n)`.
`RaftConfig.unsafe` switches single rules off, for tests of the simulation's oracle.
"""

from __future__ import annotations

import enum
import random
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode

from broker.core.messages import Actions, EpochEndOffset
from broker.core.metadata import LeaderChangeRecord
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
    RoleChanged,
    VoteRequest,
    VoteResponse,
)


class Role(enum.Enum):
    UNATTACHED = "unattached"  # epoch known, no leader, no vote (yet) in it
    VOTED = "voted"  # voted for another candidate in this epoch
    PROSPECTIVE = "prospective"  # asking for pre-votes (KIP-996), epoch unchanged
    CANDIDATE = "candidate"  # voted for itself in a new epoch, asking for votes
    LEADER = "leader"
    RESIGNED = "resigned"  # was leader of this epoch, is no longer (restart, check quorum)
    FOLLOWER = "follower"  # knows the leader of this epoch, fetches from it


U, V, P, C, L, R, F = Role.UNATTACHED, Role.VOTED, Role.PROSPECTIVE, Role.CANDIDATE, Role.LEADER, Role.RESIGNED, Role.FOLLOWER

# The legal transitions, all of them. A transition to the same role happens only with a
# new epoch (or, for FOLLOWER and UNATTACHED of an observer, a new leader / a lost one).
TRANSITIONS: dict[Role, frozenset[Role]] = {
    U: frozenset({U, V, P, C, F}),
    V: frozenset({U, P, C, F}),
    P: frozenset({U, V, C, F}),
    C: frozenset({U, C, P, L, F}),
    L: frozenset({U, R, F}),
    R: frozenset({U, P, C, F}),
    F: frozenset({U, P, C, F}),
}
OBSERVER_ROLES = frozenset({U, F})

UNSAFE_SWITCHES = {
    "commit-old-epoch": "the leader advances the HWM over entries of earlier epochs",
    "vote-without-log-check": "voters grant votes without comparing logs",
    "skip-divergence-check": "the leader serves fetches without checking last_fetched_epoch",
    "forget-vote": "a voter may vote for several candidates in one epoch",
    "ack-unflushed": "followers acknowledge (fetch past) entries they have not flushed",
}


class NotLeaderError(Exception):
    """`append` on a node that is not the leader; `leader_id`/`epoch` say who is."""

    def __init__(self, leader_id: int, epoch: int) -> None:
        super().__init__(f"not the quorum leader (leader {leader_id}, epoch {epoch})")
        self.leader_id = leader_id
        self.epoch = epoch


class IllegalTransition(Exception):
    pass


@dataclass(frozen=True)
class RaftConfig:
    """Defaults are KRaft's `controller.quorum.*` (docs/broker-raft.md "Rules")."""

    election_timeout_ms: int = 1000
    fetch_timeout_ms: int = 2000
    request_timeout_ms: int = 2000
    retry_backoff_ms: int = 20
    fetch_max_wait_ms: int = 500
    max_entries_per_fetch: int = 500
    pre_vote: bool = False
    check_quorum: bool = True
    unsafe: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        bad = sorted(set(self.unsafe) - set(UNSAFE_SWITCHES))
        if bad:
            raise ValueError(f"unknown unsafe switch {bad[0]!r} (known: {', '.join(UNSAFE_SWITCHES)})")


@dataclass(slots=True)
class _Replica:
    """What the leader knows of one fetching replica in its epoch."""

    end_offset: int = 0
    last_fetch_ms: int | None = None
    hwm_sent: int = -1


@dataclass(slots=True)
class _Inflight:
    correlation_id: int
    target: int
    deadline: int


@dataclass(slots=True)
class _Parked:
    src: int
    request: RaftFetchRequest
    deadline: int


@dataclass(slots=True)
class _LeaderState:
    epoch_start: int
    replicas: dict[int, _Replica]
    since_ms: int
    begin_epoch_due: int
    parked: dict[int, _Parked] = field(default_factory=dict)
    voter_replicas: list[_Replica] = field(default_factory=list)  # the other voters' entries of `replicas`


class RaftNode:
    def __init__(
        self,
        node_id: int,
        voters: tuple[int, ...] | list[int],
        log: RaftLog | None = None,
        config: RaftConfig | None = None,
        rng: random.Random | None = None,
        state: PersistQuorumState | None = None,
        now_ms: int = 0,
    ) -> None:
        self.node_id = node_id
        self.voters = tuple(sorted(voters))
        if not self.voters:
            raise ValueError("a quorum needs at least one voter")
        self.is_voter = node_id in self.voters
        self.log = log if log is not None else RaftLog()
        self.config = config or RaftConfig()
        self.rng = rng or random.Random(node_id)
        self._unsafe = self.config.unsafe
        self._now = now_ms
        st = state or PersistQuorumState(0, NO_LEADER, NO_LEADER)
        self.epoch, self.leader_id, self.voted_for = st.epoch, st.leader_id, st.voted_for
        self._persisted = (self.epoch, self.leader_id, self.voted_for)
        self.high_watermark = 0  # not persisted: learnt again from the leader (as KRaft)
        self._flush_needed = False
        self._flushed_end = self.log.end_offset  # what the log held at start is on disk
        self._dirty = False  # leader: entries or HWM news to act on at the next call
        self._votes: set[int] = set()
        self._election_deadline: int | None = None
        self._fetch_deadline: int | None = None
        self._fetch_retry_at: int | None = None
        self._inflight: _Inflight | None = None
        self._next_correlation = 1
        self._leader: _LeaderState | None = None
        self._orphans: list[_Parked] = []  # fetches parked when leadership ended
        self.role = self._initial_role()
        if self.role is F:
            self._fetch_deadline = now_ms + self.config.fetch_timeout_ms
            self._fetch_retry_at = now_ms
        elif self.is_voter:
            self._reset_election_timer()
        else:
            self._fetch_retry_at = now_ms

    def _initial_role(self) -> Role:
        if self.leader_id == self.node_id:
            return R if self.is_voter else U
        if self.leader_id != NO_LEADER:
            return F
        if self.voted_for not in (NO_LEADER, self.node_id) and self.is_voter:
            return V
        return U  # a candidate that restarts stands again after a timeout, vote kept

    # ------------------------------------------------------------ MetadataQuorum
    @property
    def end_offset(self) -> int:
        return self.log.end_offset

    @property
    def committed_offset(self) -> int:
        return self.high_watermark

    def append(self, record: object) -> int:
        """Append `record` in the leader's epoch; it commits once the HWM passes it."""
        if self.role is not L:
            raise NotLeaderError(self.leader_id, self.epoch)
        self._dirty = True
        return self._log_append(RaftEntry(self.epoch, record))

    def read_from(self, offset: int, max_records: int) -> tuple[Any, ...]:
        """Records from `offset` (committed or not: cap at `committed_offset`)."""
        return tuple(e.record for e in self.log.read(offset, max_records))

    # ------------------------------------------------------------ entry points
    def handle(self, src: int, msg: object, now_ms: int) -> Actions:
        self._now = now_ms
        acts = Actions()
        if isinstance(msg, RaftFetchRequest):
            self._on_fetch(src, msg, acts)
        elif isinstance(msg, RaftFetchResponse):
            self._on_fetch_response(src, msg, acts)
        elif isinstance(msg, VoteRequest):
            self._on_vote(src, msg, acts)
        elif isinstance(msg, VoteResponse):
            self._on_vote_response(msg, acts)
        elif isinstance(msg, BeginQuorumEpochRequest):
            self._on_begin_epoch(msg, acts)
        else:
            raise TypeError(f"raft node cannot handle {type(msg).__name__}")
        self._settle(acts)
        return acts

    def tick(self, now_ms: int) -> Actions:
        self._now = now_ms
        acts = Actions()
        if self.role is L:
            self._leader_tick(acts)
        elif self.role is F or not self.is_voter:
            self._fetcher_tick(acts)
        elif self._election_deadline is not None and now_ms >= self._election_deadline:
            self._on_election_timeout(acts)
        self._settle(acts)
        return acts

    def next_deadline(self) -> int | None:
        if self._dirty:
            return self._now
        ds = [d for d in (self._election_deadline, self._fetch_deadline, self._fetch_retry_at) if d is not None]
        if self._inflight is not None:
            ds.append(self._inflight.deadline)
        ls = self._leader
        if ls is not None:
            for p in ls.parked.values():
                ds.append(p.deadline)
            for r in ls.voter_replicas:
                if r.last_fetch_ms is None:
                    ds.append(ls.begin_epoch_due)
                    break
            if self.config.check_quorum:
                ds.append(self._check_quorum_at())
        return min(ds) if ds else None

    # ------------------------------------------------------------ state changes
    def _become(self, role: Role, acts: Actions) -> None:
        allowed = TRANSITIONS[self.role] if self.is_voter else OBSERVER_ROLES
        if role not in allowed:
            raise IllegalTransition(f"node {self.node_id}: {self.role.value} -> {role.value} (epoch {self.epoch})")
        if self.role is L and role is not L:
            self._step_down(acts)
        self.role = role
        self._inflight = None
        self._election_deadline = self._fetch_deadline = self._fetch_retry_at = None
        acts.other.append(RoleChanged(role.value, self.epoch, self.leader_id))
        self._persist(acts)

    def _persist(self, acts: Actions) -> None:
        st = (self.epoch, self.leader_id, self.voted_for)
        if st != self._persisted:
            self._persisted = st
            acts.other.append(PersistQuorumState(*st))

    def _enter_epoch(self, epoch: int, leader_id: int, acts: Actions) -> None:
        """Move to a higher `epoch` (follower of `leader_id` if known, else unattached)."""
        self.epoch, self.voted_for = epoch, NO_LEADER
        self._follow_or_unattach(leader_id, acts)

    def _follow_or_unattach(self, leader_id: int, acts: Actions) -> None:
        if leader_id not in (NO_LEADER, self.node_id):
            self._follow(leader_id, acts)
        else:
            self.leader_id = NO_LEADER
            self._become(U, acts)
            self._after_unattached()

    def _after_unattached(self) -> None:
        if self.is_voter:
            self._reset_election_timer()
        else:
            self._fetch_retry_at = self._now

    def _follow(self, leader_id: int, acts: Actions) -> None:
        self.leader_id = leader_id
        self._become(F, acts)
        self._fetch_deadline = self._now + self.config.fetch_timeout_ms
        self._send_fetch(acts)

    def _reset_election_timer(self) -> None:
        if self.voters == (self.node_id,):  # a sole voter has nobody to wait for
            self._election_deadline = self._now
            return
        t = self.config.election_timeout_ms
        self._election_deadline = self._now + t + self.rng.randint(0, t)

    def _majority(self, n: int) -> bool:
        return n > len(self.voters) // 2

    # ------------------------------------------------------------ elections
    def _on_election_timeout(self, acts: Actions) -> None:
        if self.config.pre_vote:
            self._start_pre_vote(acts)
        else:
            self._start_election(acts)

    def _start_pre_vote(self, acts: Actions) -> None:
        if self.role is not P:
            if self.leader_id == self.node_id:  # a resigned leader leads no more
                self.leader_id = NO_LEADER
            self._become(P, acts)
        self._votes = {self.node_id}
        self._reset_election_timer()
        if self._majority(1):
            self._start_election(acts)
            return
        self._request_votes(self.epoch + 1, True, acts)

    def _start_election(self, acts: Actions) -> None:
        self.epoch += 1
        self.voted_for, self.leader_id = self.node_id, NO_LEADER
        self._become(C, acts)
        self._votes = {self.node_id}
        self._reset_election_timer()
        if self._majority(1):
            self._become_leader(acts)
            return
        self._request_votes(self.epoch, False, acts)

    def _request_votes(self, epoch: int, pre_vote: bool, acts: Actions) -> None:
        req = VoteRequest(epoch, self.node_id, self.log.last_epoch, self.log.end_offset, pre_vote)
        for v in self.voters:
            if v != self.node_id:
                acts.send(v, req)

    def _log_ok(self, req: VoteRequest) -> bool:
        if "vote-without-log-check" in self._unsafe:
            return True
        return (req.last_offset_epoch, req.last_offset) >= (self.log.last_epoch, self.log.end_offset)

    def _on_vote(self, src: int, req: VoteRequest, acts: Actions) -> None:
        if not self.is_voter or req.candidate_id not in self.voters:
            granted = False
        elif req.pre_vote:
            granted = self._grant_pre_vote(req)
        else:
            if req.candidate_epoch > self.epoch:
                self._enter_epoch(req.candidate_epoch, NO_LEADER, acts)
            granted = self._grant_vote(req)
            if granted:
                self.voted_for = req.candidate_id
                if self.role is not V:
                    self._become(V, acts)
                self._persist(acts)
                self._reset_election_timer()
        acts.send(src, VoteResponse(self.node_id, self.epoch, self.leader_id, granted, req.pre_vote))

    def _grant_vote(self, req: VoteRequest) -> bool:
        if req.candidate_epoch != self.epoch or self.leader_id != NO_LEADER:
            return False
        if self.role not in (U, V, P):
            return False
        if self.voted_for not in (NO_LEADER, req.candidate_id) and "forget-vote" not in self._unsafe:
            return False
        return self._log_ok(req)

    def _grant_pre_vote(self, req: VoteRequest) -> bool:
        """KIP-996: no state change; refused while this voter hears from a leader."""
        if req.candidate_epoch <= self.epoch or self.role is L:
            return False
        if self.role is F and self._fetch_deadline is not None and self._now < self._fetch_deadline:
            return False
        return self._log_ok(req)

    def _on_vote_response(self, resp: VoteResponse, acts: Actions) -> None:
        if resp.leader_epoch > self.epoch:
            self._enter_epoch(resp.leader_epoch, resp.leader_id, acts)
            return
        # A prospective gave up on its leader: only the leader itself brings it back.
        gave_up = self.role is P and resp.leader_id == self.leader_id and resp.voter_id != resp.leader_id
        known = resp.leader_epoch == self.epoch and resp.leader_id not in (NO_LEADER, self.node_id)
        if known and self.role in (U, V, P, C) and not gave_up:
            self._follow(resp.leader_id, acts)
            return
        if not resp.vote_granted:
            return
        if resp.pre_vote and self.role is P and resp.leader_epoch <= self.epoch:
            self._votes.add(resp.voter_id)
            if self._majority(len(self._votes)):
                self._start_election(acts)
        elif not resp.pre_vote and self.role is C and resp.leader_epoch == self.epoch:
            self._votes.add(resp.voter_id)
            if self._majority(len(self._votes)):
                self._become_leader(acts)

    def _on_begin_epoch(self, req: BeginQuorumEpochRequest, acts: Actions) -> None:
        if req.leader_epoch > self.epoch:
            self._enter_epoch(req.leader_epoch, req.leader_id, acts)
        elif req.leader_epoch == self.epoch and self.role in (U, V, P, C):
            self._follow(req.leader_id, acts)
        elif req.leader_epoch == self.epoch and self.role is F and req.leader_id == self.leader_id:
            self._fetch_deadline = self._now + self.config.fetch_timeout_ms

    # ------------------------------------------------------------ leader
    def _become_leader(self, acts: Actions) -> None:
        self.leader_id = self.node_id
        self._become(L, acts)
        replicas = {v: _Replica() for v in self.voters if v != self.node_id}
        self._leader = _LeaderState(self.log.end_offset, replicas, self._now, self._now + self.config.fetch_max_wait_ms,
                                    voter_replicas=list(replicas.values()))
        self._log_append(RaftEntry(self.epoch, LeaderChangeRecord(self.epoch, self.node_id, self.voters)))
        self._dirty = True
        for v in replicas:
            acts.send(v, BeginQuorumEpochRequest(self.epoch, self.node_id))

    def _step_down(self, acts: Actions) -> None:
        """Leaving the leader role: parked fetches are answered at the end of the call."""
        ls, self._leader = self._leader, None
        self._dirty = False
        if ls is not None:
            self._orphans += ls.parked.values()

    def _voter_replicas(self) -> list[_Replica]:
        ls = self._leader
        return [] if ls is None else ls.voter_replicas

    def _check_quorum_at(self) -> int:
        ls = self._leader
        assert ls is not None
        return max(ls.since_ms, self._last_quorum_contact()) + self.config.fetch_timeout_ms * 3 // 2

    def _last_quorum_contact(self) -> int:
        """The latest time by which a majority (self included) had fetched."""
        times = [r.last_fetch_ms if r.last_fetch_ms is not None else -(1 << 62) for r in self._voter_replicas()]
        times.append(self._now)
        times.sort(reverse=True)
        return times[len(self.voters) // 2]

    def _leader_tick(self, acts: Actions) -> None:
        ls = self._leader
        assert ls is not None
        if self.config.check_quorum and self._now >= self._check_quorum_at():
            self._become(R, acts)
            self._reset_election_timer()
            return
        if self._now >= ls.begin_epoch_due:
            for v, r in ls.replicas.items():
                if r.last_fetch_ms is None:
                    acts.send(v, BeginQuorumEpochRequest(self.epoch, self.node_id))
            ls.begin_epoch_due = self._now + self.config.fetch_max_wait_ms
        for rid, p in list(ls.parked.items()):
            if self._now >= p.deadline:
                del ls.parked[rid]
                acts.send(p.src, self._fetch_answer(p.request))

    def _on_fetch(self, src: int, req: RaftFetchRequest, acts: Actions) -> None:
        if req.current_leader_epoch > self.epoch:
            self._enter_epoch(req.current_leader_epoch, NO_LEADER, acts)
        if self.role is not L or req.current_leader_epoch != self.epoch:
            err = ErrorCode.fenced_leader_epoch if req.current_leader_epoch < self.epoch else ErrorCode.not_leader_or_follower
            leader = self.leader_id if self.role in (L, F) else NO_LEADER
            acts.send(src, RaftFetchResponse(req.correlation_id, err, self.epoch, leader))
            return
        ls = self._leader
        assert ls is not None
        rep = ls.replicas.setdefault(req.replica_id, _Replica())
        rep.last_fetch_ms = self._now
        diverging = self._divergence(req)
        if diverging is not None:
            acts.send(src, self._response(req, diverging=diverging))
            return
        rep.end_offset = req.fetch_offset
        if req.replica_id in self.voters:
            self._update_hwm()
        ls.parked.pop(req.replica_id, None)
        if self._has_news(req) or req.max_wait_ms <= 0:
            acts.send(src, self._fetch_answer(req))
        else:
            ls.parked[req.replica_id] = _Parked(src, req, self._now + req.max_wait_ms)

    def _divergence(self, req: RaftFetchRequest) -> EpochEndOffset | None:
        if "skip-divergence-check" in self._unsafe:
            return None if req.fetch_offset <= self.log.end_offset else EpochEndOffset(*self.log.end_offset_for_epoch(self.epoch))
        if req.fetch_offset == 0 and req.last_fetched_epoch == -1:
            return None
        epoch, end = self.log.end_offset_for_epoch(req.last_fetched_epoch)
        if epoch != req.last_fetched_epoch or end < req.fetch_offset:
            return EpochEndOffset(epoch, end)
        return None

    def _serve_end(self, replica_id: int) -> int:
        """Voters get the whole log, observers only what is committed."""
        return self.log.end_offset if replica_id in self.voters else self.high_watermark

    def _has_news(self, req: RaftFetchRequest) -> bool:
        ls = self._leader
        assert ls is not None
        rep = ls.replicas.get(req.replica_id)
        stale_hwm = rep is None or rep.hwm_sent != self.high_watermark
        return self._serve_end(req.replica_id) > req.fetch_offset or stale_hwm

    def _fetch_answer(self, req: RaftFetchRequest) -> RaftFetchResponse:
        ls = self._leader
        assert ls is not None
        n = min(self._serve_end(req.replica_id) - req.fetch_offset, self.config.max_entries_per_fetch)
        rep = ls.replicas.get(req.replica_id)
        if rep is not None:
            rep.hwm_sent = self.high_watermark
        return self._response(req, entries=self.log.read(req.fetch_offset, max(n, 0)))

    def _response(
        self, req: RaftFetchRequest, entries: tuple[RaftEntry, ...] = (), diverging: EpochEndOffset | None = None
    ) -> RaftFetchResponse:
        return RaftFetchResponse(
            req.correlation_id, ErrorCode.none, self.epoch, self.node_id, self.high_watermark, req.fetch_offset, entries, diverging
        )

    def _update_hwm(self) -> None:
        ls = self._leader
        assert ls is not None
        ends = sorted([self._flushed_end, *(ls.replicas.get(v, _Replica()).end_offset for v in self.voters if v != self.node_id)], reverse=True)
        m = ends[len(self.voters) // 2]
        if m <= self.high_watermark or m > self.log.end_offset:
            return
        if m > ls.epoch_start or "commit-old-epoch" in self._unsafe:
            self.high_watermark = m

    def _settle(self, acts: Actions) -> None:
        """End of every call: the leader flushes its new entries (its own end counts only
        once durable), recomputes the HWM and answers the parked fetches that can go."""
        for p in self._orphans:
            leader = self.leader_id if self.role is F else NO_LEADER
            acts.send(p.src, RaftFetchResponse(p.request.correlation_id, ErrorCode.not_leader_or_follower, self.epoch, leader))
        self._orphans = []
        if self.role is not L:
            return
        self._dirty = False
        if self.log.end_offset != self._flushed_end or self._flush_needed:
            self._flush(acts)
        self._update_hwm()
        ls = self._leader
        assert ls is not None
        for rid, p in list(ls.parked.items()):
            if self._has_news(p.request):
                del ls.parked[rid]
                acts.send(p.src, self._fetch_answer(p.request))

    # ------------------------------------------------------------ followers and observers
    def _fetcher_tick(self, acts: Actions) -> None:
        if self.is_voter and self._fetch_deadline is not None and self._now >= self._fetch_deadline:
            self._on_election_timeout(acts)
            return
        if not self.is_voter and self.role is F and self._fetch_deadline is not None and self._now >= self._fetch_deadline:
            self._follow_or_unattach(NO_LEADER, acts)
        if self._inflight is not None and self._now >= self._inflight.deadline:
            self._inflight = None
            self._fetch_retry_at = self._now
        if self._inflight is None and self._fetch_retry_at is not None and self._now >= self._fetch_retry_at:
            self._send_fetch(acts)

    def _send_fetch(self, acts: Actions) -> None:
        if self.role is F:
            target = self.leader_id
        else:  # an observer looking for the leader asks any voter
            target = self.rng.choice(self.voters)
        unflushed = self._flush_needed or self.log.end_offset != self._flushed_end
        if unflushed and "ack-unflushed" not in self._unsafe:
            self._flush(acts)
        cid = self._next_correlation
        self._next_correlation += 1
        wait = self.config.fetch_max_wait_ms if self.role is F else 0
        # A long poll that is not back after twice its wait is lost: ask again.
        timeout = min(self.config.request_timeout_ms, 2 * wait + 2 * self.config.retry_backoff_ms + 100)
        self._inflight = _Inflight(cid, target, self._now + timeout)
        self._fetch_retry_at = None
        acts.send(target, RaftFetchRequest(cid, self.node_id, self.epoch, self.log.end_offset, self.log.last_epoch, wait))

    def _on_fetch_response(self, src: int, resp: RaftFetchResponse, acts: Actions) -> None:
        inf = self._inflight
        if inf is None or inf.correlation_id != resp.correlation_id or inf.target != src:
            return
        self._inflight = None
        if resp.leader_epoch > self.epoch:
            self._enter_epoch(resp.leader_epoch, resp.leader_id, acts)
            return
        if resp.error is not ErrorCode.none or resp.leader_epoch < self.epoch:
            if not self.is_voter and resp.leader_epoch == self.epoch and resp.leader_id not in (NO_LEADER, self.leader_id):
                self._follow(resp.leader_id, acts)
            else:  # no leader known by the responder: ask again after a long-poll's time
                known = resp.leader_id != NO_LEADER
                self._fetch_retry_at = self._now + (self.config.retry_backoff_ms if known else self.config.fetch_max_wait_ms)
            return
        if self.role is not F or self.leader_id != src:
            if self.is_voter:
                return
            self._follow(src, acts)  # an observer found the leader; fetch from it next
            return
        self._fetch_deadline = self._now + self.config.fetch_timeout_ms
        if resp.diverging_epoch is not None:
            self._truncate_diverging(resp.diverging_epoch, acts)
        elif resp.fetch_offset == self.log.end_offset:
            for e in resp.entries:
                self._log_append(e)
            hwm = min(resp.high_watermark, self.log.end_offset)
            if hwm > self.high_watermark:
                self.high_watermark = hwm
        self._send_fetch(acts)

    def _truncate_diverging(self, div: EpochEndOffset, acts: Actions) -> None:
        _, end = self.log.end_offset_for_epoch(div.epoch)
        to = min(div.end_offset, end)
        if to < self.log.end_offset:
            acts.other.append(LogTruncated(self.log.end_offset, to, self.epoch))
            self.log.truncate(to)
            self._flushed_end = min(self._flushed_end, to)
            self._flush_needed = True

    # ------------------------------------------------------------ log
    def _log_append(self, entry: RaftEntry) -> int:
        self._flush_needed = True
        return self.log.append(entry)

    def _flush(self, acts: Actions) -> None:
        acts.other.append(FlushLog(self.log.end_offset))
        self._flushed_end = self.log.end_offset
        self._flush_needed = False
