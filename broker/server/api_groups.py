"""The consumer-group APIs: FindCoordinator, OffsetCommit/OffsetFetch/OffsetDelete (the
offset store), the group membership protocol (JoinGroup, SyncGroup, Heartbeat,
LeaveGroup, DescribeGroups, ListGroups; broker/server/groups.py) and DeleteGroups.

A group is known to its coordinator by its membership state or by committed offsets
(after a restart only the offsets remain): such a group without members is Empty."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode

from broker.core.acls import RT_GROUP, all_operations
from broker.core.messages import (
    TopicPartition,
)
from broker.server.api_base import ApiFamily, HandlerHost, Req
from broker.server.offsets import Committed, coordinator_for
from broker.server.txn_offsets import PendingTxnOffsets
from broker.wire import kafka as k

E = ErrorCode


class GroupApis(ApiFamily):
    def __init__(self, node: HandlerHost, pending_txn_offsets: PendingTxnOffsets | None = None) -> None:
        super().__init__(node)
        self.pending_txn_offsets = pending_txn_offsets or PendingTxnOffsets()

    def apis(self) -> dict[int, Callable[[Req, Any], None]]:
        return {k.FIND_COORDINATOR: self.find_coordinator, k.OFFSET_COMMIT: self.offset_commit,
                k.OFFSET_FETCH: self.offset_fetch, k.JOIN_GROUP: self.join_group, k.SYNC_GROUP: self.sync_group,
                k.HEARTBEAT: self.heartbeat, k.LEAVE_GROUP: self.leave_group,
                k.DESCRIBE_GROUPS: self.describe_groups, k.LIST_GROUPS: self.list_groups,
                k.DELETE_GROUPS: self.delete_groups, k.OFFSET_DELETE: self.offset_delete}

    # ------------------------------------------------------------ groups: coordinator and offsets
    def _coordinator(self, group: str) -> int:
        return coordinator_for(group, list(self.image.brokers))

    def find_coordinator(self, req: Req, body: Any) -> None:
        """A group's coordinator (key type 0; api_txn.py answers transactional ids)."""
        self.reply_coordinator(req, self._coordinator(body.key))

    def reply_coordinator(self, req: Req, node_id: int) -> None:
        """FindCoordinator's answer naming `node_id` (-1: none), COORDINATOR_NOT_AVAILABLE
        when it has no endpoint on the request's listener or is not usable."""
        ep = self._endpoint(node_id, req.conn.listener) if node_id >= 0 else None
        if ep is None or not self.image.is_usable(node_id):
            req.reply({"throttle_time": 0, "error_code": E.coordinator_not_available, "error_message": None,
                       "node_id": -1, "host": "", "port": -1})
            return
        req.reply({"throttle_time": 0, "error_code": E.none, "error_message": None, "node_id": node_id,
                   "host": ep.host, "port": ep.port})

    def offset_commit(self, req: Req, body: Any) -> None:
        store = self.node.offsets
        assert store is not None
        group = body.group_id
        generation = getattr(body, "generation_id_or_member_epoch", -1)
        group_err = E.none
        if self._coordinator(group) != self.node.node_id:
            group_err = E.not_coordinator
        else:
            group_err = self.node.groups.commit_error(self.node.now(), group, generation, body.member_id)
        entries: dict[tuple[str, int], Committed | None] = {}
        out = []
        for t in body.topics:
            prs = []
            for p in t.partitions:
                err = group_err
                if err is E.none and not self._known(TopicPartition(t.name, p.partition_index)):
                    err = E.unknown_topic_or_partition
                if err is E.none:
                    entries[(t.name, p.partition_index)] = Committed(
                        p.committed_offset, getattr(p, "committed_leader_epoch", -1), p.committed_metadata
                    )
                prs.append({"partition_index": p.partition_index, "error_code": err})
            out.append({"name": t.name, "partitions": prs})
        if entries:
            store.commit(group, entries)
        req.reply({"throttle_time": 0, "topics": out})

    def offset_fetch(self, req: Req, body: Any) -> None:
        store = self.node.offsets
        assert store is not None
        group = body.group_id
        if self._coordinator(group) != self.node.node_id:
            err = E.not_coordinator
            topics = [{"name": t.name, "partitions": [{"partition_index": i, "committed_offset": -1, "metadata": "",
                                                       "error_code": err} for i in t.partition_indexes]}
                      for t in body.topics or ()]
            req.reply({"throttle_time": 0, "topics": topics, "error_code": err})
            return
        committed = store.fetch(group)
        if body.topics is None:
            wanted: dict[str, list[int]] = {}
            for (t, p) in sorted(committed):
                wanted.setdefault(t, []).append(p)
        else:
            wanted = {t.name: list(t.partition_indexes) for t in body.topics}
        # KIP-447: a partition with an offset of an unfinished transaction is unstable
        unstable = self.pending_txn_offsets.pending_for(group) if getattr(body, "require_stable", False) else set()
        out = []
        for name, idxs in wanted.items():
            prs = []
            for i in idxs:
                c = committed.get((name, i))
                err = E.unstable_offset_commit if (name, i) in unstable else E.none
                prs.append({"partition_index": i, "committed_offset": c.offset if c else -1,
                            "committed_leader_epoch": c.leader_epoch if c else -1,
                            "metadata": (c.metadata if c and c.metadata is not None else ""), "error_code": err})
            out.append({"name": name, "partitions": prs})
        req.reply({"throttle_time": 0, "topics": out, "error_code": E.none})

    # ------------------------------------------------------------ group membership
    def _not_coordinator(self, req: Req, group: str) -> bool:
        return self._coordinator(group) != self.node.node_id

    def join_group(self, req: Req, body: Any) -> None:
        if self._not_coordinator(req, body.group_id):
            req.reply({"throttle_time": 0, "error_code": E.not_coordinator, "member_id": body.member_id,
                       "protocol_name": "", "leader": "", "members": []})
            return
        v = req.version

        def reply(r: Any) -> None:
            req.reply({"throttle_time": 0, "error_code": r.error, "generation_id": r.generation_id,
                       "protocol_type": r.protocol_type, "protocol_name": r.protocol_name or (None if v >= 7 else ""),
                       "leader": r.leader, "member_id": r.member_id,
                       "members": [{"member_id": mid, "group_instance_id": iid, "metadata": meta} for mid, iid, meta in r.members]})

        self.node.groups.join(
            self.node.now(), body.group_id, body.member_id, getattr(body, "group_instance_id", None),
            req.header.client_id or "", req.conn.peer.rsplit(":", 1)[0], k.ms(body.session_timeout),
            k.ms(getattr(body, "rebalance_timeout", -1)), body.protocol_type,
            [(p.name, p.metadata) for p in body.protocols], v >= 4, reply,
        )
        self.node.schedule_timers()

    def sync_group(self, req: Req, body: Any) -> None:
        if self._not_coordinator(req, body.group_id):
            req.reply({"throttle_time": 0, "error_code": E.not_coordinator, "assignment": b""})
            return

        def reply(r: Any) -> None:
            req.reply({"throttle_time": 0, "error_code": r.error, "protocol_type": r.protocol_type,
                       "protocol_name": r.protocol_name, "assignment": r.assignment})

        self.node.groups.sync(self.node.now(), body.group_id, body.generation_id, body.member_id,
                              {a.member_id: a.assignment for a in body.assignments}, reply)
        self.node.schedule_timers()

    def heartbeat(self, req: Req, body: Any) -> None:
        if self._not_coordinator(req, body.group_id):
            err = E.not_coordinator
        else:
            err = self.node.groups.heartbeat(self.node.now(), body.group_id, body.generation_id, body.member_id)
        req.reply({"throttle_time": 0, "error_code": err})
        self.node.schedule_timers()

    def leave_group(self, req: Req, body: Any) -> None:
        ids = [m.member_id for m in body.members] if req.version >= 3 else [body.member_id]
        if self._not_coordinator(req, body.group_id):
            req.reply({"throttle_time": 0, "error_code": E.not_coordinator, "members": []})
            return
        errs = self.node.groups.leave(self.node.now(), body.group_id, ids)
        top = errs[0] if req.version < 3 else E.none
        members = [{"member_id": mid, "group_instance_id": getattr(m, "group_instance_id", None), "error_code": e}
                   for mid, e, m in zip(ids, errs, body.members if req.version >= 3 else [body], strict=True)]
        req.reply({"throttle_time": 0, "error_code": top, "members": members})
        self.node.schedule_timers()

    def _has_offsets(self, group: str) -> bool:
        store = self.node.offsets
        return store is not None and bool(store.fetch(group))

    def describe_groups(self, req: Req, body: Any) -> None:
        ops = all_operations(RT_GROUP) if getattr(body, "include_authorized_operations", False) else -2147483648
        out = []
        for gid in body.groups:
            if self._not_coordinator(req, gid):
                out.append({"error_code": E.not_coordinator, "group_id": gid, "group_state": "", "protocol_type": "",
                            "protocol_data": "", "members": []})
                continue
            g = self.node.groups.describe(gid)
            if g is None:
                state = "Empty" if self._has_offsets(gid) else "Dead"
                out.append({"error_code": E.none, "group_id": gid, "group_state": state, "protocol_type": "",
                            "protocol_data": "", "members": [], "authorized_operations": ops})
                continue
            out.append({"error_code": E.none, "group_id": gid, "group_state": g.state, "protocol_type": g.protocol_type or "",
                        "authorized_operations": ops,
                        "protocol_data": g.protocol_name or "", "members": [
                            {"member_id": m.member_id, "group_instance_id": m.group_instance_id, "client_id": m.client_id,
                             "client_host": m.client_host, "member_metadata": dict(m.protocols).get(g.protocol_name or "", b""),
                             "member_assignment": m.assignment} for m in g.members.values()]})
        req.reply({"throttle_time": 0, "groups": out})

    def list_groups(self, req: Req, body: Any) -> None:
        states = set(getattr(body, "states_filter", ()) or ())
        known = self.node.groups.groups
        groups = [{"group_id": g.group_id, "protocol_type": g.protocol_type or "", "group_state": g.state}
                  for g in known.values() if not states or g.state in states]
        store = self.node.offsets
        if store is not None and (not states or "Empty" in states):
            groups += [{"group_id": gid, "protocol_type": "", "group_state": "Empty"}
                       for gid, entries in store.groups.items() if entries and gid not in known]
        req.reply({"throttle_time": 0, "error_code": E.none, "groups": groups})

    # ------------------------------------------------------------ DeleteGroups, OffsetDelete
    def delete_groups(self, req: Req, body: Any) -> None:
        """Each group: NOT_COORDINATOR, GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP, or deleted
        with its committed offsets (durably, in the offset store)."""
        out = []
        for gid in body.groups_names:
            if self._not_coordinator(req, gid):
                err = E.not_coordinator
            else:
                err = self.node.groups.delete_error(gid, self._has_offsets(gid))
            if err is E.none:
                self.node.groups.delete(gid)
                assert self.node.offsets is not None
                self.node.offsets.forget(gid)
            out.append({"group_id": gid, "error_code": err})
        req.reply({"throttle_time": 0, "results": out})

    def offset_delete(self, req: Req, body: Any) -> None:
        """Kafka's OffsetDelete: a group error (NOT_COORDINATOR, INVALID_GROUP_ID,
        GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP) or, per partition, UNKNOWN_TOPIC_OR_PARTITION,
        GROUP_SUBSCRIBED_TO_TOPIC (a consumer group with members reading that topic) or
        NONE (its offset, if any, forgotten durably)."""
        gid = body.group_id
        if self._not_coordinator(req, gid):
            err, keep = E.not_coordinator, None
        else:
            err, keep = self.node.groups.offset_delete_scope(gid, self._has_offsets(gid))
        if err is not E.none:
            req.reply({"error_code": err, "throttle_time": 0, "topics": []})
            return
        gone: list[tuple[str, int]] = []
        topics = []
        for t in body.topics:
            prs = []
            for p in t.partitions:
                if not self._known(TopicPartition(t.name, p.partition_index)):
                    perr = E.unknown_topic_or_partition
                elif keep is None or t.name in keep:
                    perr = E.group_subscribed_to_topic
                else:
                    perr = E.none
                    gone.append((t.name, p.partition_index))
                prs.append({"partition_index": p.partition_index, "error_code": perr})
            topics.append({"name": t.name, "partitions": prs})
        if gone:
            assert self.node.offsets is not None
            self.node.offsets.forget(gid, gone)
        req.reply({"error_code": E.none, "throttle_time": 0, "topics": topics})
