"""The simulation's links: connections as objects the routing picks and faults can break.

Each node's `NodeRouter` (broker/io/router.py) decides which link carries a message, as
in the process; `SimLink` is what such a link is here: opened by one process (`opener`,
in its incarnation) to a role of another (`acceptor`). The acceptor takes it as its
current inbound link of that peer and role when the first message on it arrives (the
hello comes with it), which closes the one it replaces.

A link end is lost (the router hears `on_link_lost`, and the next message opens a new
link) when
- its peer's process is killed: the peer's host resets the connection, at once unless a
  partition is in between (`crash_resets`);
- it is a broker's link to a controller whose process ended or restarted, or the one to
  its target controller stayed unusable (peer down, paused, partitioned, cut) for
  `link_timeout_ms`: the link check, once a second (`_check_controller_link`);
- a fault says so (`lose_link`).
Links decide the routing and what a loss means; delivery stays the network's, by node pair,
as it always was in the simulation (broker/sim/network.py): a message already sent
arrives even if an end of its link closed meanwhile (what was in flight before a kill,
a message a fault story held back), and a link whose acceptor restarted unheard-of
carries on to the new process. The process finds such a link dead by its link check
within the link timeout; `lose_link` injects that where a test needs it.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from broker.io.effects import Effect
from broker.io.links import (
    CONTROLLER_ROLES,
    ROLE_ALTER_PARTITION,
    ROLE_BROKER,
    ROLE_CONTROLLER,
    ROLE_RAFT,
    LinkKey,
)
from broker.sim.network import SimNetwork
from broker.sim.node import SimNode

_ids = itertools.count(1)


@dataclass(eq=False)
class SimLink:
    """One simulated connection, from `opener` to `acceptor`'s `role`."""

    opener: int
    opener_inc: int
    acceptor: int
    acceptor_inc: int | None  # the acceptor process it connected to (None: not yet, it was down)
    role: int
    id: int = field(default_factory=lambda: next(_ids))
    bad_since: int | None = None  # unusable since (the controller link check)
    closed: set[tuple[int, int]] = field(default_factory=set)  # ends closed: (node, incarnation)

    def key_at(self, node: int) -> LinkKey:
        """This link as `node`'s router names it."""
        if node == self.opener:
            return LinkKey(self.acceptor, self.role, True)
        return LinkKey(self.opener, self.role, False)

    def __repr__(self) -> str:
        return f"<link {self.id} {self.opener}->{self.acceptor} role {self.role}>"


@dataclass(frozen=True, slots=True)
class Envelope:
    """A message in flight: on `link`, or in process to machine `target`, or (neither) a
    client's or an admin's, or one sent by hand (`SimCluster.send`)."""

    src: int | str
    msg: object
    incarnation: int  # the receiver's when it was sent: it dies with that process
    link: SimLink | None = None
    target: str | None = None


