"""The Raft invariants of the controller quorum, checked after every step of raft_sim.

Ground truth: `committed` is the longest prefix any node's high watermark ever covered,
taken from that node's log when its HWM passed it, with the epoch of that node then
(`commit_epoch`). Checks (names as reported), after each call into node `n`:

- ``one-leader-per-epoch``: at most one node is ever leader in a given epoch.
- ``vote-once``: a voter grants at most one (non pre-)vote per epoch.
- ``log-matching``: entries with the same offset and epoch hold the same record and
  follow entries of the same epoch (hence, by induction, the same prefix), on all nodes.
- ``committed-mismatch``: every node's log below its HWM equals the committed prefix.
- ``committed-truncated``: no node truncates (on the leader's word) a committed entry.
- ``hwm-beyond-log``: no node's HWM is past its log end.
- ``hwm-monotonic``: a node's HWM never decreases within one incarnation.
- ``leader-completeness``: a leader of epoch E holds every entry committed in an
  earlier epoch (checked when it becomes leader; a leader never truncates).
- ``observer-uncommitted``: an observer holds committed entries only.
- ``quorum-state``: the node's epoch, leader and vote are what it asked to persist,
  and its role matches them (a leader leads itself, a follower another node).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from broker.core.raft import Role
from broker.core.raft_log import RaftLog
from broker.core.raft_messages import NO_LEADER, PersistQuorumState, RaftEntry
from broker.sim.invariants import Violation


class SimRaftLog(RaftLog):
    """The in-memory log plus what the simulated disk holds (`durable`: set on FlushLog)
    and what the oracle has not seen yet (appended offsets, truncations)."""

    def __init__(self, entries: list[RaftEntry] | tuple[RaftEntry, ...] = ()) -> None:
        self.appended: list[int] = []
        self.truncations: list[tuple[int, RaftEntry]] = []
        super().__init__(entries)
        self.durable: list[RaftEntry] = list(self.entries)
        self.appended.clear()

    def append(self, entry: RaftEntry) -> int:
        off = super().append(entry)
        self.appended.append(off)
        return off

    def truncate(self, end: int) -> None:
        if end < len(self.entries):
            self.truncations.append((end, self.entries[end]))
        super().truncate(end)

    def flush(self, end: int) -> None:
        self.durable = self.entries[:end]

    def after_crash(self, power_loss: bool, rng: random.Random) -> SimRaftLog:
        """The log a node finds when it starts again: after kill -9 all of it (the page
        cache survives); after a power loss what it last flushed, plus, when it only grew
        since, a random part of the unflushed appends (a torn tail)."""
        entries, durable = self.entries, self.durable
        if power_loss:
            n = len(durable)
            grew = len(entries) > n and entries[:n] == durable
            entries = entries[: n + rng.randint(0, len(entries) - n)] if grew else durable
        return SimRaftLog(entries)


@dataclass
class RaftOracle:
    committed: list[RaftEntry] = field(default_factory=list)
    commit_epoch: list[int] = field(default_factory=list)
    leaders: dict[int, int] = field(default_factory=dict)  # epoch -> leader
    votes: dict[tuple[int, int], int] = field(default_factory=dict)  # (voter, epoch) -> candidate
    matching: dict[tuple[int, int], tuple[object, int]] = field(default_factory=dict)
    hwm: dict[int, int] = field(default_factory=dict)
    verified: dict[int, int] = field(default_factory=dict)
    led: set[tuple[int, int]] = field(default_factory=set)  # (node, epoch) seen leading
    elections: int = 0
    violations: list[Violation] = field(default_factory=list)

    def _fail(self, now: int, name: str, detail: str) -> None:
        self.violations.append(Violation(now, name, detail))

    def restarted(self, nid: int) -> None:
        """A new incarnation: its HWM starts again from 0, its log was checked before."""
        self.hwm.pop(nid, None)
        self.verified[nid] = 0

    def vote_sent(self, now: int, voter: int, epoch: int, candidate: int) -> None:
        prev = self.votes.setdefault((voter, epoch), candidate)
        if prev != candidate:
            self._fail(now, "vote-once", f"node {voter} voted for {prev} and {candidate} in epoch {epoch}")

    def check(self, now: int, nid: int, raft, log: SimRaftLog, persisted: PersistQuorumState) -> None:  # noqa: ANN001
        appended = list(log.appended)
        self._log_matching(now, nid, log)
        self._truncations(now, nid, log)
        self._hwm(now, nid, raft, log)
        if not raft.is_voter:
            self._observer(now, nid, log, appended)
        self._leadership(now, nid, raft, log)
        self._quorum_state(now, nid, raft, persisted)

    def _log_matching(self, now: int, nid: int, log: SimRaftLog) -> None:
        entries = log.entries
        for off in log.appended:
            if off >= len(entries):
                continue
            e = entries[off]
            val = (e.record, entries[off - 1].epoch if off else -1)
            prev = self.matching.setdefault((off, e.epoch), val)
            if prev != val:
                self._fail(now, "log-matching", f"node {nid} offset {off} epoch {e.epoch}: {val} where another log has {prev}")
        log.appended.clear()

    def _truncations(self, now: int, nid: int, log: SimRaftLog) -> None:
        for to, first in log.truncations:
            if to < len(self.committed) and first == self.committed[to]:
                self._fail(now, "committed-truncated", f"node {nid} truncated to {to}, below committed {len(self.committed)}")
            self.verified[nid] = min(self.verified.get(nid, 0), to)
        log.truncations.clear()

    def _hwm(self, now: int, nid: int, raft, log: SimRaftLog) -> None:  # noqa: ANN001
        h = raft.committed_offset
        prev = self.hwm.get(nid, 0)
        if h < prev:
            self._fail(now, "hwm-monotonic", f"node {nid} HWM {prev} -> {h}")
        self.hwm[nid] = h
        if h > log.end_offset:
            self._fail(now, "hwm-beyond-log", f"node {nid} HWM {h} > log end {log.end_offset}")
            return
        v = self.verified.get(nid, 0)
        upto = min(h, len(self.committed))
        if v < upto and log.entries[v:upto] != self.committed[v:upto]:
            bad = next(o for o in range(v, upto) if log.entries[o] != self.committed[o])
            self._fail(now, "committed-mismatch", f"node {nid} offset {bad}: {log.entries[bad]} != committed {self.committed[bad]}")
        if h > len(self.committed):
            n = h - len(self.committed)
            self.committed += log.entries[len(self.committed) : h]
            self.commit_epoch += [raft.epoch] * n
        self.verified[nid] = max(v, h)

    def _observer(self, now: int, nid: int, log: SimRaftLog, appended: list[int]) -> None:
        for off in appended:
            if off < len(log.entries) and (off >= len(self.committed) or log.entries[off] != self.committed[off]):
                self._fail(now, "observer-uncommitted", f"observer {nid} got an uncommitted entry at {off}")
                return

    def _leadership(self, now: int, nid: int, raft, log: SimRaftLog) -> None:  # noqa: ANN001
        if raft.role is not Role.LEADER or (nid, raft.epoch) in self.led:
            return
        self.led.add((nid, raft.epoch))
        self.elections += 1
        prev = self.leaders.setdefault(raft.epoch, nid)
        if prev != nid:
            self._fail(now, "one-leader-per-epoch", f"nodes {prev} and {nid} both lead epoch {raft.epoch}")
        need = max((o + 1 for o, ce in enumerate(self.commit_epoch) if ce < raft.epoch), default=0)
        if log.entries[:need] != self.committed[:need]:
            self._fail(now, "leader-completeness", f"leader {nid} of epoch {raft.epoch} lacks committed entries below {need}")

    def _quorum_state(self, now: int, nid: int, raft, persisted: PersistQuorumState) -> None:  # noqa: ANN001
        mem = (raft.epoch, raft.leader_id, raft.voted_for)
        if mem != (persisted.epoch, persisted.leader_id, persisted.voted_for):
            self._fail(now, "quorum-state", f"node {nid} runs with {mem}, persisted {persisted}")
        role = raft.role
        leads_itself = raft.leader_id == nid
        ok = (
            (role in (Role.LEADER, Role.RESIGNED)) == leads_itself
            and (role is not Role.FOLLOWER or raft.leader_id != NO_LEADER)
            and (role is not Role.CANDIDATE or raft.voted_for == nid)
            and (role not in (Role.UNATTACHED, Role.VOTED, Role.CANDIDATE) or raft.leader_id == NO_LEADER)
        )
        if not ok:
            self._fail(now, "quorum-state", f"node {nid} is {role.value} with leader {raft.leader_id}, vote {raft.voted_for}")
