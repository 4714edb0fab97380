"""A Raft node following a leader, and an observer (KIP-595; docs/broker-raft.md "Rules"):
one fetch in flight (a long poll; lost after twice its wait), entries appended only at
its log end and flushed before the next fetch acknowledges them, truncation on a diverging
epoch, the leader's high watermark taken up to its own log end; a voter stands after a
fetch timeout without a successful fetch, an observer looks for the leader among the
voters.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from broker.core.messages import Actions, EpochEndOffset
from broker.core.raft_messages import NO_LEADER, LogTruncated, RaftFetchRequest, RaftFetchResponse
from broker.core.raft_state import F, InflightFetch, RaftState


class FollowerRules(RaftState):
    """The rules of a follower and an observer."""

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
        self._inflight = InflightFetch(cid, target, self._now + timeout)
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
