"""What every family of Kafka API handlers shares: the request being answered (`Req`),
what the handlers use of the node (`HandlerHost`: the node of broker/server/node.py is one,
so no handler module imports the node), the metadata-image helpers of `ApiFamily` and its
way to the controller (`spawn` a handler coroutine, `ask_controller` and wait for the
answers, `await_metadata`), and `error_response` (a response with one error code in every
error field).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, Protocol, TypeVar

from kio.schema.errors import ErrorCode

from broker.config import BrokerSettings
from broker.core.broker import Broker
from broker.core.messages import (
    TopicPartition,
)
from broker.server.connection import KafkaConnection, Slot
from broker.server.groups import GroupCoordinator
from broker.server.offsets import OffsetStore
from broker.storage import LogManager
from broker.wire import kafka as k

E = ErrorCode
K = TypeVar("K")
ADMIN_FALLBACK_TIMEOUT_S = 30.0  # how long an admin request with timeout 0 waits for the controller


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


class ApiFamily:
    """One family of APIs over the node's broker core; `apis()` maps API keys to handlers."""

    def __init__(self, node: HandlerHost) -> None:
        self.node = node
        self.s = node.s
        self.log = node.log.getChild("api")
        self._by_id: dict[Any, str] = {}
        self._by_id_offset = -1

    def apis(self) -> dict[int, Callable[[Req, Any], None]]:
        raise NotImplementedError

    def _endpoint(self, broker_id: int, listener: str) -> Any:
        info = self.image.brokers.get(broker_id)
        if info is None:
            return None
        for name in (listener, self.s.inter_broker_listener_name):
            ep = next((e for e in info.listeners if e.name == name), None)
            if ep is not None:
                return ep
        return None

    @property
    def image(self) -> Any:
        assert self.node.broker is not None
        return self.node.broker.image

    def _known(self, tp: TopicPartition) -> bool:
        return tp in self.image.partitions

    # ------------------------------------------------------------ the controller
    def spawn(self, req: Req, body: Any, coro: Coroutine[Any, Any, None]) -> None:
        """Run a handler coroutine; an exception in it answers UNKNOWN_SERVER_ERROR."""
        task = asyncio.get_running_loop().create_task(coro)

        def done(t: asyncio.Task[Any]) -> None:
            if t.cancelled():
                return
            if t.exception() is not None:
                self.log.error("%r: %r failed: %r", req.conn, req.header, t.exception())
                reply_error(req, body, E.unknown_server_error, self.log)

        task.add_done_callback(done)

    async def ask_controller(self, msgs: Mapping[K, Any], timeout_s: float) -> dict[K, Any]:
        """Send each message to the active controller; its answer by key, None for those
        not answered within `timeout_s`."""
        futures = {key: self.node.forward_to_controller(msg) for key, msg in msgs.items()}
        if futures:
            await asyncio.wait(list(futures.values()), timeout=timeout_s)
        out: dict[K, Any] = {}
        for key, fut in futures.items():
            if fut.done() and not fut.cancelled():
                out[key] = fut.result()
            else:
                fut.cancel()
                out[key] = None
        return out

    async def await_metadata(self, pred: Callable[[], bool], timeout_s: float) -> None:
        """Wait (at most `timeout_s`) until this broker's metadata satisfies `pred`."""
        try:
            await asyncio.wait_for(self.node.wait_for_metadata(pred), max(timeout_s, 0.05))
        except TimeoutError:
            pass

    def _topics_by_id(self) -> dict[Any, str]:
        image = self.image
        if self._by_id_offset != image.next_offset:
            self._by_id = {tid: name for name, tid in image.topic_ids.items()}
            self._by_id_offset = image.next_offset
        return self._by_id


def reply_error(req: Req, body: Any, code: ErrorCode, log: logging.Logger) -> None:
    """Answer `req` with `code` in every error field; a response that cannot be built closes
    the connection."""
    try:
        req.reply(error_response(req.key, body, code))
    except Exception:
        log.exception("%r: cannot build an error response", req.conn)
        req.conn.abort()


def error_response(api_key: int, body: Any, code: ErrorCode) -> dict[str, Any]:
    """A response to `body` with `code` in every error field (UNSUPPORTED_VERSION,
    UNKNOWN_SERVER_ERROR)."""
    if api_key == k.PRODUCE:
        return {"responses": [{"name": td.name, "partition_responses": [
            {"index": p.index, "error_code": code, "base_offset": -1} for p in td.partition_data]} for td in body.topic_data]}
    if api_key == k.FETCH:
        return {"error_code": code, "responses": [
            {"topic": getattr(t, "topic", ""), "topic_id": getattr(t, "topic_id", None), "partitions": [
                {"partition_index": p.partition, "error_code": code, "high_watermark": -1, "records": b""}
                for p in t.partitions]}
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
    if api_key in (k.ALTER_CONFIGS, k.INCREMENTAL_ALTER_CONFIGS):
        return {"responses": [{"error_code": code, "resource_type": r.resource_type, "resource_name": r.resource_name}
                              for r in body.resources]}
    if api_key == k.CREATE_PARTITIONS:
        return {"results": [{"name": t.name, "error_code": code} for t in body.topics]}
    if api_key == k.ELECT_LEADERS:
        return {"error_code": code, "replica_election_results": [
            {"topic": t.topic, "partition_result": [{"partition_id": p, "error_code": code} for p in t.partitions]}
            for t in body.topic_partitions or ()]}
    if api_key == k.ALTER_PARTITION_REASSIGNMENTS:
        return {"error_code": code, "responses": [{"name": t.name, "partitions": [
            {"partition_index": p.partition_index, "error_code": code} for p in t.partitions]} for t in body.topics]}
    if api_key == k.CREATE_ACLS:
        return {"results": [{"error_code": code} for _ in body.creations]}
    if api_key == k.DELETE_ACLS:
        return {"filter_results": [{"error_code": code} for _ in body.filters]}
    if api_key == k.DELETE_GROUPS:
        return {"results": [{"group_id": g, "error_code": code} for g in body.groups_names]}
    return {"error_code": code}