class SimLinks:
    """The link half of `SimCluster` (a mixin: it uses the cluster's nodes, network, clock
    and event queue, and `_run` to perform what a router hands back)."""

    nodes: dict[int, SimNode]
    net: SimNetwork
    now: int

    def _push(self, t: int, kind: str, *args: object) -> None: ...

    def _run(self, n: SimNode, effects: list[Effect], quorum: Any = None) -> None: ...

    # ------------------------------------------------------------ opening and receiving
    def _link_for(self, n: SimNode, key: LinkKey) -> SimLink | None:
        """The link of node n under `key`; an outbound one is opened if none is open."""
        assert n.io is not None
        link = n.io.links.get(key)
        if link is None and key.outbound and key.peer in self.nodes:
            peer = self.nodes[key.peer]
            link = SimLink(n.id, n.incarnation, key.peer, peer.incarnation if peer.up else None, key.role)
            n.io.links.put(key, link)
        return link

    def _receive(self, n: SimNode, link: SimLink, msg: object) -> list[Effect] | None:
        """A message on `link` reached node n's process: its router's effects (None if n
        refused the link). The first message on a link newer than n's current one of that
        peer and role makes it current; a message on an older or closed link still counts
        (see the module docstring)."""
        io = n.io
        assert io is not None
        me = (n.id, n.incarnation)
        key = link.key_at(n.id)
        if link.acceptor == n.id and link.acceptor_inc is None:
            link.acceptor_inc = n.incarnation  # it connects once the peer is up
        if not key.outbound and me not in link.closed and io.links.get(key) is not link:
            cur = io.links.get(key)
            if cur is None or cur.id < link.id:  # a new inbound link: its hello
                if io.refuse_link(key) is not None:
                    self._close(n, key, link)
                    return None
                old = io.links.put(key, link)
                if old is not None:
                    old.closed.add(me)  # closed without a loss: the new one replaces it
        return io.on_link_message(key, msg, self.now)

    # ------------------------------------------------------------ losing links
    def _lose(self, n: SimNode, key: LinkKey, link: SimLink) -> bool:
        """Node n's end of `link` is gone; its router hears of it if it was current."""
        n_io = n.io
        link.closed.add((n.id, n.incarnation))
        if n_io is None or not n_io.links.forget(key, link):
            return False
        self._run(n, n_io.on_link_lost(key, self.now))
        return True

    def _close(self, n: SimNode, key: LinkKey, link: SimLink) -> None:
        """Node n closes `link` (a refused hello or message): its end now, the peer's when
        the close reaches it."""
        self._lose(n, key, link)
        peer = link.acceptor if key.outbound else link.opener
        far = self.nodes.get(peer)
        if far is None:
            return
        inc = far.incarnation
        fkey = link.key_at(peer)

        def reached() -> None:
            if far.incarnation == inc and far.up:
                self._lose(far, fkey, link)

        self._push(self.now + self.net.settings.min_delay_ms, "call", reached)

    def lose_link(self, node: int, peer: int, role: int = ROLE_BROKER, outbound: bool = True) -> bool:
        """Fault: node's link of `role` with `peer` (the one it opened, or with `outbound`
        False the one `peer` opened) is found broken now, by node only: its router
        decides what that means (e.g. the process's link check closing a link to a peer
        that restarted, whose reset was lost). False if node had no such link."""
        n = self.nodes[node]
        key = LinkKey(peer, role, outbound)
        link = n.io.links.get(key) if n.io is not None and n.up else None
        return link is not None and self._lose(n, key, link)

    def link(self, node: int, peer: int, role: int = ROLE_BROKER, outbound: bool = True) -> SimLink | None:
        """Node's current link of `role` with `peer` (see `lose_link`), if any."""
        n = self.nodes[node]
        return n.io.links.get(LinkKey(peer, role, outbound)) if n.io is not None and n.up else None

    def crash_resets(self, i: int) -> None:
        """Node i's process was killed, its host is up: each broker holding links with it
        hears the reset `min_delay_ms` later, unless a partition is in between (its
        replication links too, unless only the data plane is cut); one whose controller
        requests went to i (`target`), even with no link to it yet."""
        dead = self.nodes[i]
        for j, m in self.nodes.items():
            if j == i or not m.is_broker or m.broker is None or m.io is None or (i, j) in self.net.blocked:
                continue
            data = dead.is_broker and (i, j) not in self.net.data_blocked
            target = dead.is_voter and m.io.target.target == i
            if target or any(k.peer == i and (data or not k.data_plane) for k, _ in m.io.links.items()):
                inc = m.incarnation
                self._push(
                    self.now + self.net.settings.min_delay_ms,
                    "call",
                    lambda j=j, inc=inc, data=data: self._reset(j, inc, i, data),
                )

    def _reset(self, j: int, incarnation: int, peer: int, data: bool) -> None:
        """Broker j's links with `peer` are reset (its replication links only if `data`);
        the controller ones first, so a lost target is moved before the rest is lost."""
        m = self.nodes[j]
        if m.incarnation != incarnation or m.io is None or m.broker is None:
            return
        if self.nodes[peer].is_voter and m.io.links.get(LinkKey(peer, ROLE_CONTROLLER, True)) is None:
            self._run(m, m.io.on_controller_unreachable(peer, self.now))  # reset while connecting
        roles = (ROLE_CONTROLLER, ROLE_ALTER_PARTITION, ROLE_RAFT, *((ROLE_BROKER,) if data else ()))
        for role in roles:
            for outbound in (False, True):
                key = LinkKey(peer, role, outbound)
                link = m.io.links.get(key)
                if link is not None:
                    self._lose(m, key, link)

    # ------------------------------------------------------------ the controller link check
    def _controller_reachable(self, b: int, v: int) -> bool:
        if b in self.net.controller_cut:
            return False
        if b == v:
            return True
        vn = self.nodes[v]
        blocked = self.net.blocked
        return vn.quorum is not None and not vn.paused and (b, v) not in blocked and (v, b) not in blocked

    def _check_controller_link(self, n: SimNode, timeout_ms: int) -> bool:
        """The link check for broker n's links to the controllers: one whose peer restarted
        is lost (the new process resets it), and the one to its target controller when it
        stayed unusable for `timeout_ms` (True: something happened)."""
        assert n.io is not None
        restarted = False
        for key, link in n.io.links.items():
            if key.role in CONTROLLER_ROLES and key.outbound:
                peer = self.nodes[key.peer]
                if link.acceptor_inc is None and peer.up:
                    link.acceptor_inc = peer.incarnation  # it connects once the peer is up
                elif link.acceptor_inc not in (None, peer.incarnation):
                    restarted = self._lose(n, key, link) or restarted
        if restarted:
            return True
        v = n.io.target.target
        link = None if v == n.id else n.io.links.get(LinkKey(v, ROLE_CONTROLLER, True))
        if v != n.id and link is None:
            return False
        holder: Any = link if link is not None else n
        if self._controller_reachable(n.id, v):
            holder.bad_since = None
            return False
        if holder.bad_since is None:
            holder.bad_since = self.now
        if self.now - holder.bad_since < timeout_ms:
            return False
        holder.bad_since = None
        self._lose_controller(n, v)
        return True

    def _lose_controller(self, n: SimNode, v: int) -> None:
        """Broker n's links to controller v are lost (in process: its way there is)."""
        assert n.io is not None
        if v == n.id:
            self._run(n, n.io.on_controller_unreachable(v, self.now))
            return
        for role in CONTROLLER_ROLES:
            key = LinkKey(v, role, True)
            link = n.io.links.get(key)
            if link is not None:
                self._lose(n, key, link)
