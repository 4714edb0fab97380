"""Kafka requests from this broker to a peer's Kafka listener (asyncio), for what Kafka
sends between brokers as Kafka APIs: the transaction coordinator's WriteTxnMarkers.

`PeerClient.call(host, port, api_key, version, value, timeout)` sends one request over a
connection kept per address and returns the decoded response body; any failure (connect,
timeout, a broken or closed connection, a frame that does not decode) raises `PeerError`
and drops the connection. Calls on one connection are serialised.
"""

from __future__ import annotations

import asyncio
import struct
from typing import Any

from kio.serial import entity_reader

from broker.wire import kafka as k
from broker.wire.client import encode_request, request


class PeerError(Exception):
    """A peer request that got no answer."""


class _Conn:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.lock = asyncio.Lock()
        self.cid = 0


class PeerClient:
    def __init__(self, client_id: str) -> None:
        self.client_id = client_id
        self._conns: dict[tuple[str, int], _Conn] = {}

    async def call(self, host: str, port: int, api_key: int, version: int, value: dict[str, Any],
                   timeout: float = 10.0) -> Any:
        try:
            return await asyncio.wait_for(self._call(host, port, api_key, version, value), timeout)
        except (TimeoutError, OSError, asyncio.IncompleteReadError, ValueError) as e:
            self._drop((host, port))
            raise PeerError(f"{k.api_name(api_key)} to {host}:{port}: {type(e).__name__}: {e}") from None

    async def _call(self, host: str, port: int, api_key: int, version: int, value: dict[str, Any]) -> Any:
        conn = self._conns.get((host, port))
        if conn is None:
            reader, writer = await asyncio.open_connection(host, port)
            conn = self._conns[(host, port)] = _Conn(reader, writer)
        async with conn.lock:
            conn.cid += 1
            conn.writer.write(encode_request(api_key, version, conn.cid, request(api_key, version, value), self.client_id))
            await conn.writer.drain()
            (n,) = struct.unpack(">i", await conn.reader.readexactly(4))
            frame = await conn.reader.readexactly(n)
        cls = k.response_class(api_key, version)
        assert cls is not None
        (cid,) = struct.unpack_from(">i", frame, 0)
        if cid != conn.cid:
            raise ValueError(f"correlation id {cid}, expected {conn.cid}")
        pos = k.skip_tagged_fields(frame, 4) if cls.__flexible__ else 4
        body, _ = entity_reader(cls)(frame, pos)
        return body

    def _drop(self, addr: tuple[str, int]) -> None:
        conn = self._conns.pop(addr, None)
        if conn is not None:
            conn.writer.close()

    def close(self) -> None:
        for addr in list(self._conns):
            self._drop(addr)
