"""Metadata and the admin APIs: Metadata (with auto-creation), CreateTopics, DeleteTopics
(through the active controller) and DescribeConfigs (from the property table)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode

from broker.config import ConfigEntry, broker_config_entries, topic_config_entries
from broker.core.acls import INT_MIN, RT_CLUSTER, RT_TOPIC, all_operations
from broker.core.messages import (
    NO_LEADER,
    CreateTopicRequest,
    DeleteTopicRequest,
)
from broker.core.properties import ConfigSource, ConfigType
from broker.server.api_base import ApiFamily, HandlerHost, Req, reply_error
from broker.wire import kafka as k

E = ErrorCode
_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]{1,249}")
FLUSH_POLICY = "wrack.flush.policy"  # a read-only DescribeConfigs line, not a property
ADMIN_FALLBACK_TIMEOUT_S = 30.0  # how long a CreateTopics/DeleteTopics with timeout 0 waits for the controller


def valid_topic_name(name: str | None) -> bool:
    return bool(name) and name not in (".", "..") and _TOPIC_NAME.fullmatch(name) is not None  # type: ignore[arg-type]


class AdminApis(ApiFamily):
    def __init__(self, node: HandlerHost) -> None:
        super().__init__(node)
        self._creating: set[str] = set()  # topics being auto-created

    def apis(self) -> dict[int, Callable[[Req, Any], None]]:
        return {k.METADATA: self.metadata, k.CREATE_TOPICS: self.create_topics, k.DELETE_TOPICS: self.delete_topics,
                k.DESCRIBE_CONFIGS: self.describe_configs}

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
        return {"error_code": E.none, "name": name, "topic_id": image.topic_ids.get(name), "is_internal": False,
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
        self._spawn(req, body, self._create_topics(req, body))

    def _spawn(self, req: Req, body: Any, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)

        def done(t: asyncio.Task[Any]) -> None:
            if t.cancelled():
                return
            if t.exception() is not None:
                self.log.error("%r: %r failed: %r", req.conn, req.header, t.exception())
                reply_error(req, body, E.unknown_server_error, self.log)

        task.add_done_callback(done)

    async def _create_topics(self, req: Req, body: Any) -> None:
        # timeout <= 0: answer once the controller has (not waiting for the metadata to spread)
        propagate = k.ms(body.timeout) > 0
        timeout = k.ms(body.timeout) / 1000.0 if propagate else ADMIN_FALLBACK_TIMEOUT_S
        validate_only = getattr(body, "validate_only", False)
        image = self.image
        results: dict[str, dict[str, Any]] = {}
        futures: dict[str, asyncio.Future[Any]] = {}
        sizes: dict[str, tuple[int, int]] = {}
        seen: set[str] = set()
        for t in body.topics:
            name = t.name
            np = t.num_partitions if t.num_partitions != -1 else self.s.num_partitions
            rf = t.replication_factor if t.replication_factor != -1 else self.s.default_replication_factor
            sizes[name] = (np, rf)
            err, text = E.none, None
            if name in seen:
                err, text = E.invalid_request, "topic listed twice"
            elif not valid_topic_name(name):
                err, text = E.invalid_topic_exception, f"invalid topic name {name!r}"
            elif t.assignments:
                err, text = E.invalid_request, "manual replica assignment is not supported"
            elif np <= 0:
                err, text = E.invalid_partitions, f"number of partitions must be positive, got {np}"
            elif rf <= 0:
                err, text = E.invalid_replication_factor, f"replication factor must be positive, got {rf}"
            elif name in image.topics:
                err, text = E.topic_already_exists, f"topic {name!r} already exists"
            elif validate_only:
                usable = sum(1 for b in image.brokers if image.is_usable(b))
                if rf > usable:
                    err, text = E.invalid_replication_factor, f"replication factor {rf} is larger than {usable} available brokers"
            seen.add(name)
            if err is not E.none or validate_only:
                results[name] = {"error_code": err, "error_message": text}
                continue
            configs = tuple((c.name, c.value) for c in t.configs)
            futures[name] = self.node.forward_to_controller(CreateTopicRequest(self.node.new_cid(), name, np, rf, configs))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        if futures:
            await asyncio.wait(list(futures.values()), timeout=timeout)
        created = []
        for name, fut in futures.items():
            if not fut.done() or fut.cancelled():
                fut.cancel()
                results[name] = {"error_code": E.request_timed_out, "error_message": "the controller did not answer in time"}
                continue
            resp = fut.result()
            results[name] = {"error_code": resp.error, "error_message": resp.message or None}
            if resp.error is E.none:
                created.append(name)
        if created and propagate:  # answer once this broker's metadata shows the new topics (clients ask it next)
            want = {n: sizes[n][0] for n in created}
            wait = self.node.wait_for_metadata(
                lambda: all(sum(1 for tp in self.image.partitions if tp.topic == n) == c for n, c in want.items())
            )
            try:
                await asyncio.wait_for(wait, max(deadline - loop.time(), 0.05))
            except TimeoutError:
                pass
        out = []
        for t in body.topics:
            r = results[t.name]
            np, rf = sizes[t.name]
            ok = r["error_code"] is E.none
            out.append({"name": t.name, "topic_id": self.image.topic_ids.get(t.name), **r,
                        "num_partitions": np if ok else -1, "replication_factor": rf if ok else -1, "configs": []})
        req.reply({"throttle_time": 0, "topics": out})

    def delete_topics(self, req: Req, body: Any) -> None:
        self._spawn(req, body, self._delete_topics(req, body))

    async def _delete_topics(self, req: Req, body: Any) -> None:
        # timeout <= 0: answer once the controller has (not waiting for the metadata to spread)
        propagate = k.ms(body.timeout) > 0
        timeout = k.ms(body.timeout) / 1000.0 if propagate else ADMIN_FALLBACK_TIMEOUT_S
        image = self.image
        by_id = {tid: n for n, tid in image.topic_ids.items()}
        wanted: list[tuple[str | None, Any]] = []
        if req.version >= 6:
            for t in body.topics:
                wanted.append((t.name if t.name is not None else by_id.get(t.topic_id), t.topic_id))
        else:
            wanted = [(n, None) for n in body.topic_names]
        results: dict[int, dict[str, Any]] = {}
        futures: dict[int, asyncio.Future[Any]] = {}
        for i, (name, _tid) in enumerate(wanted):
            if name is None:
                results[i] = {"error_code": E.unknown_topic_id}
            elif name not in image.topics:
                results[i] = {"error_code": E.unknown_topic_or_partition}
            else:
                futures[i] = self.node.forward_to_controller(DeleteTopicRequest(self.node.new_cid(), name))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        if futures:
            await asyncio.wait(list(futures.values()), timeout=timeout)
        gone = []
        for i, fut in futures.items():
            if not fut.done() or fut.cancelled():
                fut.cancel()
                results[i] = {"error_code": E.request_timed_out}
            else:
                results[i] = {"error_code": fut.result().error, "error_message": fut.result().message or None}
                if fut.result().error is E.none:
                    gone.append(wanted[i][0])
        if gone and propagate:
            wait = self.node.wait_for_metadata(lambda: not any(n in self.image.topics for n in gone))
            try:
                await asyncio.wait_for(wait, max(deadline - loop.time(), 0.05))
            except TimeoutError:
                pass
        out = [{"name": name, "topic_id": tid or image.topic_ids.get(name or ""), **results[i]}
               for i, (name, tid) in enumerate(wanted)]
        req.reply({"throttle_time": 0, "responses": out})

    # ------------------------------------------------------------ DescribeConfigs
    def describe_configs(self, req: Req, body: Any) -> None:
        out = []
        for res in body.resources:
            keys = set(res.configuration_keys) if res.configuration_keys else None
            if res.resource_type == 2:  # TOPIC
                if res.resource_name not in self.image.topics:
                    out.append({"error_code": E.unknown_topic_or_partition, "error_message": f"no topic {res.resource_name!r}",
                                "resource_type": 2, "resource_name": res.resource_name, "configs": []})
                    continue
                entries = self._topic_configs(res.resource_name)
            elif res.resource_type == 4:  # BROKER
                if res.resource_name not in ("", str(self.node.node_id)):
                    out.append({"error_code": E.invalid_request, "error_message": "only this broker's configs are served here",
                                "resource_type": 4, "resource_name": res.resource_name, "configs": []})
                    continue
                entries = self._broker_configs()
            else:
                out.append({"error_code": E.invalid_request, "error_message": f"resource type {res.resource_type} is not supported",
                            "resource_type": res.resource_type, "resource_name": res.resource_name, "configs": []})
                continue
            docs = bool(getattr(body, "include_documentation", False))
            configs = [
                {"name": e.name, "value": e.value, "read_only": True, "config_source": e.source, "is_sensitive": False,
                 "synonyms": [], "config_type": e.type, "documentation": e.doc if docs else None,
                 "is_default": e.source == ConfigSource.DEFAULT_CONFIG}
                for e in sorted(entries.values(), key=lambda e: e.name) if keys is None or e.name in keys
            ]
            out.append({"error_code": E.none, "error_message": None, "resource_type": res.resource_type,
                        "resource_name": res.resource_name, "configs": configs})
        req.reply({"throttle_time": 0, "results": out})

    def _topic_configs(self, name: str) -> dict[str, ConfigEntry]:
        """Every topic property (broker/core/properties.py) and the flush policy line."""
        entries = topic_config_entries(self.s, self.image.topics.get(name, {}))
        entries[FLUSH_POLICY] = self._flush_policy()
        return entries

    def _broker_configs(self) -> dict[str, ConfigEntry]:
        """Every broker and storage property (broker/core/properties.py) and the flush policy line."""
        entries = broker_config_entries(self.s)
        entries[FLUSH_POLICY] = self._flush_policy()
        return entries

    def _flush_policy(self) -> ConfigEntry:
        """`wrack.flush.policy`: not a property but the storage's description of the flush
        policy the log.flush.* properties make (read-only)."""
        store = self.node.store
        given = any(k.startswith("log.flush.") for k in self.s.storage)
        return ConfigEntry(FLUSH_POLICY, store.describe_flush_policy() if store is not None else "",
                           ConfigSource.STATIC_BROKER_CONFIG if given else ConfigSource.DEFAULT_CONFIG, ConfigType.STRING,
                           "How the storage flushes (from the log.flush.* properties).")
