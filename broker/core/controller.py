"""The controller: broker registrations, heartbeats and fencing, topics, ACLs, partition
changes, elections and unclean recovery, and the admin requests (new partitions, topic
configs, reassignments, elections; their rules in admin_rules.py), all written to the
metadata log.

Sans-IO: `handle(src, message, now_ms)` and `tick(now_ms)` return `Actions` (responses
and requests to send); `next_deadline()` says when `tick` must be called next. Records go
through a `MetadataQuorum`: `LocalMetadataQuorum` commits at once; on a quorum of
controllers it is the `RaftNode` and `quorum_controller.QuorumController` holds the
answers until their records are committed.

The controller's parts, one responsibility a module as in Kafka's controller:
controller_state.py (configuration, metadata quorum, the state they share),
controller_partitions.py (partition changes, AlterPartition, unclean recovery),
controller_brokers.py (registrations, heartbeats, fencing), controller_admin.py (the admin
requests); here the entry points and the metadata fetches brokers long-poll.
"""

from __future__ import annotations

import bisect

from broker.core.controller_admin import AdminRequests
from broker.core.controller_brokers import BrokerLifecycle
from broker.core.controller_state import (
    ControllerConfig,
    LocalMetadataQuorum,
    MetadataQuorum,
    ParkedMetadataFetch,
    UncleanRecoveryEvent,
)
from broker.core.messages import (
    Actions,
    AlterConfigsRequest,
    AlterPartitionRequest,
    AlterReassignmentRequest,
    BrokerHeartbeatRequest,
    BrokerRegistrationRequest,
    CreateAclsRequest,
    CreatePartitionsRequest,
    CreateTopicRequest,
    DeleteAclsRequest,
    DeleteTopicRequest,
    ElectLeadersRequest,
    GetReplicaLogInfoResponse,
    MetadataFetchRequest,
    MetadataFetchResponse,
)

__all__ = ["Controller", "ControllerConfig", "LocalMetadataQuorum", "MetadataQuorum", "UncleanRecoveryEvent"]


