"""The replica admin APIs: ElectLeaders and AlterPartitionReassignments (through the active
controller, per partition), ListPartitionReassignments (from this broker's metadata) and
DescribeLogDirs (this broker's logs: size and offset lag per partition) and AlterReplicaLogDirs
(only where a log already is: no moves between dirs).

A request answers once the controller has committed its changes and, when it gave a
timeout, once this broker's metadata shows them (the client's next request may come here).
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode

from broker.core.messages import (
    PREFERRED_ELECTION,
    UNCLEAN_ELECTION,
    AlterReassignmentRequest,
    ElectLeadersRequest,
    TopicPartition,
)
from broker.server.api_admin import admin_timeout
from broker.server.api_base import ApiFamily, Req
from broker.wire import kafka as k

E = ErrorCode


def _by_topic(results: dict[TopicPartition, dict[str, Any]], order: list[str], names: tuple[str, str, str]
              ) -> list[dict[str, Any]]:
    """Per-partition results grouped by topic, topics in `order` (each once); `names`: the
    response's keys for the topic, its partitions and a partition's index."""
    topic_key, parts_key, index_key = names
    out: dict[str, list[dict[str, Any]]] = {t: [] for t in order}
    for tp, r in results.items():
        out.setdefault(tp.topic, []).append({index_key: tp.partition, **r})
    return [{topic_key: t, parts_key: ps} for t, ps in out.items()]


class ReplicaApis(ApiFamily):
    def apis(self) -> dict[int, Callable[[Req, Any], None]]:
        return {k.ELECT_LEADERS: self.elect_leaders, k.ALTER_PARTITION_REASSIGNMENTS: self.alter_reassignments,
                k.LIST_PARTITION_REASSIGNMENTS: self.list_reassignments, k.DESCRIBE_LOG_DIRS: self.describe_log_dirs,
                k.ALTER_REPLICA_LOG_DIRS: self.alter_replica_log_dirs}

    # ------------------------------------------------------------ ElectLeaders
    def elect_leaders(self, req: Req, body: Any) -> None:
        self.spawn(req, body, self._elect(req, body))

    async def _elect(self, req: Req, body: Any) -> None:
        """v0 is a preferred election. With no partitions named, every partition is tried
        and those that need no election are left out (as KRaft)."""
        etype = getattr(body, "election_type", PREFERRED_ELECTION)
        if etype not in (PREFERRED_ELECTION, UNCLEAN_ELECTION):
            req.reply({"throttle_time": 0, "error_code": E.invalid_request, "replica_election_results": []})
            return
        everything = body.topic_partitions is None
        if everything:
            tps = sorted(self.image.partitions)
            order = sorted(self.image.topics)
        else:
            tps = list(dict.fromkeys(TopicPartition(t.topic, p) for t in body.topic_partitions for p in t.partitions))
            order = list(dict.fromkeys(t.topic for t in body.topic_partitions))
        propagate, timeout = admin_timeout(body.timeout)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        answers = await self.ask_controller({tp: ElectLeadersRequest(self.node.new_cid(), tp, etype) for tp in tps}, timeout)
        results: dict[TopicPartition, dict[str, Any]] = {}
        elected: dict[TopicPartition, int] = {}
        for tp, resp in answers.items():
            code = E.request_timed_out if resp is None else resp.error
            if everything and code is E.election_not_needed:
                continue
            results[tp] = {"error_code": code, "error_message": None}
            if code is E.none:
                elected[tp] = resp.leader
        if elected and propagate:
            await self.await_metadata(lambda: all(
                (r := self.image.partitions.get(tp)) is None or r.leader == leader for tp, leader in elected.items()),
                deadline - loop.time())
        req.reply({"throttle_time": 0, "error_code": E.none, "replica_election_results":
                   _by_topic(results, order, ("topic", "partition_result", "partition_id"))})

    # ------------------------------------------------------------ reassignments
    def alter_reassignments(self, req: Req, body: Any) -> None:
        self.spawn(req, body, self._alter_reassignments(req, body))

    async def _alter_reassignments(self, req: Req, body: Any) -> None:
        allow_rf = bool(getattr(body, "allow_replication_factor_change", True))
        asks = {}
        for t in body.topics:
            for p in t.partitions:
                tp = TopicPartition(t.name, p.partition_index)
                replicas = None if p.replicas is None else tuple(p.replicas)
                asks[tp] = AlterReassignmentRequest(self.node.new_cid(), tp, replicas, allow_rf)
        propagate, timeout = admin_timeout(body.timeout)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        answers = await self.ask_controller(asks, timeout)
        results = {}
        for tp, resp in answers.items():
            code = E.request_timed_out if resp is None else resp.error
            results[tp] = {"error_code": code, "error_message": None if resp is None else resp.message or None}
        done = [asks[tp] for tp, r in results.items() if r["error_code"] is E.none]
        if done and propagate:
            await self.await_metadata(lambda: all(self._reassignment_shown(m) for m in done), deadline - loop.time())
        req.reply({"throttle_time": 0, "error_code": E.none, "error_message": None, "responses":
                   _by_topic(results, [t.name for t in body.topics], ("name", "partitions", "partition_index"))})

    def _reassignment_shown(self, m: AlterReassignmentRequest) -> bool:
        reg = self.image.partitions.get(m.tp)
        if reg is None:
            return True
        if m.replicas is None:
            return not reg.reassigning
        return set(reg.target_replicas) == set(m.replicas)

    def list_reassignments(self, req: Req, body: Any) -> None:
        image = self.image
        if body.topics is None:
            wanted = sorted(tp for tp, r in image.partitions.items() if r.reassigning)
        else:
            wanted = [TopicPartition(t.name, p) for t in body.topics for p in t.partition_indexes]
        topics: dict[str, list[dict[str, Any]]] = {}
        for tp in wanted:
            reg = image.partitions.get(tp)
            if reg is not None and reg.reassigning:
                topics.setdefault(tp.topic, []).append({
                    "partition_index": tp.partition, "replicas": list(reg.replicas),
                    "adding_replicas": list(reg.adding_replicas), "removing_replicas": list(reg.removing_replicas)})
        req.reply({"throttle_time": 0, "error_code": E.none, "error_message": None,
                   "topics": [{"name": n, "partitions": ps} for n, ps in topics.items()]})

    # ------------------------------------------------------------ DescribeLogDirs
    def describe_log_dirs(self, req: Req, body: Any) -> None:
        """Every log dir of this broker with the partitions it holds (all, or those of the
        topics named): size in bytes and offset lag (high watermark - log end, at least 0)."""
        store, broker = self.node.store, self.node.broker
        assert store is not None and broker is not None
        if body.topics is None:
            tps = store.partitions()
        else:
            want = {TopicPartition(t.topic, p) for t in body.topics for p in t.partitions}
            tps = [tp for tp in store.partitions() if tp in want]
        results = []
        for d in store.dirs:
            topics: dict[str, list[dict[str, Any]]] = {}
            for tp in tps:
                log = store.get(tp)
                if log is None or store.log_dir_of(tp) != d:
                    continue
                r = broker.partitions.get(tp)
                lag = 0 if r is None else max(0, r.high_watermark - log.log_end_offset)
                topics.setdefault(tp.topic, []).append({"partition_index": tp.partition, "partition_size": log.size_in_bytes,
                                                        "offset_lag": lag, "is_future_key": False})
            try:
                usage = shutil.disk_usage(d)
                total, usable, code = usage.total, usage.free, E.none
            except OSError:
                total, usable, code = -1, -1, E.kafka_storage_error
            results.append({"error_code": code, "log_dir": d, "total_bytes": total, "usable_bytes": usable,
                            "topics": [{"name": n, "partitions": ps} for n, ps in topics.items()]})
        req.reply({"throttle_time": 0, "error_code": E.none, "results": results})

    # ------------------------------------------------------------ AlterReplicaLogDirs
    def alter_replica_log_dirs(self, req: Req, body: Any) -> None:
        """Per partition: LOG_DIR_NOT_FOUND for a dir that is not one of `log.dirs`,
        REPLICA_NOT_AVAILABLE for a partition this broker holds no log of, NONE when its log
        is already there (a no-op, as Kafka), and for a move to another dir
        UNKNOWN_SERVER_ERROR: this broker does not move logs between dirs (no future replicas;
        docs/broker.md "Known limits")."""
        store = self.node.store
        assert store is not None
        results: dict[str, list[dict[str, Any]]] = {}
        for d in body.dirs:
            for t in d.topics:
                for p in t.partitions:
                    tp = TopicPartition(t.name, p)
                    if d.path not in store.dirs:
                        code = E.log_dir_not_found
                    elif store.get(tp) is None:
                        code = E.replica_not_available
                    elif store.log_dir_of(tp) == d.path:
                        code = E.none
                    else:
                        code = E.unknown_server_error
                    results.setdefault(t.name, []).append({"partition_index": p, "error_code": code})
        req.reply({"throttle_time": 0, "results": [{"topic_name": n, "partitions": ps} for n, ps in results.items()]})
