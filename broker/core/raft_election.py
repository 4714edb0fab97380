"""A Raft node's elections (KIP-595, KIP-996; docs/broker-raft.md "Rules"): standing after
the election timeout (with pre-vote, asking for pre-votes first), voting at most once an
epoch for a candidate whose log is at least as up to date (last epoch, then end offset),
counting votes, and learning of a leader from a vote answer or BeginQuorumEpoch.
"""

from __future__ import annotations

from broker.core.messages import Actions
from broker.core.raft_messages import NO_LEADER, BeginQuorumEpochRequest, VoteRequest, VoteResponse
from broker.core.raft_state import C, F, L, P, RaftState, U, V


class ElectionRules(RaftState):
    """Standing, voting and pre-voting."""

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
