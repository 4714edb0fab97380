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

`MetadataQuorum` (controller_state.py) on top: `end_offset`, `committed_offset` (the HWM),
`append(record)` (leader only, else `NotLeaderError`), `read_from(offset, n)`.
`RaftConfig.unsafe` switches single rules off, for tests of the simulation's oracle.

The rules by role, one module each: raft_state.py (the state, role transitions, the log),
raft_election.py, raft_leader.py, raft_follower.py; here `RaftNode` and its entry points.
"""

from __future__ import annotations

from broker.core.messages import Actions
from broker.core.raft_election import ElectionRules
from broker.core.raft_follower import FollowerRules
from broker.core.raft_leader import LeaderRules
from broker.core.raft_messages import (
    BeginQuorumEpochRequest,
    RaftFetchRequest,
    RaftFetchResponse,
    VoteRequest,
    VoteResponse,
)
from broker.core.raft_state import (
    OBSERVER_ROLES,
    TRANSITIONS,
    UNSAFE_SWITCHES,
    F,
    IllegalTransition,
    L,
    NotLeaderError,
    RaftConfig,
    Role,
)

__all__ = ["OBSERVER_ROLES", "TRANSITIONS", "UNSAFE_SWITCHES", "IllegalTransition", "NotLeaderError", "RaftConfig", "RaftNode",
           "Role"]


class RaftNode(ElectionRules, LeaderRules, FollowerRules):
    """One node of the controller quorum (see the module docstring)."""

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
