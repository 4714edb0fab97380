"""One simulated machine (`SimNode`): its disks, its process's router and timers."""

from __future__ import annotations

from dataclasses import dataclass, field

from broker.core.broker import Broker
from broker.core.messages import NO_LEADER
from broker.core.quorum_controller import ControllerTarget, QuorumController
from broker.core.raft_messages import PersistQuorumState
from broker.io.router import NodeRouter
from broker.sim.disk import SimDisk
from broker.sim.raft_invariants import SimRaftLog


@dataclass
class SimNode:
    """One machine: a broker, a controller voter, or both (one process). `io` is the
    process's router (broker/io/router.py), new at each start: its machines, controller
    target and links."""

    id: int
    is_broker: bool = True
    is_voter: bool = False
    disk: SimDisk = field(default_factory=SimDisk)  # the partition logs
    raft_log: SimRaftLog = field(default_factory=SimRaftLog)  # the metadata log (a voter's)
    quorum_state: PersistQuorumState = PersistQuorumState(0, NO_LEADER, NO_LEADER)
    io: NodeRouter | None = None
    incarnation: int = 0
    paused: bool = False
    backlog: list[tuple[object, ...]] = field(default_factory=list)  # events held while paused
    bad_since: int | None = None  # the in-process way to its own controller unusable since (cut)
    broker_calls: int = 0  # the router's count when the broker's deadline was last read
    tick_token: int = 0
    tick_at: int | None = None
    qtick_token: int = 0
    qtick_at: int | None = None

    @property
    def broker(self) -> Broker | None:
        return None if self.io is None else self.io.broker

    @property
    def quorum(self) -> QuorumController | None:
        return None if self.io is None else self.io.quorum

    @property
    def target(self) -> ControllerTarget | None:
        """Where the broker's controller requests go (None on a dedicated controller)."""
        return self.io.target if self.io is not None and self.is_broker else None

    @property
    def up(self) -> bool:
        return self.broker is not None or self.quorum is not None
