"""One accepted TCP connection: a Kafka client, or a peer node's link.

Requests are handled as they arrive (so appends happen in arrival order) and each gets a
`Slot` in a queue; responses are written in request order as slots complete (Kafka's
per-connection ordering), one write per response. The first frame decides what the
connection is: one of our inter-node frames turns it into a `Link`; anything else is a
Kafka request (controller listeners accept links only). Broken framing (negative or
oversize sizes, `socket.request.max.bytes`) closes the connection; so does a request
that cannot be decoded (see handlers.py). Reading pauses while too many responses are
outstanding or the socket's write buffer is full.

What a connection needs of the node that accepted it is `ConnectionOwner` (the node of
broker/server/node.py is one), so this module does not import the node.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections import deque
from typing import Any, Protocol

from broker.config import BrokerSettings
from broker.server.transport import Link, Links
from broker.wire import internal
from broker.wire.frames import FrameError, FrameReader

MAX_OUTSTANDING = 1000  # requests without a written response before reading pauses
_ids = itertools.count(1)


class Slot:
    """The response to one request, in the connection's queue."""

    __slots__ = ("conn", "data", "done")

    def __init__(self, conn: KafkaConnection) -> None:
        self.conn = conn
        self.data: bytes | None = None
        self.done = False

    def complete(self, data: bytes | None) -> None:
        """Set the response (None: no response, e.g. acks=0) and write what is ready."""
        if self.done:
            return
        self.data = data
        self.done = True
        self.conn.flush()


class Dispatcher(Protocol):
    def dispatch(self, conn: KafkaConnection, frame: bytes, slot: Slot) -> None:
        """Handle one request frame; complete `slot` (now or later)."""


class ConnectionOwner(Protocol):
    """What a connection uses of the node that accepted it."""

    @property
    def s(self) -> BrokerSettings: ...

    @property
    def log(self) -> logging.Logger: ...

    @property
    def connections(self) -> set[Any]:
        """The open connections: a connection adds itself, and leaves when closed or a link."""

    @property
    def links(self) -> Links: ...

    @property
    def handlers(self) -> Dispatcher: ...


class KafkaConnection(asyncio.Protocol):
    def __init__(self, node: ConnectionOwner, listener: str, controller_listener: bool) -> None:
        self.node = node
        self.listener = listener
        self.controller_listener = controller_listener
        self.id = next(_ids)
        self.client = f"k{self.id}"
        self.transport: asyncio.Transport | None = None
        self.reader = FrameReader(node.s.socket_request_max_bytes)
        self.slots: deque[Slot] = deque()
        self.link: Link | None = None
        self.requests = 0
        self.closed = False
        self.peer = "?"
        self._paused_reading = False
        self._paused_writing = False
        self.log = node.log.getChild("conn")

    def __repr__(self) -> str:
        return f"<connection {self.id} from {self.peer} on {self.listener}>"

    # ------------------------------------------------------------ asyncio callbacks
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        self.node.connections.add(self)
        transport.set_write_buffer_limits(high=8 << 20)

    def data_received(self, data: bytes) -> None:
        if self.closed:
            return
        try:
            frames = self.reader.feed(data)
        except FrameError as e:
            self.log.warning("%r: %s; closing", self, e)
            self.abort()
            return
        if self.link is not None:
            self.link.on_frames(frames)
            return
        for i, frame in enumerate(frames):
            if self.closed:
                return
            if self.requests == 0 and internal.is_internal(frame):
                self._become_link(frames[i:])
                return
            if self.controller_listener:
                self.log.warning("%r: a Kafka request on a controller listener; closing", self)
                self.abort()
                return
            self.requests += 1
            slot = Slot(self)
            self.slots.append(slot)
            self.node.handlers.dispatch(self, frame, slot)
        if len(self.slots) > MAX_OUTSTANDING and not self._paused_reading and self.transport is not None:
            self._paused_reading = True
            self.transport.pause_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.node.connections.discard(self)
        self.slots.clear()
        if self.link is not None:
            self.link.mark_lost()

    def pause_writing(self) -> None:
        self._paused_writing = True
        if self.transport is not None and not self._paused_reading:
            self._paused_reading = True
            self.transport.pause_reading()

    def resume_writing(self) -> None:
        self._paused_writing = False
        self._maybe_resume()

    # ------------------------------------------------------------ responses
    def flush(self) -> None:
        """Write every completed response at the head of the queue."""
        if self.closed or self.transport is None:
            return
        slots = self.slots
        while slots and slots[0].done:
            data = slots.popleft().data
            if data:
                self.transport.write(data)
        self._maybe_resume()

    def _maybe_resume(self) -> None:
        if self._paused_reading and not self._paused_writing and len(self.slots) <= MAX_OUTSTANDING // 2:
            self._paused_reading = False
            if self.transport is not None and not self.closed:
                self.transport.resume_reading()

    def abort(self) -> None:
        """Close at once (broken input): pending responses are dropped."""
        if self.transport is not None and not self.closed:
            self.closed = True
            self.transport.abort()

    def close_after_flush(self) -> None:
        """Close once what is already written is sent (Kafka does this on an acks=0 error)."""
        if self.transport is not None and not self.closed:
            self.flush()
            self.closed = True
            self.transport.close()

    # ------------------------------------------------------------ peer links
    def _become_link(self, frames: list[bytes]) -> None:
        assert self.transport is not None
        link = self.node.links.accept(self.transport)
        self.link = link
        self.node.connections.discard(self)
        link.on_frames(frames)

    def info(self) -> dict[str, Any]:
        return {"id": self.id, "peer": self.peer, "listener": self.listener}
