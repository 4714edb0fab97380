"""A Raft node as leader (KIP-595; docs/broker-raft.md "Rules"): it appends a
`LeaderChangeRecord` and sends BeginQuorumEpoch, serves fetches (entries, or a diverging
epoch on which the follower truncates; observers only what is committed), parks a fetch
with nothing new until its wait passes, moves the high watermark to what a majority of
voters holds durably (only over an entry of its own epoch), and with check quorum resigns
without fetches from a majority for 1.5 fetch timeouts.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from broker.core.messages import Actions, EpochEndOffset
from broker.core.metadata import LeaderChangeRecord
from broker.core.raft_messages import (
    NO_LEADER,
    BeginQuorumEpochRequest,
    RaftEntry,
    RaftFetchRequest,
    RaftFetchResponse,
)
from broker.core.raft_state import F, L, LeaderState, ParkedFetch, R, RaftState, ReplicaProgress


class LeaderRules(RaftState):
    """The leader's rules."""

    def _become_leader(self, acts: Actions) -> None:
        self.leader_id = self.node_id
        self._become(L, acts)
        replicas = {v: ReplicaProgress() for v in self.voters if v != self.node_id}
        self._leader = LeaderState(self.log.end_offset, replicas, self._now, self._now + self.config.fetch_max_wait_ms,
                                    voter_replicas=list(replicas.values()))
        self._log_append(RaftEntry(self.epoch, LeaderChangeRecord(self.epoch, self.node_id, self.voters)))
        self._dirty = True
        for v in replicas:
            acts.send(v, BeginQuorumEpochRequest(self.epoch, self.node_id))

    def _voter_replicas(self) -> list[ReplicaProgress]:
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
        rep = ls.replicas.setdefault(req.replica_id, ReplicaProgress())
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
            ls.parked[req.replica_id] = ParkedFetch(src, req, self._now + req.max_wait_ms)

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
        ends = sorted([self._flushed_end, *(ls.replicas.get(v, ReplicaProgress()).end_offset
                                            for v in self.voters if v != self.node_id)], reverse=True)
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
