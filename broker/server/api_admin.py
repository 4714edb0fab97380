"""Metadata and the topic admin APIs: Metadata (with auto-creation), CreateTopics (placed
or manually assigned, with topic configs), DeleteTopics and CreatePartitions, through the
active controller (the rules are broker/core/admin_rules.py)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode

from broker.config import topic_config_entries
from broker.core.acls import INT_MIN, RT_CLUSTER, RT_TOPIC, all_operations
from broker.core.admin_rules import AdminError, new_topic_configs, ordered_assignments
from broker.core.messages import (
    NO_LEADER,
    CreatePartitionsRequest,
    CreateTopicRequest,
    DeleteTopicRequest,
)
from broker.core.properties import BY_TOPIC_NAME
from broker.core.txn_state import STATE_TOPIC
from broker.server.api_base import ADMIN_FALLBACK_TIMEOUT_S, ApiFamily, HandlerHost, Req
from broker.wire import kafka as k

E = ErrorCode
_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]{1,249}")
TIMED_OUT = {"error_code": E.request_timed_out, "error_message": "the controller did not answer in time"}


def valid_topic_name(name: str | None) -> bool:
    return bool(name) and name not in (".", "..") and _TOPIC_NAME.fullmatch(name) is not None  # type: ignore[arg-type]


def topic_settable(key: str) -> bool:
    """Whether a topic's DescribeConfigs line may be altered (a topic-scoped property)."""
    p = BY_TOPIC_NAME.get(key)
    return p is not None and p.settable_on_topics


def admin_timeout(timeout: Any) -> tuple[bool, float]:
    """(whether to wait for the metadata to spread, seconds to wait) for an admin request's
    timeout: <= 0 answers once the controller has."""
    ms = k.ms(timeout)
    return ms > 0, ms / 1000.0 if ms > 0 else ADMIN_FALLBACK_TIMEOUT_S


