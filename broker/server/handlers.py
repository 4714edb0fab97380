"""Kafka API handlers: from decoded kio requests to core messages and back.

`Handlers.dispatch(conn, frame, slot)` parses one request and completes its slot (now
or later). Bad input never raises out of it:
- a frame whose header or body does not decode: the connection is closed (as Kafka);
- an API key this broker does not implement: the connection is closed (as Kafka);
- ApiVersions at an unknown version: a v0 response with UNSUPPORTED_VERSION and the
  supported versions (KIP-511), so the client retries with a version we speak;
- another API at a version outside `SUPPORTED` but known to kio: that version's
  response with UNSUPPORTED_VERSION in every error field;
- an exception in a handler: UNKNOWN_SERVER_ERROR in every error field (logged).

Per-API behaviour follows Kafka; what differs is said in docs/broker.md.

What the handlers need of the node is `HandlerHost` (the node of broker/server/node.py is
one), so this module does not import the node.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable
from typing import Any, Protocol

from kio.schema.errors import ErrorCode

from broker.config import BrokerSettings, ConfigEntry, broker_config_entries, topic_config_entries
from broker.core.broker import MAX_TIMESTAMP, Broker
from broker.core.messages import (
    NO_LEADER,
    CreateTopicRequest,
    DeleteTopicRequest,
    FetchPartition,
    FetchRequest,
    OffsetsForLeaderEpochRequest,
    ProduceRequest,
    TopicPartition,
)
from broker.core.properties import ConfigSource, ConfigType
from broker.records import validate_for_append
from broker.server.connection import KafkaConnection, Slot
from broker.server.groups import GroupCoordinator
from broker.server.offsets import Committed, OffsetStore, coordinator_for
from broker.storage import LogManager
from broker.wire import kafka as k
from broker.wire.fetch_codec import PartitionData, TopicData, encode_fetch_response

E = ErrorCode
_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]{1,249}")
FLUSH_POLICY = "wrack.flush.policy"  # a read-only DescribeConfigs line, not a property
ADMIN_FALLBACK_TIMEOUT_S = 30.0  # how long a CreateTopics/DeleteTopics with timeout 0 waits for the controller


def valid_topic_name(name: str | None) -> bool:
    return bool(name) and name not in (".", "..") and _TOPIC_NAME.fullmatch(name) is not None  # type: ignore[arg-type]


def check_batches(records: bytes | None, max_message_bytes: int) -> ErrorCode:
    """What a leader checks before appending a Produce partition (v3+: exactly one v2
    batch, length and CRC-32C valid, not transactional or control, within
    message.max.bytes): `broker.records.validate_for_append`, then the one-batch rule."""
    if not records:
        return E.invalid_record
    if len(records) > max_message_bytes:
        return E.message_too_large
    try:
        headers = validate_for_append(records, max_message_bytes)
    except ValueError as e:
        return getattr(e, "error_code", E.corrupt_message)
    if len(headers) != 1:
        return E.invalid_record
    if headers[0].attributes & 0x30:
        return E.invalid_record  # transactional / control batches: no transactions here
    return E.none


class Req:
    """One request being handled: where its response goes."""

    __slots__ = ("conn", "slot", "key", "version", "cid", "header")

    def __init__(self, conn: KafkaConnection, header: k.RequestHeader, slot: Slot) -> None:
        self.conn = conn
        self.slot = slot
        self.header = header
        self.key = header.api_key
        self.version = header.api_version
        self.cid = header.correlation_id

    def reply(self, value: dict[str, Any]) -> None:
        if self.slot.done:
            return
        body = k.response(self.key, self.version, value)
        self.slot.complete(k.encode_response(self.key, self.version, self.cid, body))


class HandlerHost(Protocol):
    """What the handlers use of the node: its parts (None until started, or on a
    controller-only node), its clock and ids, and its ways to the broker core and the
    controller."""

    @property
    def s(self) -> BrokerSettings: ...

    @property
    def log(self) -> logging.Logger: ...

    @property
    def node_id(self) -> int: ...

    @property
    def broker(self) -> Broker | None: ...

    @property
    def store(self) -> LogManager | None: ...

    @property
    def offsets(self) -> OffsetStore | None: ...

    @property
    def groups(self) -> GroupCoordinator | None: ...

    def now(self) -> int:
        """The node's clock, monotonic milliseconds."""

    def new_cid(self) -> int:
        """A fresh correlation id for a core message."""

    def to_broker(self, src: int | str, msg: object, waiter: Callable[[Any], None] | None = None) -> None:
        """Feed `msg` to the broker core; `waiter` gets the response to it."""

    def forward_to_controller(self, msg: Any) -> asyncio.Future[Any]:
        """Send an admin request to the active controller; a future of its response."""

    def wait_for_metadata(self, pred: Callable[[], bool]) -> asyncio.Future[None]:
        """A future done once `pred()` holds for the broker's metadata image."""

    def schedule_timers(self) -> None:
        """Re-read the deadlines soon (after something outside the core changed them)."""


