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

The APIs come in families, each a module given only the node's `HandlerHost`
(broker/server/api_base.py): the data path (api_data.py), metadata and topic admin
(api_admin.py), configs (api_configs.py), elections, reassignments and log dirs
(api_replicas.py), consumer groups (api_groups.py), transactions (api_txn.py), ACLs
(api_acls.py); ApiVersions is answered here. Per-API
behaviour follows Kafka; what differs is said in docs/broker.md.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode

from broker.server.api_acls import AclApis
from broker.server.api_admin import AdminApis
from broker.server.api_base import HandlerHost, Req, reply_error
from broker.server.api_configs import ConfigApis
from broker.server.api_data import DataApis
from broker.server.api_groups import GroupApis
from broker.server.api_replicas import ReplicaApis
from broker.server.api_txn import TxnApis
from broker.server.connection import KafkaConnection, Slot
from broker.wire import kafka as k

E = ErrorCode


class Handlers:
    """Every API this broker answers, by key: the families' tables and ApiVersions."""

    def __init__(self, node: HandlerHost) -> None:
        self.node = node
        self.log: logging.Logger = node.log.getChild("api")
        self.table: dict[int, Callable[[Req, Any], None]] = {k.API_VERSIONS: self.api_versions}
        data, groups = DataApis(node), GroupApis(node)
        self.txn = TxnApis(node, data, groups)
        for family in (data, AdminApis(node), groups, ConfigApis(node), ReplicaApis(node), AclApis(node), self.txn):
            self.table.update(family.apis())  # TxnApis last: it takes FindCoordinator and InitProducerId

    def start(self) -> None:
        """Background work of the APIs, once the node's loop runs (the transaction coordinator)."""
        self.txn.start()

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
        reply_error(req, body, code, self.log)

    # ------------------------------------------------------------ ApiVersions
    def api_versions(self, req: Req, body: Any) -> None:
        req.slot.complete(k.encode_response(k.API_VERSIONS, req.version, req.cid, k.api_versions_body(req.version)))
