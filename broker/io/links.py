"""A node's links to its peers, by peer, role and direction.

A node reaches a peer over links, each a connection one side opened for one role of the
other side (broker/wire/internal.py): `ROLE_BROKER` (replica fetches to the peer's broker),
`ROLE_CONTROLLER` (a broker's requests to a controller), `ROLE_ALTER_PARTITION` (its
AlterPartition requests, on a channel of their own) and `ROLE_RAFT` (between the quorum's
voters). So a node may hold two links of one role with a peer: the one it opened
(`outbound`) and the one the peer opened. `LinkKey` names one of them, `LinkBook` keeps the
current link for each key: what a link is (a transport, a simulated connection) is the
shell's business.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Generic, TypeVar

from broker.wire.internal import (
    CONTROLLER_ROLES,
    ROLE_ALTER_PARTITION,
    ROLE_BROKER,
    ROLE_CONTROLLER,
    ROLE_RAFT,
)

__all__ = [
    "CONTROLLER_ROLES",
    "ROLE_ALTER_PARTITION",
    "ROLE_BROKER",
    "ROLE_CONTROLLER",
    "ROLE_RAFT",
    "LinkBook",
    "LinkKey",
    "role_name",
]

L = TypeVar("L")
_NAMES = {
    ROLE_BROKER: "broker",
    ROLE_CONTROLLER: "controller",
    ROLE_ALTER_PARTITION: "alter-partition",
    ROLE_RAFT: "raft",
}


def role_name(role: int) -> str:
    return _NAMES.get(role, f"role-{role}")


@dataclass(frozen=True, slots=True)
class LinkKey:
    """A link of this node: to or from `peer`, for `role` (the role of the side that
    accepted it), opened by this node when `outbound`."""

    peer: int
    role: int
    outbound: bool

    def __str__(self) -> str:
        return f"{'to' if self.outbound else 'from'} node {self.peer} ({role_name(self.role)})"

    @property
    def data_plane(self) -> bool:
        """Replication traffic (broker to broker), not the controllers' plane."""
        return self.role == ROLE_BROKER


class LinkBook(Generic[L]):
    """The current link for each `LinkKey`. A newer link under a key replaces the older
    (`put` returns it: the shell closes it, and its loss is then not news); `forget` takes
    a lost link out and says whether it was the current one (only then does its loss mean
    anything)."""

    def __init__(self) -> None:
        self._links: dict[LinkKey, L] = {}

    def get(self, key: LinkKey) -> L | None:
        return self._links.get(key)

    def put(self, key: LinkKey, link: L) -> L | None:
        """Make `link` current under `key`; the link it replaced, if another."""
        old = self._links.get(key)
        self._links[key] = link
        return None if old is link else old

    def forget(self, key: LinkKey, link: L) -> bool:
        """Take `link` out if it is current under `key`; False if a newer one replaced it."""
        if self._links.get(key) is link:
            del self._links[key]
            return True
        return False

    def items(self) -> list[tuple[LinkKey, L]]:
        return list(self._links.items())

    def __iter__(self) -> Iterator[L]:
        return iter(list(self._links.values()))

    def __len__(self) -> int:
        return len(self._links)

    def clear(self) -> None:
        self._links.clear()