class Controller(BrokerLifecycle, AdminRequests):
    """The active controller (the quorum leader's, see quorum_controller.py)."""

    def start(self, now_ms: int) -> Actions:
        """Become active: every unfenced broker gets a fresh session (as on a KRaft
        controller failover)."""
        self._now = now_ms
        for bid, b in self.image.brokers.items():
            if not b.fenced:
                self.last_heartbeat[bid] = now_ms
        return Actions()

    # ------------------------------------------------------------ records
    def _end_batch(self, acts: Actions) -> None:
        """Close the batch of the current call and answer the fetches it makes ready
        (before the call's response: a broker learns a change it caused, e.g. its
        unfencing, before the answer that reports it)."""
        end = self.quorum.end_offset
        if end > max(self._loaded_end, self._batch_ends[-1] if self._batch_ends else 0):
            self._batch_ends.append(end)
        self._answer_parked(acts, only_ready=True)

    # ------------------------------------------------------------ entry points
    def handle(self, src: int | str, msg: object, now_ms: int) -> Actions:
        """Process one request (or a GetReplicaLogInfo response) from `src`."""
        self._now = now_ms
        acts = Actions()
        resp: object = None
        if isinstance(msg, MetadataFetchRequest):
            self._on_metadata_fetch(src, msg, now_ms, acts)  # type: ignore[arg-type]
        elif isinstance(msg, BrokerHeartbeatRequest):
            resp = self._on_heartbeat(msg, now_ms, acts)
        elif isinstance(msg, BrokerRegistrationRequest):
            resp = self._on_registration(msg, now_ms, acts)
        elif isinstance(msg, AlterPartitionRequest):
            resp = self._on_alter_partition(msg, acts)
        elif isinstance(msg, CreateTopicRequest):
            resp = self._on_create_topic(msg, acts)
        elif isinstance(msg, DeleteTopicRequest):
            resp = self._on_delete_topic(msg, acts)
        elif isinstance(msg, ElectLeadersRequest):
            resp = self._on_elect_leaders(msg, acts)
        elif isinstance(msg, CreatePartitionsRequest):
            resp = self._on_create_partitions(msg, acts)
        elif isinstance(msg, AlterConfigsRequest):
            resp = self._on_alter_configs(msg, acts)
        elif isinstance(msg, AlterReassignmentRequest):
            resp = self._on_alter_reassignment(msg, acts)
        elif isinstance(msg, GetReplicaLogInfoResponse):
            self._on_log_info(msg, acts)
        elif isinstance(msg, CreateAclsRequest):
            resp = self._on_create_acls(msg, acts)
        elif isinstance(msg, DeleteAclsRequest):
            resp = self._on_delete_acls(msg, acts)
        else:
            raise TypeError(f"controller cannot handle {type(msg).__name__}")
        self._maybe_start_recovery(now_ms, acts)
        self._end_batch(acts)
        if resp is not None:
            acts.send(src, resp)
        return acts

    def tick(self, now_ms: int) -> Actions:
        """Fence expired sessions, time out parked fetches and recovery rounds."""
        self._now = now_ms
        acts = Actions()
        for bid, b in sorted(self.image.brokers.items()):
            if not b.fenced and now_ms - self.last_heartbeat.get(bid, now_ms) > self.config.broker_session_timeout_ms:
                self._fence(bid, acts)
        for tp, rnd in list(self._recovery.items()):
            if now_ms >= rnd.deadline:
                self._finish_recovery(tp, rnd, acts, timed_out=True)
        self._maybe_start_recovery(now_ms, acts)
        self._end_batch(acts)
        self._answer_parked(acts, only_ready=False, now_ms=now_ms)
        return acts

    def committed(self, now_ms: int) -> Actions:
        """The quorum's high watermark may have moved: answer the metadata fetches it
        makes ready (a `LocalMetadataQuorum` commits at once and needs no such call)."""
        self._now = now_ms
        acts = Actions()
        if self._parked:
            self._answer_parked(acts, only_ready=True)
        return acts

    def next_deadline(self) -> int | None:
        ds = [p.deadline for p in self._parked] + [r.deadline for r in self._recovery.values()]
        for bid, b in self.image.brokers.items():
            if not b.fenced and bid in self.last_heartbeat:
                ds.append(self.last_heartbeat[bid] + self.config.broker_session_timeout_ms + 1)
        return min(ds) if ds else None

    # ------------------------------------------------------------ metadata fetch
    def _on_metadata_fetch(self, src: int, req: MetadataFetchRequest, now_ms: int, acts: Actions) -> None:
        if req.fetch_offset < self.quorum.committed_offset or req.max_wait_ms <= 0:
            acts.send(src, self._metadata_response(req))
        else:
            self._parked = [p for p in self._parked if p.src != src]
            self._parked.append(ParkedMetadataFetch(src, req, now_ms + req.max_wait_ms))

    def _metadata_response(self, req: MetadataFetchRequest) -> MetadataFetchResponse:
        end = self.quorum.committed_offset
        stop = self._fetch_end(req.fetch_offset, min(end, req.fetch_offset + self.config.max_metadata_records_per_fetch))
        n = max(0, stop - req.fetch_offset)
        return MetadataFetchResponse(req.correlation_id, self.quorum.read_from(req.fetch_offset, n), end)

    def _fetch_end(self, start: int, limit: int) -> int:
        """Where a fetch from `start` capped at `limit` ends: the last batch boundary in
        (start, limit], else the end of the batch that crosses `limit` (a batch longer
        than the cap goes whole). Offsets up to `_loaded_end` all count as boundaries."""
        ends = self._batch_ends
        if limit <= self._loaded_end or not ends or limit >= ends[-1]:
            return limit
        i = bisect.bisect_right(ends, limit)  # ends[i - 1] <= limit < ends[i]
        if i > 0 and ends[i - 1] > start:
            return ends[i - 1]
        if self._loaded_end > start:
            return self._loaded_end
        return ends[i]

    def _answer_parked(self, acts: Actions, only_ready: bool, now_ms: int = 0) -> None:
        keep = []
        for p in self._parked:
            ready = p.request.fetch_offset < self.quorum.committed_offset
            if ready or (not only_ready and now_ms >= p.deadline):
                acts.send(p.src, self._metadata_response(p.request))
            else:
                keep.append(p)
        self._parked = keep
