"""A controller node of the quorum: its `RaftNode`, and the `Controller` while it leads.

Sans-IO like the rest of the core: `handle(src, msg, now_ms)`, `tick(now_ms)` and
`next_deadline()`. Every controller node runs a `RaftNode` over
`controller.quorum.voters`; the active controller is the Raft leader (seed 003, 1.2.1;
KIP-595 as KRaft does it):

- **Becoming active.** Once this node leads and its `LeaderChangeRecord` is committed
  (so every entry in its log is), a `Controller` is built from the committed log and
  started: every unfenced broker gets a fresh session.
- **Writing.** The controller appends its records through the `RaftNode`
  (`MetadataQuorum`); what it sends in reply to a call is held until the quorum's high
  watermark passes the records that call wrote, so nobody acts on a change a new leader
  could lose. Metadata fetches are answered with committed records only.
- **Losing leadership** (a higher epoch, check quorum): the controller is dropped with
  everything held, and every broker it knew is told `NotController(leader, epoch)`.
- **Not active.** A controller-bound request is answered `NotController` with the leader
  this node knows (-1: none yet), so the broker's shell sends it there. A leader whose
  `LeaderChangeRecord` has not committed yet keeps the requests (at most
  `MAX_WAITING`) and hands them to its controller once active, or answers them
  `NotController` if it loses leadership first: answering "not controller, the leader
  is me" would send the broker straight back, in a loop, until the commit.

Raft messages (`RAFT_MESSAGES`) travel between voters; everything else to brokers. The
shell performs `Actions.other` (`PersistQuorumState`, `FlushLog`, `LogTruncated`,
`RoleChanged`) before it sends anything of the same call.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from broker.core.controller import Controller, ControllerConfig
from broker.core.messages import CONTROLLER_BOUND, Actions, GetReplicaLogInfoResponse, NotController, Send
from broker.core.raft import RaftNode, Role
from broker.core.raft_messages import (
    BeginQuorumEpochRequest,
    RaftFetchRequest,
    RaftFetchResponse,
    VoteRequest,
    VoteResponse,
)

RAFT_MESSAGES = (VoteRequest, VoteResponse, BeginQuorumEpochRequest, RaftFetchRequest, RaftFetchResponse)
MAX_WAITING = 1000  # controller-bound requests a leader keeps until its controller is active


@dataclass(frozen=True, slots=True)
class ControllerActivated:
    """This node's controller became active in quorum `epoch` (the shell logs it)."""

    epoch: int
    metadata_end: int


@dataclass(frozen=True, slots=True)
class ControllerDeactivated:
    """This node's controller stopped being active; `leader_id` is who leads now, if known."""

    epoch: int
    leader_id: int


@dataclass(slots=True)
class _Held:
    """Sends of one controller call, released once `committed_offset >= need`."""

    need: int
    sends: list[Send]