class Handlers:
    def __init__(self, node: HandlerHost) -> None:
        self.node = node
        self.s = node.s
        self.log = node.log.getChild("api")
        self._creating: set[str] = set()
        self._by_id: dict[Any, str] = {}
        self._by_id_offset = -1
        self.table: dict[int, Callable[[Req, Any], None]] = {
            k.PRODUCE: self.produce,
            k.FETCH: self.fetch,
            k.LIST_OFFSETS: self.list_offsets,
            k.METADATA: self.metadata,
            k.OFFSET_COMMIT: self.offset_commit,
            k.OFFSET_FETCH: self.offset_fetch,
            k.FIND_COORDINATOR: self.find_coordinator,
            k.API_VERSIONS: self.api_versions,
            k.CREATE_TOPICS: self.create_topics,
            k.DELETE_TOPICS: self.delete_topics,
            k.INIT_PRODUCER_ID: self.init_producer_id,
            k.OFFSET_FOR_LEADER_EPOCH: self.offset_for_leader_epoch,
            k.DESCRIBE_CONFIGS: self.describe_configs,
            k.JOIN_GROUP: self.join_group,
            k.SYNC_GROUP: self.sync_group,
            k.HEARTBEAT: self.heartbeat,
            k.LEAVE_GROUP: self.leave_group,
            k.DESCRIBE_GROUPS: self.describe_groups,
            k.LIST_GROUPS: self.list_groups,
        }

    # ------------------------------------------------------------ dispatch
    def dispatch(self, conn: KafkaConnection, frame: bytes, slot: Slot) -> None:
        try:
            key, ver, cid = k.peek_header(frame)
        except k.WireError as e:
            self._drop(conn, str(e))
            return
        if key == k.API_VERSIONS and not k.SUPPORTED[k.API_VERSIONS][0] <= ver <= k.SUPPORTED[k.API_VERSIONS][1]:
            slot.complete(k.encode_response(k.API_VERSIONS, 0, cid, k.api_versions_body(0, E.unsupported_version)))
            return
        unsupported = False
        try:
            try:
                header = k.parse_header(frame)
            except k.UnsupportedVersion:
                header = k.parse_header(frame, supported_only=False)
                unsupported = True
            body = k.decode_body(header, frame)
        except k.WireError as e:
            self._drop(conn, str(e))
            return
        req = Req(conn, header, slot)
        if self.log.isEnabledFor(10):
            self.log.debug("%r: %r", conn, header)
        if unsupported:
            self.log.info("%r: %s v%d is not supported", conn, k.api_name(key), ver)
            self._error_reply(req, body, E.unsupported_version)
            return
        if self.node.broker is None:
            self._error_reply(req, body, E.unknown_server_error)
            return
        try:
            self.table[key](req, body)
        except Exception:
            self.log.exception("%r: %r failed", conn, header)
            self._error_reply(req, body, E.unknown_server_error)

    def _drop(self, conn: KafkaConnection, why: str) -> None:
        self.log.warning("%r: %s; closing", conn, why)
        conn.abort()

    def _error_reply(self, req: Req, body: Any, code: ErrorCode) -> None:
        try:
            req.reply(error_response(req.key, body, code))
        except Exception:
            self.log.exception("%r: cannot build an error response", req.conn)
            req.conn.abort()

    @property
    def image(self) -> Any:
        assert self.node.broker is not None
        return self.node.broker.image

    def _known(self, tp: TopicPartition) -> bool:
        return tp in self.image.partitions

    def _topics_by_id(self) -> dict[Any, str]:
        image = self.image
        if self._by_id_offset != image.next_offset:
            self._by_id = {tid: name for name, tid in image.topic_ids.items()}
            self._by_id_offset = image.next_offset
        return self._by_id

    # ------------------------------------------------------------ ApiVersions
    def api_versions(self, req: Req, body: Any) -> None:
        req.slot.complete(k.encode_response(k.API_VERSIONS, req.version, req.cid, k.api_versions_body(req.version)))

    # ------------------------------------------------------------ Produce
    def produce(self, req: Req, body: Any) -> None:
        node, broker = self.node, self.node.broker
        assert broker is not None
        acks = body.acks
        timeout_ms = k.ms(body.timeout)
        results: dict[tuple[str, int], tuple[ErrorCode, int]] = {}
        layout: list[tuple[str, list[int]]] = []
        pending = [1]

        def finish() -> None:
            out = []
            for name, parts in layout:
                prs = []
                for idx in parts:
                    err, base = results[(name, idx)]
                    r = broker.partitions.get(TopicPartition(name, idx))
                    prs.append({"index": idx, "error_code": err, "base_offset": base,
                                "log_start_offset": r.log.log_start_offset if r is not None else -1})
                out.append({"name": name, "partition_responses": prs})
            req.reply({"responses": out, "throttle_time": 0})

        def done_one() -> None:
            pending[0] -= 1
            if pending[0] == 0 and acks != 0:
                finish()

        bad_request = E.invalid_required_acks if acks not in (0, 1, -1) else (
            E.transactional_id_authorization_failed if body.transactional_id is not None else E.none)
        for td in body.topic_data:
            name = td.name
            idxs: list[int] = []
            layout.append((name, idxs))
            for pd in td.partition_data:
                key = (name, pd.index)
                if key in results or pd.index in idxs:
                    continue  # a partition listed twice is answered once
                idxs.append(pd.index)
                tp = TopicPartition(name, pd.index)
                err = bad_request
                if err is E.none and not self._known(tp):
                    err = E.unknown_topic_or_partition
                if err is E.none:
                    err = check_batches(pd.records, self.s.message_max_bytes)
                if err is E.none and acks == 0:
                    err = broker.leader_error(tp)
                if err is not E.none:
                    results[key] = (err, -1)
                    continue
                cid = node.new_cid()
                msg = ProduceRequest(cid, tp, acks, pd.records, timeout_ms)
                if acks == 0:
                    results[key] = (E.none, -1)
                    node.to_broker(req.conn.client, msg)
                    continue
                pending[0] += 1

                def on_response(resp: Any, key: tuple[str, int] = key) -> None:
                    results[key] = (resp.error, resp.base_offset)
                    done_one()

                node.to_broker(req.conn.client, msg, on_response)
        if acks == 0:
            req.slot.complete(None)
            if any(e is not E.none for e, _ in results.values()):
                req.conn.close_after_flush()  # as Kafka: the client learns through a metadata refresh
            return
        done_one()

    # ------------------------------------------------------------ Fetch
    def fetch(self, req: Req, body: Any) -> None:
        node = self.node
        v = req.version
        if v >= 15:
            replica_id, replica_epoch = body.replica_state.replica_id, body.replica_state.replica_epoch
        else:
            replica_id, replica_epoch = body.replica_id, -1
        if getattr(body, "session_id", 0) not in (0, -1) or getattr(body, "session_epoch", -1) > 0:
            req.reply({"throttle_time": 0, "error_code": E.fetch_session_id_not_found, "session_id": 0, "responses": []})
            return
        layout: list[tuple[str, Any, list[int]]] = []
        errors: dict[TopicPartition, ErrorCode] = {}
        parts: list[FetchPartition] = []
        by_id = self._topics_by_id() if v >= 13 else {}
        for t in body.topics:
            if v >= 13:  # topics by id (KIP-516)
                topic_id = t.topic_id
                name = by_id.get(topic_id)
                missing = E.unknown_topic_id
            else:
                topic_id, name, missing = None, t.topic, E.unknown_topic_or_partition
            idxs: list[int] = []
            layout.append((name, topic_id, idxs))
            for p in t.partitions:
                tp = TopicPartition(name or "", p.partition)
                idxs.append(p.partition)
                if name is None or not self._known(tp):
                    errors[tp] = missing if name is None or name not in self.image.topics else E.unknown_topic_or_partition
                    continue
                parts.append(FetchPartition(
                    tp, getattr(p, "current_leader_epoch", -1), p.fetch_offset, getattr(p, "last_fetched_epoch", -1),
                    getattr(p, "log_start_offset", -1), max(p.partition_max_bytes, 0),
                ))

        def respond(resp: Any) -> None:
            got = {pr.tp: pr for pr in resp.partitions} if resp is not None else {}
            out = []
            for name, topic_id, idxs in layout:
                prs = []
                for idx in idxs:
                    tp = TopicPartition(name or "", idx)
                    pr = got.get(tp)
                    if pr is None:
                        code = errors.get(tp, E.unknown_topic_or_partition).value
                        prs.append(PartitionData(idx, code, -1, -1, -1, b""))
                        continue
                    if pr.error is E.none:
                        div = pr.diverging_epoch
                        prs.append(PartitionData(idx, 0, pr.high_watermark, pr.high_watermark, pr.log_start_offset,
                                                 pr.records, None if div is None else (div.epoch, div.end_offset)))
                    else:
                        prs.append(PartitionData(idx, pr.error.value, -1, -1, -1, b""))
                out.append(TopicData(name or "", topic_id, prs))
            if not req.slot.done:
                req.slot.complete(encode_fetch_response(v, req.cid, 0, out))

        if not parts:
            respond(None)
            return
        cid = node.new_cid()
        msg = FetchRequest(cid, replica_id, replica_epoch, tuple(parts), max(k.ms(body.max_wait), 0),
                           body.min_bytes, getattr(body, "max_bytes", 0x7FFFFFFF))
        node.to_broker(req.conn.client, msg, respond)

    # ------------------------------------------------------------ ListOffsets
    def list_offsets(self, req: Req, body: Any) -> None:
        broker = self.node.broker
        assert broker is not None
        out = []
        for t in body.topics:
            prs = []
            for p in t.partitions:
                tp = TopicPartition(t.name, p.partition_index)
                if not self._known(tp):
                    prs.append({"partition_index": p.partition_index, "error_code": E.unknown_topic_or_partition})
                    continue
                if p.timestamp == MAX_TIMESTAMP and req.version < 7 or p.timestamp < MAX_TIMESTAMP:
                    prs.append({"partition_index": p.partition_index, "error_code": E.invalid_request})
                    continue
                res = broker.list_offset(tp, getattr(p, "current_leader_epoch", -1), p.timestamp)
                prs.append({"partition_index": p.partition_index, "error_code": res.error, "timestamp": res.timestamp,
                            "offset": res.offset, "leader_epoch": res.leader_epoch})
            out.append({"name": t.name, "partitions": prs})
        req.reply({"throttle_time": 0, "topics": out})

    # ------------------------------------------------------------ Metadata
    def _endpoint(self, broker_id: int, listener: str) -> Any:
        info = self.image.brokers.get(broker_id)
        if info is None:
            return None
        for name in (listener, self.s.inter_broker_listener_name):
            ep = next((e for e in info.listeners if e.name == name), None)
            if ep is not None:
                return ep
        return None

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
        topics = []
        for name in names:
            if name is None:
                topics.append({"error_code": E.unknown_topic_id, "name": None, "partitions": []})
            elif name in image.topics:
                topics.append(self._describe_topic(name))
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
            "cluster_authorized_operations": -2147483648,
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
                "partitions": parts, "topic_authorized_operations": -2147483648}

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
                self._error_reply(req, body, E.unknown_server_error)

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

    # ------------------------------------------------------------ InitProducerId
    def init_producer_id(self, req: Req, body: Any) -> None:
        """Idempotent producers: a fresh producer id with epoch 0 (Kafka gives a producer
        without a transactional id a new id every time, whatever id and epoch it sends).
        Transactions are not supported: a transactional id is refused as Produce refuses
        transactional batches."""
        broker = self.node.broker
        assert broker is not None
        if body.transactional_id is not None:
            req.reply({"throttle_time": 0, "error_code": E.transactional_id_authorization_failed,
                       "producer_id": -1, "producer_epoch": -1})
            return
        err, pid = broker.init_producer_id()
        req.reply({"throttle_time": 0, "error_code": err, "producer_id": pid, "producer_epoch": 0 if pid >= 0 else -1})

    # ------------------------------------------------------------ OffsetsForLeaderEpoch
    def offset_for_leader_epoch(self, req: Req, body: Any) -> None:
        node = self.node
        replica_id = getattr(body, "replica_id", -2)
        out = []
        for t in body.topics:
            prs: list[dict[str, Any]] = []
            out.append({"topic": t.topic, "partitions": prs})
            for p in t.partitions:
                tp = TopicPartition(t.topic, p.partition)
                if not self._known(tp):
                    prs.append({"error_code": E.unknown_topic_or_partition, "partition": p.partition})
                    continue
                got: list[Any] = []
                msg = OffsetsForLeaderEpochRequest(node.new_cid(), replica_id, tp, p.current_leader_epoch, p.leader_epoch)
                node.to_broker(req.conn.client, msg, got.append)
                r = got[0]  # answered synchronously
                prs.append({"error_code": r.error, "partition": p.partition, "leader_epoch": r.leader_epoch,
                            "end_offset": r.end_offset})
        req.reply({"throttle_time": 0, "topics": out})

    # ------------------------------------------------------------ groups: coordinator and offsets
    def _coordinator(self, group: str) -> int:
        return coordinator_for(group, list(self.image.brokers))

    def find_coordinator(self, req: Req, body: Any) -> None:
        key_type = getattr(body, "key_type", 0)
        if key_type != 0:
            req.reply({"throttle_time": 0, "error_code": E.coordinator_not_available,
                       "error_message": "transactions are not supported", "node_id": -1, "host": "", "port": -1})
            return
        node_id = self._coordinator(body.key)
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
        out = []
        for name, idxs in wanted.items():
            prs = []
            for i in idxs:
                c = committed.get((name, i))
                prs.append({"partition_index": i, "committed_offset": c.offset if c else -1,
                            "committed_leader_epoch": c.leader_epoch if c else -1,
                            "metadata": (c.metadata if c and c.metadata is not None else ""), "error_code": E.none})
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

    def describe_groups(self, req: Req, body: Any) -> None:
        out = []
        for gid in body.groups:
            if self._not_coordinator(req, gid):
                out.append({"error_code": E.not_coordinator, "group_id": gid, "group_state": "", "protocol_type": "",
                            "protocol_data": "", "members": []})
                continue
            g = self.node.groups.describe(gid)
            if g is None:
                out.append({"error_code": E.none, "group_id": gid, "group_state": "Dead", "protocol_type": "",
                            "protocol_data": "", "members": []})
                continue
            out.append({"error_code": E.none, "group_id": gid, "group_state": g.state, "protocol_type": g.protocol_type or "",
                        "protocol_data": g.protocol_name or "", "members": [
                            {"member_id": m.member_id, "group_instance_id": m.group_instance_id, "client_id": m.client_id,
                             "client_host": m.client_host, "member_metadata": dict(m.protocols).get(g.protocol_name or "", b""),
                             "member_assignment": m.assignment} for m in g.members.values()]})
        req.reply({"throttle_time": 0, "groups": out})

    def list_groups(self, req: Req, body: Any) -> None:
        states = set(getattr(body, "states_filter", ()) or ())
        groups = [{"group_id": g.group_id, "protocol_type": g.protocol_type or "", "group_state": g.state}
                  for g in self.node.groups.groups.values() if not states or g.state in states]
        req.reply({"throttle_time": 0, "error_code": E.none, "groups": groups})

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