class AdminApis(ApiFamily):
    def __init__(self, node: HandlerHost) -> None:
        super().__init__(node)
        self._creating: set[str] = set()  # topics being auto-created

    def apis(self) -> dict[int, Callable[[Req, Any], None]]:
        return {k.METADATA: self.metadata, k.CREATE_TOPICS: self.create_topics, k.DELETE_TOPICS: self.delete_topics,
                k.CREATE_PARTITIONS: self.create_partitions}

    # ------------------------------------------------------------ Metadata
    def _live_brokers(self, listener: str) -> list[dict[str, Any]]:
        out = []
        for bid, info in sorted(self.image.brokers.items()):
            if info.fenced:
                continue
            ep = self._endpoint(bid, listener)
            if ep is not None:
                out.append({"node_id": bid, "host": ep.host, "port": ep.port, "rack": None})
        return out

    def metadata(self, req: Req, body: Any) -> None:
        image = self.image
        if body.topics is None:
            names: list[str | None] = sorted(image.topics)
        else:
            names = []
            by_id = self._topics_by_id()
            for t in body.topics:
                name = getattr(t, "name", None)
                if name is None and getattr(t, "topic_id", None) is not None:
                    name = by_id.get(t.topic_id)
                names.append(name)
        auto = getattr(body, "allow_auto_topic_creation", True) and self.s.auto_create_topics_enable
        # no authorizer: every operation is allowed, so asked-for bitsets are full (Kafka's
        # AuthHelper.authorizedOperations without an authorizer)
        topic_ops = all_operations(RT_TOPIC) if getattr(body, "include_topic_authorized_operations", False) else INT_MIN
        cluster_ops = all_operations(RT_CLUSTER) if getattr(body, "include_cluster_authorized_operations", False) else INT_MIN
        topics = []
        for name in names:
            if name is None:
                topics.append({"error_code": E.unknown_topic_id, "name": None, "partitions": []})
            elif name in image.topics:
                topics.append({**self._describe_topic(name), "topic_authorized_operations": topic_ops})
            elif not valid_topic_name(name):
                topics.append({"error_code": E.invalid_topic_exception, "name": name, "partitions": []})
            elif auto:
                self._auto_create(name)
                topics.append({"error_code": E.leader_not_available, "name": name, "partitions": []})
            else:
                topics.append({"error_code": E.unknown_topic_or_partition, "name": name, "partitions": []})
        brokers = self._live_brokers(req.conn.listener)
        live = [b["node_id"] for b in brokers]
        # KRaft (KIP-590): clients send admin requests to any broker; name one they can
        # reach, from the list (librdkafka waits for a controller that is not listed)
        controller = self.node.node_id if self.node.node_id in live else (live[0] if live else -1)
        req.reply({
            "throttle_time": 0,
            "brokers": brokers,
            "cluster_id": self.s.cluster_id,
            "controller_id": controller,
            "topics": topics,
            "cluster_authorized_operations": cluster_ops,
        })

    def _describe_topic(self, name: str) -> dict[str, Any]:
        image = self.image
        parts = []
        for tp, reg in sorted(((tp, r) for tp, r in image.partitions.items() if tp.topic == name), key=lambda x: x[0].partition):
            offline = [r for r in reg.replicas if r not in image.brokers or image.brokers[r].fenced]
            parts.append({
                "error_code": E.leader_not_available if reg.leader == NO_LEADER else E.none,
                "partition_index": tp.partition,
                "leader_id": reg.leader,
                "leader_epoch": reg.leader_epoch,
                "replica_nodes": list(reg.replicas),
                "isr_nodes": list(reg.isr),
                "offline_replicas": offline,
            })
        return {"error_code": E.none, "name": name, "topic_id": image.topic_ids.get(name), "is_internal": name == STATE_TOPIC,
                "partitions": parts, "topic_authorized_operations": INT_MIN}

    def _auto_create(self, name: str) -> None:
        if name in self._creating:
            return
        self._creating.add(name)
        msg = CreateTopicRequest(self.node.new_cid(), name, self.s.num_partitions, self.s.default_replication_factor)
        fut = self.node.forward_to_controller(msg)

        def done(f: asyncio.Future[Any]) -> None:
            self._creating.discard(name)
            if not f.cancelled() and f.result().error is E.none:
                self.log.info("auto-created topic %s (%d partitions, RF %d)", name, msg.num_partitions, msg.replication_factor)

        fut.add_done_callback(done)
        asyncio.get_running_loop().call_later(30, lambda: fut.done() or fut.cancel())

    # ------------------------------------------------------------ CreateTopics / DeleteTopics
    def create_topics(self, req: Req, body: Any) -> None:
        self.spawn(req, body, self._create_topics(req, body))

    def _check_new_topic(self, t: Any, seen: set[str], validate_only: bool
                         ) -> tuple[CreateTopicRequest | None, dict[str, Any]]:
        """The controller request for one CreateTopics entry, or None and its error."""
        def fail(code: ErrorCode, text: str) -> tuple[None, dict[str, Any]]:
            return None, {"error_code": code, "error_message": text}

        name = t.name
        if name in seen:
            return fail(E.invalid_request, "topic listed twice")
        seen.add(name)
        if not valid_topic_name(name):
            return fail(E.invalid_topic_exception, f"invalid topic name {name!r}")
        np, rf = t.num_partitions, t.replication_factor
        assignments: tuple[tuple[int, ...], ...] = ()
        if t.assignments:
            try:
                assignments = ordered_assignments((a.partition_index, tuple(a.broker_ids)) for a in t.assignments)
            except AdminError as e:
                return fail(e.code, e.message)
        else:
            np = np if np != -1 else self.s.num_partitions
            rf = rf if rf != -1 else self.s.default_replication_factor
            if np <= 0:
                return fail(E.invalid_partitions, f"number of partitions must be positive, got {np}")
            if rf <= 0:
                return fail(E.invalid_replication_factor, f"replication factor must be positive, got {rf}")
        if name in self.image.topics:
            return fail(E.topic_already_exists, f"Topic '{name}' already exists.")
        configs = tuple((c.name, c.value) for c in t.configs)
        return CreateTopicRequest(self.node.new_cid(), name, np, rf, configs, assignments, validate_only), {}

    async def _create_topics(self, req: Req, body: Any) -> None:
        propagate, timeout = admin_timeout(body.timeout)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        results: dict[str, dict[str, Any]] = {}
        asks: dict[str, CreateTopicRequest] = {}
        seen: set[str] = set()
        validate_only = bool(getattr(body, "validate_only", False))
        for t in body.topics:
            msg, err = self._check_new_topic(t, seen, validate_only)
            if msg is None:
                results.setdefault(t.name, err)
            else:
                asks[t.name] = msg
        for name, resp in (await self.ask_controller(asks, timeout)).items():
            results[name] = TIMED_OUT if resp is None else {"error_code": resp.error, "error_message": resp.message or None}
        created = {n: asks[n] for n in asks if results[n]["error_code"] is E.none and not asks[n].validate_only}
        if created and propagate:  # answer once this broker's metadata shows the new topics (clients ask it next)
            want = {n: len(m.assignments) or m.num_partitions for n, m in created.items()}
            await self.await_metadata(
                lambda: all(sum(1 for tp in self.image.partitions if tp.topic == n) == c for n, c in want.items()),
                deadline - loop.time())
        req.reply({"throttle_time": 0, "topics": [self._created(t.name, results[t.name], asks.get(t.name))
                                                  for t in body.topics]})

    def _created(self, name: str, result: dict[str, Any], ask: CreateTopicRequest | None) -> dict[str, Any]:
        """One CreateTopics result: with the partitions, replication factor and effective
        configs (v5+) of a topic created (or validated)."""
        out = {"name": name, "topic_id": self.image.topic_ids.get(name), **result, "num_partitions": -1,
               "replication_factor": -1, "configs": []}
        if result["error_code"] is E.none and ask is not None:
            out["num_partitions"] = len(ask.assignments) or ask.num_partitions
            out["replication_factor"] = len(ask.assignments[0]) if ask.assignments else ask.replication_factor
            given = dict(new_topic_configs(ask.configs))
            out["configs"] = [{"name": e.name, "value": e.value, "read_only": not topic_settable(e.name),
                               "config_source": e.source, "is_sensitive": False}
                              for e in sorted(topic_config_entries(self.s, given).values(), key=lambda e: e.name)]
        return out

    def delete_topics(self, req: Req, body: Any) -> None:
        self.spawn(req, body, self._delete_topics(req, body))

    async def _delete_topics(self, req: Req, body: Any) -> None:
        propagate, timeout = admin_timeout(body.timeout)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        image = self.image
        by_id = {tid: n for n, tid in image.topic_ids.items()}
        if req.version >= 6:
            wanted = [(t.name if t.name is not None else by_id.get(t.topic_id), t.topic_id) for t in body.topics]
        else:
            wanted = [(n, None) for n in body.topic_names]
        results: dict[int, dict[str, Any]] = {}
        asks: dict[int, DeleteTopicRequest] = {}
        for i, (name, _tid) in enumerate(wanted):
            if name is None:
                results[i] = {"error_code": E.unknown_topic_id}
            elif name not in image.topics:
                results[i] = {"error_code": E.unknown_topic_or_partition}
            else:
                asks[i] = DeleteTopicRequest(self.node.new_cid(), name)
        for i, resp in (await self.ask_controller(asks, timeout)).items():
            results[i] = TIMED_OUT if resp is None else {"error_code": resp.error, "error_message": resp.message or None}
        gone = [asks[i].name for i in asks if results[i]["error_code"] is E.none]
        if gone and propagate:
            await self.await_metadata(lambda: not any(n in self.image.topics for n in gone), deadline - loop.time())
        out = [{"name": name, "topic_id": tid or image.topic_ids.get(name or ""), **results[i]}
               for i, (name, tid) in enumerate(wanted)]
        req.reply({"throttle_time": 0, "responses": out})

    # ------------------------------------------------------------ CreatePartitions
    def create_partitions(self, req: Req, body: Any) -> None:
        self.spawn(req, body, self._create_partitions(req, body))

    async def _create_partitions(self, req: Req, body: Any) -> None:
        """Grow topics (KRaft's createPartitions); a topic named twice is INVALID_REQUEST."""
        propagate, timeout = admin_timeout(body.timeout)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        names = [t.name for t in body.topics]
        results: dict[str, dict[str, Any]] = {}
        asks: dict[str, CreatePartitionsRequest] = {}
        for t in body.topics:
            if names.count(t.name) > 1:
                results[t.name] = {"error_code": E.invalid_request, "error_message": "Duplicate topic in request."}
                continue
            assignments = tuple(tuple(a.broker_ids) for a in t.assignments or ())
            asks[t.name] = CreatePartitionsRequest(self.node.new_cid(), t.name, t.count, assignments, body.validate_only)
        for name, resp in (await self.ask_controller(asks, timeout)).items():
            results[name] = TIMED_OUT if resp is None else {"error_code": resp.error, "error_message": resp.message or None}
        grown = {n: m.count for n, m in asks.items() if results[n]["error_code"] is E.none and not m.validate_only}
        if grown and propagate:
            await self.await_metadata(
                lambda: all(sum(1 for tp in self.image.partitions if tp.topic == n) >= c for n, c in grown.items()),
                deadline - loop.time())
        req.reply({"throttle_time": 0, "results": [{"name": n, **results[n]} for n in dict.fromkeys(names)]})