class QuorumController:
    """See the module docstring. `controller` is the active `Controller`, else None."""

    def __init__(self, config: ControllerConfig, raft: RaftNode) -> None:
        self.config = config
        self.raft = raft
        self.controller: Controller | None = None
        self._active_epoch = -1
        self._held: list[_Held] = []
        self._waiting: list[tuple[int | str, object]] = []  # for the controller this leader is about to run

    @property
    def node_id(self) -> int:
        return self.raft.node_id

    @property
    def leader_id(self) -> int:
        """The quorum leader this node knows, -1 when none."""
        return self.raft.leader_id

    @property
    def epoch(self) -> int:
        return self.raft.epoch

    # ------------------------------------------------------------ entry points
    def handle(self, src: int | str, msg: object, now_ms: int) -> Actions:
        """A Raft message from a voter (or observer), or a controller-bound message."""
        if isinstance(msg, RAFT_MESSAGES):
            acts = self.raft.handle(src, msg, now_ms)  # type: ignore[arg-type]
        elif isinstance(msg, CONTROLLER_BOUND):
            acts = Actions()
            if self.controller is not None:
                self._run_controller(self.controller.handle(src, msg, now_ms), acts)
            elif self.raft.role is Role.LEADER:
                self._waiting = [*self._waiting[-(MAX_WAITING - 1):], (src, msg)]
            elif not isinstance(msg, GetReplicaLogInfoResponse):
                acts.send(src, NotController(self._known_leader(), self.raft.epoch))
        else:
            raise TypeError(f"quorum controller cannot handle {type(msg).__name__}")
        self._settle(now_ms, acts)
        return acts

    def tick(self, now_ms: int) -> Actions:
        acts = Actions()
        d = self.raft.next_deadline()
        if d is not None and d <= now_ms:
            _extend(acts, self.raft.tick(now_ms))
            self._follow_leadership(now_ms, acts)
        if self.controller is not None:
            d = self.controller.next_deadline()
            if d is not None and d <= now_ms:
                self._run_controller(self.controller.tick(now_ms), acts)
        self._settle(now_ms, acts)
        return acts

    def next_deadline(self) -> int | None:
        ds = [self.raft.next_deadline()]
        if self.controller is not None:
            ds.append(self.controller.next_deadline())
        due = [d for d in ds if d is not None]
        return min(due) if due else None

    # ------------------------------------------------------------ internals
    def _run_controller(self, cacts: Actions, acts: Actions) -> None:
        """Hold what the controller sends until the records of this call commit."""
        acts.other.extend(cacts.other)
        if cacts.sends:
            self._held.append(_Held(self.raft.end_offset, list(cacts.sends)))

    def _settle(self, now_ms: int, acts: Actions) -> None:
        """After any call: let the leader flush and commit what was appended, follow
        leadership changes, answer what the commit made ready."""
        d = self.raft.next_deadline()
        if d is not None and d <= now_ms:
            _extend(acts, self.raft.tick(now_ms))
        self._follow_leadership(now_ms, acts)
        if self.controller is not None:
            self._run_controller(self.controller.committed(now_ms), acts)
        committed = self.raft.committed_offset
        while self._held and self._held[0].need <= committed:
            acts.sends.extend(self._held.pop(0).sends)

    def _follow_leadership(self, now_ms: int, acts: Actions) -> None:
        raft = self.raft
        leading = raft.role is Role.LEADER
        if self.controller is not None and (not leading or raft.epoch != self._active_epoch):
            self._deactivate(acts)
        if leading and self.controller is None and raft.committed_offset >= raft.end_offset:
            self.controller = Controller(self.config, raft)
            self._active_epoch = raft.epoch
            acts.other.append(ControllerActivated(raft.epoch, raft.end_offset))
            _extend(acts, self.controller.start(now_ms))
            waiting, self._waiting = self._waiting, []
            for src, msg in waiting:
                self._run_controller(self.controller.handle(src, msg, now_ms), acts)
        elif not leading and self._waiting:
            waiting, self._waiting = self._waiting, []
            _refuse(waiting, self._known_leader(), self.raft.epoch, acts)

    def _known_leader(self) -> int:
        """The leader to name in a NotController: never this node (it is not active)."""
        return self.raft.leader_id if self.raft.leader_id != self.node_id else -1

    def _deactivate(self, acts: Actions) -> None:
        assert self.controller is not None
        brokers = sorted(self.controller.image.brokers)
        self.controller = None
        self._held.clear()
        leader = self._known_leader()
        acts.other.append(ControllerDeactivated(self.raft.epoch, leader))
        for b in brokers:
            acts.send(b, NotController(leader, self.raft.epoch))


def _refuse(requests: Sequence[tuple[int | str, object]], leader_id: int, epoch: int, acts: Actions) -> None:
    for src in dict.fromkeys(src for src, msg in requests if not isinstance(msg, GetReplicaLogInfoResponse)):
        acts.send(src, NotController(leader_id, epoch))


def _extend(acts: Actions, more: Actions) -> None:
    acts.sends.extend(more.sends)
    acts.other.extend(more.other)


class ControllerTarget:
    """Where a broker's shell sends its controller-bound requests: the active controller
    as far as it knows. Pure bookkeeping shared by the process shell and the simulation.

    - At first: this node's own controller if it is a voter, else the first voter.
    - `not_controller(src, leader_id, epoch)`: `src` answered `NotController`. The leader
      it names (or the one known for a newer epoch) becomes the target; with none known,
      the voter after `src`. `src` itself is never the leader (it just said it is not
      active), and news older than what is known only moves the target away from `src`
      (a voter left behind in an old epoch must not keep the broker). Returns True when
      what is in flight must be sent again (it went to `src`, or the target moved).
    - `activated(node_id, epoch)`: this node's own controller became active (combined).
    - `link_lost(peer)`: the link to `peer` broke (reset, or silent for the link
      timeout); if it was the target, the next voter is tried (it names the leader).
    """

    def __init__(self, voters: Sequence[int], node_id: int) -> None:
        if not voters:
            raise ValueError("no controller voters")
        self.voters = tuple(voters)
        self.target = node_id if node_id in self.voters else self.voters[0]
        self.epoch = -1
        self.leader = -1  # the leader known for `epoch`, -1 when none

    def next_voter(self, after: int) -> int:
        ids = self.voters
        return ids[(ids.index(after) + 1) % len(ids)] if after in ids else ids[0]

    def not_controller(self, src: int, leader_id: int, epoch: int) -> bool:
        if epoch > self.epoch:
            self.epoch, self.leader = epoch, leader_id
        elif epoch == self.epoch and leader_id != -1:
            self.leader = leader_id
        if self.leader == src:  # it is not active (any more)
            self.leader = -1
        old = self.target
        if self.leader in self.voters:
            self.target = self.leader
        elif src == old:
            self.target = self.next_voter(src)
        return src == old or self.target != old

    def activated(self, node_id: int, epoch: int) -> bool:
        """True when the target moved here (what is in flight must be sent again)."""
        if epoch < self.epoch:
            return False
        self.epoch, self.leader = epoch, node_id
        old, self.target = self.target, node_id
        return old != node_id

    def link_lost(self, peer: int) -> bool:
        """True when the target moved (what was in flight to `peer` must be sent again)."""
        if peer != self.target:
            return False
        self.target = self.next_voter(peer)
        return True