# ---------------------------------------------------------------- error responses
def error_response(api_key: int, body: Any, code: ErrorCode) -> dict[str, Any]:
    """A response to `body` with `code` in every error field (UNSUPPORTED_VERSION,
    UNKNOWN_SERVER_ERROR)."""
    if api_key == k.PRODUCE:
        return {"responses": [{"name": td.name, "partition_responses": [
            {"index": p.index, "error_code": code, "base_offset": -1} for p in td.partition_data]} for td in body.topic_data]}
    if api_key == k.FETCH:
        return {"error_code": code, "responses": [{"topic": getattr(t, "topic", ""), "topic_id": getattr(t, "topic_id", None), "partitions": [
            {"partition_index": p.partition, "error_code": code, "high_watermark": -1, "records": b""} for p in t.partitions]}
            for t in body.topics]}
    if api_key == k.LIST_OFFSETS:
        return {"topics": [{"name": t.name, "partitions": [
            {"partition_index": p.partition_index, "error_code": code} for p in t.partitions]} for t in body.topics]}
    if api_key == k.METADATA:
        return {"brokers": [], "topics": [{"error_code": code, "name": getattr(t, "name", None), "partitions": []}
                                          for t in body.topics or ()]}
    if api_key == k.OFFSET_COMMIT:
        return {"topics": [{"name": t.name, "partitions": [
            {"partition_index": p.partition_index, "error_code": code} for p in t.partitions]} for t in body.topics]}
    if api_key == k.OFFSET_FETCH:
        return {"error_code": code, "topics": [{"name": t.name, "partitions": [
            {"partition_index": i, "committed_offset": -1, "metadata": "", "error_code": code} for i in t.partition_indexes]}
            for t in body.topics or ()]}
    if api_key == k.FIND_COORDINATOR:
        return {"error_code": code, "node_id": -1, "host": "", "port": -1}
    if api_key == k.CREATE_TOPICS:
        return {"topics": [{"name": t.name, "error_code": code} for t in body.topics]}
    if api_key == k.DELETE_TOPICS:
        names = [t.name for t in body.topics] if hasattr(body, "topics") else list(body.topic_names)
        return {"responses": [{"name": n, "error_code": code} for n in names]}
    if api_key == k.OFFSET_FOR_LEADER_EPOCH:
        return {"topics": [{"topic": t.topic, "partitions": [{"error_code": code, "partition": p.partition}
                                                             for p in t.partitions]} for t in body.topics]}
    if api_key == k.LEAVE_GROUP:
        return {"error_code": code, "members": []}
    if api_key == k.DESCRIBE_GROUPS:
        return {"groups": [{"error_code": code, "group_id": g, "group_state": "", "protocol_type": "", "protocol_data": "",
                            "members": []} for g in body.groups]}
    if api_key == k.DESCRIBE_CONFIGS:
        return {"results": [{"error_code": code, "error_message": None, "resource_type": r.resource_type,
                             "resource_name": r.resource_name, "configs": []} for r in body.resources]}
    return {"error_code": code}
