"""Messages and actions of the controller quorum (Raft, KIP-595 style): see raft.py.

Field names follow KIP-595's schemas (snake_case). Node ids are ints; every voter and
observer of the quorum has one. Entries travel as `RaftEntry(epoch, record)`; the record
is opaque to the quorum (a metadata record, or the `LeaderChangeRecord` of metadata.py
that the quorum writes).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from kio.schema.errors import ErrorCode

from broker.core.messages import EpochEndOffset

NO_LEADER = -1


class RaftEntry(NamedTuple):
    """One log entry: the epoch of the leader that appended it, and its record."""

    epoch: int
    record: object


# ---------------------------------------------------------------- elections
@dataclass(frozen=True, slots=True)
class VoteRequest:
    """A candidate (or, with `pre_vote`, a prospective candidate, KIP-996) asks for a vote
    in `candidate_epoch`; `last_offset_epoch`/`last_offset` describe its log's tail
    (epoch of its last entry, its end offset)."""

    candidate_epoch: int
    candidate_id: int
    last_offset_epoch: int
    last_offset: int
    pre_vote: bool = False


@dataclass(frozen=True, slots=True)
class VoteResponse:
    """`leader_epoch`/`leader_id`: what the voter knows (its epoch, its leader or -1)."""

    voter_id: int
    leader_epoch: int
    leader_id: int
    vote_granted: bool
    pre_vote: bool = False


@dataclass(frozen=True, slots=True)
class BeginQuorumEpochRequest:
    """A new leader tells a voter about its epoch (so it need not wait for a timeout)."""

    leader_epoch: int
    leader_id: int


# ---------------------------------------------------------------- replication
@dataclass(frozen=True, slots=True)
class RaftFetchRequest:
    """A follower or observer pulls from `fetch_offset`; `last_fetched_epoch` is the
    epoch of its entry at `fetch_offset - 1` (-1 for an empty log). For a voter,
    `fetch_offset` acknowledges that its first `fetch_offset` entries are durable."""

    correlation_id: int
    replica_id: int
    current_leader_epoch: int
    fetch_offset: int
    last_fetched_epoch: int
    max_wait_ms: int = 500


@dataclass(frozen=True, slots=True)
class RaftFetchResponse:
    """`entries` start at the request's `fetch_offset`. With `diverging_epoch`, the
    replica's log diverges after that epoch's end offset: truncate and fetch again.
    `leader_epoch`/`leader_id` say who leads (on errors: the sender's knowledge)."""

    correlation_id: int
    error: ErrorCode
    leader_epoch: int
    leader_id: int
    high_watermark: int = -1
    fetch_offset: int = -1
    entries: tuple[RaftEntry, ...] = ()
    diverging_epoch: EpochEndOffset | None = None


RAFT_MESSAGES = (VoteRequest, VoteResponse, BeginQuorumEpochRequest, RaftFetchRequest, RaftFetchResponse)


# ---------------------------------------------------------------- actions (in Actions.other)
@dataclass(frozen=True, slots=True)
class PersistQuorumState:
    """Write the quorum-state file (epoch, leader, vote) durably before sending anything
    of the same call: a vote or a candidacy must survive a crash."""

    epoch: int
    leader_id: int
    voted_for: int


@dataclass(frozen=True, slots=True)
class FlushLog:
    """Make the log's first `end_offset` entries durable (fsync, truncations included)
    before sending anything of the same call: what follows acknowledges them."""

    end_offset: int


@dataclass(frozen=True, slots=True)
class RoleChanged:
    """The node's role changed (for the shell's log; the controller integration starts
    or stops the active controller on it)."""

    role: str
    epoch: int
    leader_id: int


@dataclass(frozen=True, slots=True)
class LogTruncated:
    """The log was cut from `from_end` to `to` because it diverged from the leader's."""

    from_end: int
    to: int
    epoch: int
