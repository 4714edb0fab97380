"""A Raft node's state (KIP-595, as KRaft), shared by the rules of its roles.

`RaftState` holds one node's persistent state (epoch, leader, vote), its log and high
watermark, its timers, the fetch it has in flight and, while it leads, what it knows of
the other replicas; and the rules every role uses: moving between roles (`TRANSITIONS`),
persisting the quorum state, the election timer, appending to and flushing the log. The
roles' rules, one module each: raft_election.py (standing, voting, pre-votes),
raft_leader.py (serving fetches, the high watermark, check quorum), raft_follower.py
(following a leader, fetching and truncating; observers too); raft.py (`RaftNode`: the
entry points). Where the shared rules lead into a role, they call the method that role's
module defines (declared below, under "defined by the roles").
"""

from __future__ import annotations

import enum
import random
from dataclasses import dataclass, field
from typing import Any

from broker.core.messages import Actions
from broker.core.raft_log import RaftLog
from broker.core.raft_messages import (
    NO_LEADER,
    FlushLog,
    PersistQuorumState,
    RaftEntry,
    RaftFetchRequest,
    RoleChanged,
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
class ReplicaProgress:
    """What the leader knows of one fetching replica in its epoch."""

    end_offset: int = 0
    last_fetch_ms: int | None = None
    hwm_sent: int = -1


@dataclass(slots=True)
class InflightFetch:
    correlation_id: int
    target: int
    deadline: int


@dataclass(slots=True)
class ParkedFetch:
    src: int
    request: RaftFetchRequest
    deadline: int


@dataclass(slots=True)
class LeaderState:
    epoch_start: int
    replicas: dict[int, ReplicaProgress]
    since_ms: int
    begin_epoch_due: int
    parked: dict[int, ParkedFetch] = field(default_factory=dict)
    voter_replicas: list[ReplicaProgress] = field(default_factory=list)  # the other voters' entries of `replicas`


class RaftState:
    """One Raft node's state and the rules its roles share (see the module docstring)."""

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
        self._inflight: InflightFetch | None = None
        self._next_correlation = 1
        self._leader: LeaderState | None = None
        self._orphans: list[ParkedFetch] = []  # fetches parked when leadership ended
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

    def _step_down(self, acts: Actions) -> None:
        """Leaving the leader role: parked fetches are answered at the end of the call."""
        ls, self._leader = self._leader, None
        self._dirty = False
        if ls is not None:
            self._orphans += ls.parked.values()

    # ------------------------------------------------------------ log
    def _log_append(self, entry: RaftEntry) -> int:
        self._flush_needed = True
        return self.log.append(entry)

    def _flush(self, acts: Actions) -> None:
        acts.other.append(FlushLog(self.log.end_offset))
        self._flushed_end = self.log.end_offset
        self._flush_needed = False

    # ------------------------------------------------------------ defined by the roles
    def _on_election_timeout(self, acts: Actions) -> None:
        """Stand (or ask for pre-votes first): raft_election.py."""
        raise NotImplementedError

    def _become_leader(self, acts: Actions) -> None:
        """Lead the current epoch: raft_leader.py."""
        raise NotImplementedError

    def _send_fetch(self, acts: Actions) -> None:
        """Fetch from the leader (an observer looking for one: from any voter): raft_follower.py."""
        raise NotImplementedError
