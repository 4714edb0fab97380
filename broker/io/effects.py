"""The primitive effects a `NodeRouter` hands its shell, performed in the order given.

Within the effects of one call, the quorum's durability (`PersistState`, `SyncLog`) comes
before anything that leaves the process (`Transmit`, `Deliver`, `Wake`, `ToClient`): a
vote, a candidacy or an acknowledged entry must survive a crash before anyone hears of it.
"""

from __future__ import annotations

from dataclasses import dataclass

from broker.core.raft_messages import PersistQuorumState
from broker.io.links import LinkKey

BROKER = "broker"  # a node's machines: its Broker ...
CONTROLLER = "controller"  # ... and its QuorumController (Raft voter, active controller while it leads)

Waiter = object  # what the shell registered for an answer (a callback, a future): opaque here


@dataclass(frozen=True, slots=True)
class Transmit:
    """Send `message` on the link `key`. An outbound key with no link open: open one to
    `key.peer` (its `key.role`) and send on it; an inbound key always names a link the
    router saw open."""

    key: LinkKey
    message: object


@dataclass(frozen=True, slots=True)
class Deliver:
    """Hand `message` from this node (`src`, its own id) to its other machine, `target`
    (BROKER or CONTROLLER), in process: through a queue the shell drains after the current
    event (`NodeRouter.on_local`), never by recursion."""

    target: str
    src: int
    message: object


@dataclass(frozen=True, slots=True)
class Wake:
    """The answer to a request a waiter was registered for: give it `message`."""

    waiter: Waiter
    message: object


@dataclass(frozen=True, slots=True)
class ToClient:
    """An answer for client `client` that registered no waiter (the simulation's clients
    are on its network; the process has none: it drops it)."""

    client: str
    message: object


@dataclass(frozen=True, slots=True)
class PersistState:
    """Write the quorum-state file durably."""

    state: PersistQuorumState


@dataclass(frozen=True, slots=True)
class SyncLog:
    """Make the metadata log durable: its first `end_offset` entries, or all of it (None)."""

    end_offset: int | None


@dataclass(frozen=True, slots=True)
class CloseLink:
    """The message on link `key` is not one its role may carry: close the link (its loss
    comes back through `NodeRouter.on_link_lost`)."""

    key: LinkKey
    why: str


@dataclass(frozen=True, slots=True)
class Perform:
    """One of the machine's own actions, for the shell (`CheckpointHighWatermarks`,
    `DeletePartitionLog`, `ShutdownComplete`, `LogFailure`, `ReplicaTruncated`,
    `ControllerActivated`, `RoleChanged`, ...) or a notice of the router's (below)."""

    origin: str
    action: object


@dataclass(frozen=True, slots=True)
class TargetMoved:
    """Notice: the broker's controller requests go to `target` now (were to `was`)."""

    target: int
    was: int
    epoch: int


@dataclass(frozen=True, slots=True)
class NoMachine:
    """Notice: a message for a machine this node does not run was dropped."""

    target: str
    src: int | str
    message: object


Effect = Transmit | Deliver | Wake | ToClient | PersistState | SyncLog | CloseLink | Perform
