"""Inter-node links in process: hello and messages both ways, refusal of bad frames, and
silent peers (accepting but never answering, or never accepting) being given up on so
that the next message reconnects."""

from __future__ import annotations

import asyncio
import logging
import socket

from broker.core.messages import MetadataFetchRequest, MetadataFetchResponse
from broker.server.transport import Link, Links
from broker.wire import internal
from broker.wire.frames import FrameReader


class Owner:
    def __init__(self) -> None:
        self.messages: list[tuple[int, object]] = []
        self.lost: list[Link] = []
        self.hellos: list[Link] = []
        self.links: Links | None = None

    def on_link_message(self, link: Link, msg: object) -> None:
        self.messages.append((link.peer_id, msg))

    def on_link_hello(self, link: Link) -> bool:
        self.hellos.append(link)
        assert self.links is not None
        self.links.register_inbound(link)
        return True

    def on_link_lost(self, link: Link) -> None:
        self.lost.append(link)
        assert self.links is not None
        self.links.forget(link)


class Server(asyncio.Protocol):
    """The accepting side, as connection.py does it."""

    def __init__(self, links: Links) -> None:
        self.links = links
        self.reader = FrameReader(1 << 20)
        self.link: Link | None = None

    def connection_made(self, transport) -> None:
        self.link = self.links.accept(transport)

    def data_received(self, data: bytes) -> None:
        assert self.link is not None
        self.link.on_frames(self.reader.feed(data))

    def connection_lost(self, exc) -> None:
        if self.link is not None:
            self.link.mark_lost()


def make(node_id: int) -> tuple[Owner, Links]:
    owner = Owner()
    links = Links(owner, node_id, logging.getLogger("test"), 1 << 20)
    owner.links = links
    return owner, links


async def wait_for(pred, timeout: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not pred():
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.01)


def test_messages_flow_both_ways_on_one_link():
    async def main() -> None:
        a_owner, a = make(1)
        b_owner, b = make(2)
        server = await asyncio.get_running_loop().create_server(lambda: Server(b), "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        link = a.connect(2, internal.ROLE_CONTROLLER, "127.0.0.1", port)
        link.send(MetadataFetchRequest(7, 1, 0, 100))  # queued until connected
        await wait_for(lambda: b_owner.messages)
        assert b_owner.messages == [(1, MetadataFetchRequest(7, 1, 0, 100))]
        back = b.inbound_link(1, internal.ROLE_CONTROLLER)
        assert back is not None and back.send(MetadataFetchResponse(7, (), 0))
        await wait_for(lambda: a_owner.messages)
        assert a_owner.messages == [(2, MetadataFetchResponse(7, (), 0))]
        # a bad frame closes the link; both sides hear of it
        back.transport.write(len(b"\x7a\x11\x01\xff").to_bytes(4, "big") + b"\x7a\x11\x01\xff")
        await wait_for(lambda: a_owner.lost and b_owner.lost)
        assert a.outbound_link(2, internal.ROLE_CONTROLLER) is None
        server.close()

    asyncio.run(main())


def test_silent_and_unreachable_peers_are_given_up():
    async def main() -> None:
        owner, links = make(1)
        links.link_timeout = 0.2
        mute = socket.socket()
        mute.bind(("127.0.0.1", 0))
        mute.listen(8)  # accepts (kernel backlog) but never reads or answers
        port = mute.getsockname()[1]
        link = links.connect(2, internal.ROLE_BROKER, "127.0.0.1", port)
        await wait_for(lambda: link.transport is not None)
        link.send(MetadataFetchRequest(1, 1, 0, 100))
        links.check(10.0)
        assert not link.closed
        await asyncio.sleep(0.3)
        links.check(10.0)
        assert link.closed and owner.lost == [link]
        # a new message opens a new link
        again = links.connect(2, internal.ROLE_BROKER, "127.0.0.1", port)
        assert again is not link and not again.closed
        # not connected within the setup timeout (here 0 s: checked before the connect ran)
        never = links.connect(3, internal.ROLE_BROKER, "127.0.0.1", port)
        links.check(0.0)
        assert never.closed and never in owner.lost
        links.close_all()
        mute.close()

    asyncio.run(main())


def test_pings_keep_idle_links_alive_and_set_the_tcp_user_timeout():
    async def main() -> None:
        a_owner, a = make(1)
        b_owner, b = make(2)
        a.link_timeout = b.link_timeout = 2.5
        server = await asyncio.get_running_loop().create_server(lambda: Server(b), "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        link = a.connect(2, internal.ROLE_BROKER, "127.0.0.1", port)
        link.send(MetadataFetchRequest(7, 1, 0, 100))
        await wait_for(lambda: b_owner.messages)
        sock = link.transport.get_extra_info("socket")
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT) == 2500
        back = b.inbound_link(1, internal.ROLE_BROKER)
        assert back.transport.get_extra_info("socket").getsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT) == 2500
        for _ in range(4):  # 4 s of idleness, longer than the link timeout: the pings keep both ends alive
            await asyncio.sleep(1.0)
            a.check(10.0)
            b.check(10.0)
        assert not link.closed and not back.closed and a_owner.lost == [] and b_owner.lost == []
        assert b_owner.messages == [(1, MetadataFetchRequest(7, 1, 0, 100))]  # pings are not messages
        # one side stops pinging (its process is stopped): the other closes the link
        for _ in range(4):
            await asyncio.sleep(1.0)
            b.check(10.0)
        assert back.closed and back in b_owner.lost
        await wait_for(lambda: a_owner.lost == [link])
        a.close_all()
        b.close_all()
        server.close()

    asyncio.run(main())
