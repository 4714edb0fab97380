"""Inter-node links: TCP connections carrying the core's messages (broker/wire/internal.py).

A link starts with a HELLO frame from the side that connected (its node id and the role
it wants to talk to: the peer's broker or its controller); after that both sides send
MESSAGE frames on it. A broker reaches a peer broker on the peer's inter-broker listener
and the controller on the `controller.quorum.voters` address; replies travel back on the
link the request came in on. `Links` keeps the links of one process and tells its owner
(`LinkOwner`) about messages and broken links; it never blocks and never raises into the
event loop: a frame that does not decode closes its link.

Liveness (`Links.check`, once a second): either side of a link sends a PING when it has
sent nothing for a second, and a link that has heard nothing for the link timeout
(`wrack.link.timeout.ms`, 3 s) is closed, as is one that did not connect within
min(`socket.connection.setup.timeout.ms`, link timeout); the next message reconnects.
Every link socket also gets TCP_USER_TIMEOUT = the link timeout, so the kernel drops a
connection whose data stays unacknowledged that long, also after the process died: a
partition's heal never delivers messages queued in TCP retransmission long ago (a dead
broker's old heartbeat used to renew its session seconds after it was killed), and a
follower never waits on TCP's backed-off retransmission timer (up to tens of seconds
after a long partition) before fetching again.

The links are kept in a `LinkBook` (broker/io/links.py) by `LinkKey`, the book the node's
router reads to pick a link for a message.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from typing import Protocol

from broker.io.links import LinkBook, LinkKey, role_name
from broker.wire import internal
from broker.wire.frames import FrameError, FrameReader

MAX_QUEUED_BYTES = 64 << 20  # per connecting link; beyond it messages are dropped (the core retries)
PING_INTERVAL_S = 1.0


def set_user_timeout(transport: asyncio.BaseTransport, timeout_s: float) -> None:
    """TCP_USER_TIMEOUT on the transport's socket (Linux; ignored where missing)."""
    sock = transport.get_extra_info("socket")
    opt = getattr(socket, "TCP_USER_TIMEOUT", None)
    if sock is None or opt is None or timeout_s <= 0:
        return
    try:
        sock.setsockopt(socket.IPPROTO_TCP, opt, int(timeout_s * 1000))
    except OSError:
        pass


class LinkOwner(Protocol):
    def on_link_message(self, link: Link, msg: object) -> None: ...

    def on_link_hello(self, link: Link) -> bool:
        """An inbound link said who it is; False refuses it (closed)."""

    def on_link_lost(self, link: Link) -> None: ...


class Link:
    """One connection to or from a peer node (either direction carries messages)."""

    def __init__(self, links: Links, outbound: bool, peer_id: int = -1, role: int = internal.ROLE_BROKER) -> None:
        self.links = links
        self.outbound = outbound
        self.peer_id = peer_id
        self.role = role  # the role of the machine on the accepting side
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self._queue: list[bytes] = []
        self._queued = 0
        self.opened_at = time.monotonic()
        self.last_send = 0.0  # monotonic seconds of the last message sent / frame received
        self.last_recv = 0.0

    def __repr__(self) -> str:
        return f"<link {'to' if self.outbound else 'from'} node {self.peer_id} ({role_name(self.role)})>"

    @property
    def key(self) -> LinkKey:
        return LinkKey(self.peer_id, self.role, self.outbound)

    @property
    def is_open(self) -> bool:
        return self.transport is not None and not self.closed

    def send(self, msg: object) -> bool:
        """Queue or write `msg`; False if the link is closed."""
        if self.closed:
            return False
        return self._write(internal.encode_message(msg))

    def ping(self) -> None:
        if not self.closed and self.transport is not None:
            self._write(internal.PING_FRAME)

    def _write(self, data: bytes) -> bool:
        self.last_send = time.monotonic()
        if self.transport is None:
            if self._queued + len(data) > MAX_QUEUED_BYTES:
                return False
            self._queue.append(data)
            self._queued += len(data)
            return True
        self.transport.write(data)
        return True

    def attach(self, transport: asyncio.Transport) -> None:
        self.transport = transport
        self.opened_at = time.monotonic()  # the link timeout counts from the connection
        set_user_timeout(transport, self.links.link_timeout)
        if self._queue:
            transport.writelines(self._queue)
            self._queue, self._queued = [], 0

    def close(self) -> None:
        if self.transport is not None and not self.closed:
            self.transport.close()
        self.mark_lost()

    def mark_lost(self) -> None:
        if not self.closed:
            self.closed = True
            self._queue = []
            self.links.owner.on_link_lost(self)

    def on_frames(self, frames: list[bytes]) -> None:
        if frames:
            self.last_recv = time.monotonic()
        for f in frames:
            if self.closed:
                return
            try:
                kind, value = internal.decode_frame(f)
            except internal.DecodeError as e:
                self.links.log.warning("%r: bad frame (%s); closing", self, e)
                self.close()
                return
            if kind == internal.KIND_HELLO:
                if self.outbound or self.peer_id >= 0:
                    self.links.log.warning("%r: unexpected hello; closing", self)
                    self.close()
                    return
                self.peer_id, self.role = value
                if not self.links.owner.on_link_hello(self):
                    self.close()
                    return
            elif kind == internal.KIND_PING:
                continue  # heard: last_recv is updated
            elif self.peer_id < 0:
                self.links.log.warning("%r: message before hello; closing", self)
                self.close()
                return
            else:
                self.links.owner.on_link_message(self, value)


