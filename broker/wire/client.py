"""A minimal blocking Kafka client on kio's schemas, for tests and tools (not for
applications: real clients are librdkafka and kafka-python).

    with RawClient("127.0.0.1", 9092) as c:
        resp = c.call(METADATA, 12, {"topics": None, "allow_auto_topic_creation": False,
                                     "include_topic_authorized_operations": False})
"""

from __future__ import annotations

import io
import socket
import struct
from typing import Any

from kio.serial import entity_reader, entity_writer

from broker.wire import kafka as k


def encode_request(api_key: int, version: int, correlation_id: int, body: Any, client_id: str | None = "raw") -> bytes:
    """A size-prefixed request frame (header v1, or v2 for flexible versions)."""
    buf = io.BytesIO()
    buf.write(struct.pack(">hhi", api_key, version, correlation_id))
    if client_id is None:
        buf.write(struct.pack(">h", -1))
    else:
        raw = client_id.encode()
        buf.write(struct.pack(">h", len(raw)) + raw)
    if type(body).__flexible__:
        buf.write(b"\0")
    entity_writer(type(body))(buf, body)
    data = buf.getvalue()
    return struct.pack(">i", len(data)) + data


def request(api_key: int, version: int, value: dict[str, Any]) -> Any:
    cls = k.request_class(api_key, version)
    assert cls is not None
    return k.build(cls, value)


class RawClient:
    def __init__(self, host: str, port: int, timeout: float = 10.0) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.cid = 0

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.sock.close()

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def recv_frame(self) -> bytes:
        """One response frame without its size ('' if the broker closed)."""
        head = self._recv_exact(4)
        if len(head) < 4:
            return b""
        (n,) = struct.unpack(">i", head)
        return self._recv_exact(n)

    def _recv_exact(self, n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                break
            out += chunk
        return bytes(out)

    def send(self, api_key: int, version: int, value: dict[str, Any] | Any) -> int:
        self.cid += 1
        body = value if not isinstance(value, dict) else request(api_key, version, value)
        self.send_raw(encode_request(api_key, version, self.cid, body))
        return self.cid

    def recv(self, api_key: int, version: int) -> tuple[int, Any]:
        """(correlation id, response body)."""
        frame = self.recv_frame()
        if not frame:
            raise ConnectionError("the broker closed the connection")
        cls = k.response_class(api_key, version)
        assert cls is not None
        (cid,) = struct.unpack_from(">i", frame, 0)
        pos = 4
        if cls.__header_schema__.__name__ == "ResponseHeader" and cls.__header_schema__.__module__.endswith("v1.header"):
            pos = k.skip_tagged_fields(frame, pos)
        body, _ = entity_reader(cls)(frame, pos)
        return cid, body

    def call(self, api_key: int, version: int, value: dict[str, Any] | Any) -> Any:
        cid = self.send(api_key, version, value)
        got, body = self.recv(api_key, version)
        assert got == cid, (got, cid)
        return body