class _OutboundProtocol(asyncio.Protocol):
    def __init__(self, link: Link, max_frame: int) -> None:
        self.link = link
        self.reader = FrameReader(max_frame)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        if self.link.closed:
            transport.close()
            return
        transport.write(internal.encode_hello(self.link.links.node_id, self.link.role))
        self.link.attach(transport)

    def data_received(self, data: bytes) -> None:
        try:
            frames = self.reader.feed(data)
        except FrameError as e:
            self.link.links.log.warning("%r: %s; closing", self.link, e)
            self.link.close()
            return
        self.link.on_frames(frames)

    def connection_lost(self, exc: Exception | None) -> None:
        self.link.mark_lost()


class Links:
    """The links of one process, by peer and role."""

    def __init__(self, owner: LinkOwner, node_id: int, log: logging.Logger, max_frame: int,
                 link_timeout: float = 3.0, book: LinkBook[Link] | None = None) -> None:
        self.owner = owner
        self.link_timeout = link_timeout  # seconds without hearing from a peer before its link is closed
        self.node_id = node_id
        self.log = log
        self.max_frame = max_frame
        # the links we opened and the latest each peer opened, by (peer, role, outbound)
        self.book: LinkBook[Link] = book if book is not None else LinkBook()

    def __len__(self) -> int:
        return len(self.book)

    def connect(self, peer_id: int, role: int, host: str, port: int) -> Link:
        """The open (or opening) outbound link to `peer_id`'s `role`, connecting if needed."""
        key = LinkKey(peer_id, role, True)
        link = self.book.get(key)
        if link is not None and not link.closed:
            return link
        link = Link(self, True, peer_id, role)
        self.book.put(key, link)
        loop = asyncio.get_running_loop()
        task = loop.create_task(self._open(link, host, port))
        task.add_done_callback(lambda t: t.cancelled() or t.exception())
        return link

    async def _open(self, link: Link, host: str, port: int) -> None:
        loop = asyncio.get_running_loop()
        try:
            await loop.create_connection(lambda: _OutboundProtocol(link, self.max_frame), host, port)
        except OSError as e:
            self.log.debug("%r: cannot connect to %s:%d: %s", link, host, port, e)
            link.mark_lost()

    def get(self, key: LinkKey) -> Link | None:
        """The open link under `key`, if any."""
        link = self.book.get(key)
        return link if link is not None and not link.closed else None

    def outbound_link(self, peer_id: int, role: int) -> Link | None:
        return self.get(LinkKey(peer_id, role, True))

    def inbound_link(self, peer_id: int, role: int) -> Link | None:
        return self.get(LinkKey(peer_id, role, False))

    def accept(self, transport: asyncio.Transport) -> Link:
        """A connection on one of our listeners turned out to be a peer (first frame ours)."""
        link = Link(self, False)
        link.attach(transport)
        return link

    def register_inbound(self, link: Link) -> None:
        """`link` (its hello just came) is the peer's current one: the one it replaces closes."""
        old = self.book.put(link.key, link)
        if old is not None and not old.closed:
            old.close()

    def forget(self, link: Link) -> bool:
        """Drop `link` from the book; False if a newer link to the peer replaced it."""
        return self.book.forget(link.key, link)

    def check(self, connect_timeout: float) -> None:
        """Once a second: close links that did not connect within min(`connect_timeout`,
        link timeout) or heard nothing for the link timeout (a dead or partitioned peer:
        TCP alone would retry for minutes); ping the others that sent nothing for a
        second. The owner hears `on_link_lost`; the next message reconnects (Kafka's
        socket.connection.setup.timeout.ms, with a request timeout that keepalives make
        short)."""
        now = time.monotonic()
        dead_after = self.link_timeout
        for link in self.book:
            if link.closed:
                continue
            if link.transport is None:
                if now - link.opened_at > min(connect_timeout, dead_after):
                    self.log.info("%r: no connection after %.1f s; giving up", link, now - link.opened_at)
                    link.close()
                continue
            heard = max(link.last_recv, link.opened_at)
            if now - heard > dead_after:
                self.log.info("%r: nothing heard for %.1f s; closing", link, now - heard)
                link.close()
            elif now - link.last_send >= PING_INTERVAL_S:
                link.ping()

    def close_all(self) -> None:
        for link in self.book:
            if link.transport is not None and not link.closed:
                link.transport.close()
            link.closed = True
        self.book.clear()
