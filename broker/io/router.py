"""One node's routing between its core machines and its links, sans-IO.

`NodeRouter` stands between a node's `Broker` and `QuorumController` (either may be None)
and its shell. The shell calls it with what happened (a message on a link, a client's
request, a link lost, a timer) and performs the primitive effects it returns, in order
(broker/io/effects.py). The process (broker/server/node.py) and the simulation
(broker/sim/cluster.py) both do, so the rules below are the same in both:

- **Durability.** The quorum's `PersistQuorumState` and `FlushLog` come first of a call's
  effects, before any send; with `sync_log_each_call` (the process) the whole metadata
  log is synced after every quorum call too, before the answers that depend on it.
- **Which link carries what.** A broker's controller-bound requests (`CONTROLLER_BOUND`) go
  to the active controller as far as it knows (`target`): in process when that is this
  node's own controller, else on the link it opens to the voter, `ROLE_ALTER_PARTITION`
  for AlterPartition (a channel of its own, as Kafka's), `ROLE_CONTROLLER` for the rest.
  Its replies to a peer (`FetchResponse`, ...) go on the link the peer opened to it (else
  on its own to the peer); its requests to a peer (fetches) on the link it opens. The
  controller answers a broker on the link that broker opened (an AlterPartition answer on
  the AlterPartition link first), its own broker in process; voters talk on the links
  each opens to the other. Answers to a client address go to the waiter registered for
  the correlation id (`Wake`), else out to the client (`ToClient`).
- **What a link may carry.** On a link this node opened: answers from the controller and
  from leaders (`FROM_CONTROLLER`), for its broker. On a link a peer opened to its broker:
  fetches only. To its controller: controller-bound messages naming that peer. On a raft
  link: quorum messages from a voter. Anything else closes the link (`CloseLink`).
- **A lost link.** A lost broker link abandons the fetch in flight to the peer; only a
  lost link the *peer* opened drops the peer's parked fetches (`Broker.connection_lost`'s
  `outbound_only`): a link this node opened says nothing of the peer's own. A lost link
  to the target controller moves the target to the next voter and sends what was in
  flight again (`Broker.controller_connection_lost`, the forwarded admin requests); a
  lost AlterPartition link to it sends the unanswered AlterPartitions again. Losing a
  link to a voter that is not the target, or a raft link, changes nothing (the quorum
  has its own timeouts).
- **The controller target** (`ControllerTarget`): a `NotController` answer, this node's
  quorum member following a leader (`RoleChanged`), or its controller becoming active
  (`ControllerActivated`, combined mode) move it; whenever a move means the requests in
  flight went astray they are sent again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from broker.core.broker import Broker
from broker.core.messages import (
    CONTROLLER_BOUND,
    Actions,
    AlterConfigsResponse,
    AlterPartitionRequest,
    AlterPartitionResponse,
    AlterReassignmentResponse,
    BrokerHeartbeatResponse,
    BrokerRegistrationResponse,
    CreateAclsResponse,
    CreatePartitionsResponse,
    CreateTopicResponse,
    DeleteAclsResponse,
    DeleteTopicResponse,
    ElectLeadersResponse,
    FetchRequest,
    FetchResponse,
    GetReplicaLogInfoRequest,
    MetadataFetchResponse,
    MetadataResponse,
    NotController,
    OffsetsForLeaderEpochResponse,
)
from broker.core.quorum_controller import (
    RAFT_MESSAGES,
    ControllerActivated,
    ControllerTarget,
    QuorumController,
)
from broker.core.raft import Role
from broker.core.raft_messages import FlushLog, PersistQuorumState, RoleChanged
from broker.io.effects import (
    BROKER,
    CONTROLLER,
    CloseLink,
    Deliver,
    Effect,
    NoMachine,
    Perform,
    PersistState,
    SyncLog,
    TargetMoved,
    ToClient,
    Transmit,
    Waiter,
    Wake,
)
from broker.io.links import (
    CONTROLLER_ROLES,
    ROLE_ALTER_PARTITION,
    ROLE_BROKER,
    ROLE_CONTROLLER,
    ROLE_RAFT,
    LinkBook,
    LinkKey,
)

# A broker's answers to a peer: on the link the peer opened (else on ours to it).
PEER_REPLIES = (FetchResponse, OffsetsForLeaderEpochResponse, MetadataResponse)
ADMIN_REPLIES = (
    CreateTopicResponse,
    DeleteTopicResponse,
    ElectLeadersResponse,
    CreatePartitionsResponse,
    AlterConfigsResponse,
    AlterReassignmentResponse,
    CreateAclsResponse,
    DeleteAclsResponse,
)
# What a broker accepts on the links it opened (answers from the controller and from
# leaders, the controller's log inspection) and on the links peers opened (their fetches).
FROM_CONTROLLER = (
    BrokerRegistrationResponse,
    BrokerHeartbeatResponse,
    MetadataFetchResponse,
    AlterPartitionResponse,
    GetReplicaLogInfoRequest,
    FetchResponse,
    NotController,
    *ADMIN_REPLIES,
)
FROM_PEERS = (FetchRequest,)


@dataclass
class Waiters:
    """Who waits for which answer: a client request's answer by correlation id, and the
    admin requests forwarded to the controller (sent again when the controller moves)."""

    replies: dict[int, Waiter] = field(default_factory=dict)
    admin: dict[int, tuple[Waiter, object]] = field(default_factory=dict)


class NodeRouter:
    """See the module docstring. The shell sets `broker` and `quorum` (None: not running
    here) and owns what the links are; `links` is its book of the open ones, which the
    router reads to pick a link and the shell keeps (`LinkBook.put`, `forget`)."""

    def __init__(self, node_id: int, voters: Sequence[int], sync_log_each_call: bool = False) -> None:
        self.node_id = node_id
        self.voters = tuple(voters)
        self.sync_log_each_call = sync_log_each_call
        self.broker: Broker | None = None
        self.quorum: QuorumController | None = None
        self.target = ControllerTarget(self.voters, node_id)
        self.links: LinkBook[Any] = LinkBook()
        self.waiters = Waiters()
        self.broker_calls = 0  # calls into the broker so far: a shell re-reads its deadline after one

    # ------------------------------------------------------------ what the machines asked for
    def on_broker_actions(self, acts: Actions, now: int) -> list[Effect]:
        """Route what a call into the broker returned."""
        out: list[Effect] = []
        self._broker(acts, now, out)
        return out

    def on_quorum_actions(self, acts: Actions, now: int) -> list[Effect]:
        """Route what a call into the quorum controller returned."""
        out: list[Effect] = []
        self._quorum(acts, now, out)
        return out

    def tick_broker(self, now: int) -> list[Effect]:
        assert self.broker is not None
        return self.on_broker_actions(self.broker.tick(now), now)

    def tick_quorum(self, now: int) -> list[Effect]:
        assert self.quorum is not None
        return self.on_quorum_actions(self.quorum.tick(now), now)

    # ------------------------------------------------------------ messages in
    def on_client(self, src: str, msg: Any, now: int, waiter: Waiter | None = None) -> list[Effect]:
        """A client's request for the broker; `waiter` gets the answer (by correlation id)."""
        if waiter is not None:
            self.waiters.replies[msg.correlation_id] = waiter
        return self._dispatch(BROKER, src, msg, now)

    def on_admin_client(self, src: str, msg: object, now: int) -> list[Effect]:
        """An admin client's request sent straight to this node's controller."""
        return self._dispatch(CONTROLLER, src, msg, now)

    def on_admin(self, msg: Any, waiter: Waiter) -> list[Effect]:
        """An admin request this broker forwards to the controller; `waiter` gets the
        answer. It is sent again wherever the controller moves until `forget_admin`."""
        self.waiters.admin[msg.correlation_id] = (waiter, msg)
        out: list[Effect] = []
        self._to_controller(msg, out)
        return out

    def forget_admin(self, correlation_id: int) -> None:
        self.waiters.admin.pop(correlation_id, None)

    def on_local(self, target: str, src: int, msg: object, now: int) -> list[Effect]:
        """A `Deliver` the shell drained from its queue."""
        return self._dispatch(target, src, msg, now)

    def on_link_message(self, key: LinkKey, msg: object, now: int) -> list[Effect]:
        """A message that came on link `key`: to the machine the link's role and direction
        serve, if it is one that link may carry."""
        if key.role == ROLE_RAFT:
            ok = self.quorum is not None and isinstance(msg, RAFT_MESSAGES) and key.peer in self.voters
            target = CONTROLLER
        elif key.outbound:
            target, ok = BROKER, isinstance(msg, FROM_CONTROLLER)
        elif key.role in CONTROLLER_ROLES:
            target = CONTROLLER
            ok = isinstance(msg, CONTROLLER_BOUND) and getattr(msg, "broker_id", key.peer) == key.peer
        else:
            target, ok = BROKER, isinstance(msg, FROM_PEERS)
        if not ok:
            return [CloseLink(key, f"unexpected {type(msg).__name__}")]
        return self._dispatch(target, key.peer, msg, now)

    def refuse_link(self, key: LinkKey) -> str | None:
        """Why an inbound link (its hello just came) is refused, or None to take it."""
        if key.peer == self.node_id:
            return "a peer claims this node's id"
        if key.role in (*CONTROLLER_ROLES, ROLE_RAFT) and self.quorum is None:
            return "no controller on this node"
        if key.role == ROLE_BROKER and self.broker is None:
            return "no broker on this node"
        return None

    # ------------------------------------------------------------ links lost
    def on_link_lost(self, key: LinkKey, now: int) -> list[Effect]:
        """The current link `key` broke (the shell forgot it from `links` first)."""
        out: list[Effect] = []
        if self.broker is None or key.role == ROLE_RAFT:
            return out  # the quorum notices a lost voter by its own timeouts
        if key.role == ROLE_BROKER:
            # the peer's parked fetches came on the link it opened: a lost link we opened
            # (to its old incarnation, say, found dead after it restarted) must not drop them
            self._broker(self.broker.connection_lost(key.peer, now, outbound_only=key.outbound), now, out)
        elif not key.outbound:
            pass  # a broker's link to our controller: it reconnects when it sends again
        elif key.role == ROLE_ALTER_PARTITION:
            if key.peer == self.target.target:  # its requests only: the controller link may be fine
                self._broker(self.broker.alter_channel_lost(now), now, out)
        else:
            self._controller_unreachable(key.peer, now, out)
        return out

    def on_send_failed(self, key: LinkKey, now: int) -> list[Effect]:
        """A message could not be put on link `key` (no address for the peer, a full
        queue): for a fetch, as if its link were lost; other requests time out."""
        if key.role != ROLE_BROKER or not key.outbound:
            return []
        return self.on_link_lost(key, now)

    def on_controller_unreachable(self, voter: int, now: int) -> list[Effect]:
        """This node's way to controller `voter` is gone (its link lost, or the in-process
        one cut off): if it was the target, the next voter is tried and what was in flight
        is sent there."""
        out: list[Effect] = []
        self._controller_unreachable(voter, now, out)
        return out

    # ------------------------------------------------------------ internals
    def _dispatch(self, target: str, src: int | str, msg: Any, now: int) -> list[Effect]:
        out: list[Effect] = []
        if isinstance(msg, ADMIN_REPLIES) and target == BROKER:
            w = self.waiters.admin.pop(msg.correlation_id, None)
            if w is not None:
                out.append(Wake(w[0], msg))
        elif target == CONTROLLER:
            if self.quorum is None:
                out.append(Perform(CONTROLLER, NoMachine(CONTROLLER, src, msg)))
            else:
                self._quorum(self.quorum.handle(src, msg, now), now, out)
        elif isinstance(msg, NotController):
            self._not_controller(src, msg.leader_id, msg.epoch, now, out)  # type: ignore[arg-type]
        elif self.broker is None:
            out.append(Perform(BROKER, NoMachine(BROKER, src, msg)))
        else:
            self._broker(self.broker.handle(src, msg, now), now, out)
        return out

    def _broker(self, acts: Actions, now: int, out: list[Effect]) -> None:
        self.broker_calls += 1
        for s in acts.sends:
            to, msg = s.to, s.message
            if isinstance(to, str):
                self._answer(to, msg, out)
            elif isinstance(msg, CONTROLLER_BOUND):
                self._to_controller(msg, out)
            elif isinstance(msg, PEER_REPLIES):
                key = self._open_key(LinkKey(to, ROLE_BROKER, False), LinkKey(to, ROLE_BROKER, True))
                if key is not None:
                    out.append(Transmit(key, msg))
            else:
                out.append(Transmit(LinkKey(to, ROLE_BROKER, True), msg))
        out.extend(Perform(BROKER, o) for o in acts.other)

    def _quorum(self, acts: Actions, now: int, out: list[Effect]) -> None:
        for o in acts.other:  # durable before anything of this call is sent
            if isinstance(o, PersistQuorumState):
                out.append(PersistState(o))
            elif isinstance(o, FlushLog):
                out.append(SyncLog(o.end_offset))
        if self.sync_log_each_call:
            out.append(SyncLog(None))
        for s in acts.sends:
            to, msg = s.to, s.message
            if isinstance(to, str):
                self._answer(to, msg, out)
            elif isinstance(msg, RAFT_MESSAGES):
                if to in self.voters:
                    out.append(Transmit(LinkKey(to, ROLE_RAFT, True), msg))
            elif to == self.node_id:
                if self.broker is not None:
                    out.append(Deliver(BROKER, self.node_id, msg))
            else:
                roles = (
                    reversed(CONTROLLER_ROLES)
                    if isinstance(msg, AlterPartitionResponse)
                    else CONTROLLER_ROLES
                )
                key = self._open_key(*(LinkKey(to, r, False) for r in roles))
                if key is not None:
                    out.append(Transmit(key, msg))
        for o in acts.other:  # then this node's broker follows its own quorum member
            if isinstance(o, PersistQuorumState | FlushLog):
                continue
            out.append(Perform(CONTROLLER, o))
            if self.broker is None:
                continue
            if isinstance(o, ControllerActivated):
                was = self.target.target
                if self.target.activated(self.node_id, o.epoch):
                    out.append(Perform(BROKER, TargetMoved(self.node_id, was, o.epoch)))
                    self._resend_to_controller(now, out)
            elif isinstance(o, RoleChanged) and o.role == Role.FOLLOWER.value:
                self._not_controller(self.node_id, o.leader_id, o.epoch, now, out)

    def _answer(self, client: str, msg: Any, out: list[Effect]) -> None:
        w = self.waiters.replies.pop(msg.correlation_id, None)
        out.append(ToClient(client, msg) if w is None else Wake(w, msg))

    def _open_key(self, *keys: LinkKey) -> LinkKey | None:
        return next((k for k in keys if self.links.get(k) is not None), None)

    def _to_controller(self, msg: object, out: list[Effect]) -> None:
        t = self.target.target
        if t == self.node_id and self.quorum is not None:
            out.append(Deliver(CONTROLLER, self.node_id, msg))
        else:
            role = ROLE_ALTER_PARTITION if isinstance(msg, AlterPartitionRequest) else ROLE_CONTROLLER
            out.append(Transmit(LinkKey(t, role, True), msg))

    def _not_controller(self, src: int, leader_id: int, epoch: int, now: int, out: list[Effect]) -> None:
        """Voter `src` refused a request (or stopped being active), or this node learnt the
        quorum's leader (`src` is this node)."""
        if self.broker is None:
            return
        was = self.target.target
        if not self.target.not_controller(src, leader_id, epoch):
            return
        if self.target.target != was:
            out.append(Perform(BROKER, TargetMoved(self.target.target, was, epoch)))
        self._resend_to_controller(now, out)

    def _controller_unreachable(self, voter: int, now: int, out: list[Effect]) -> None:
        was = self.target.target
        if self.broker is not None and self.target.link_lost(voter):
            out.append(Perform(BROKER, TargetMoved(self.target.target, was, self.target.epoch)))
            self._resend_to_controller(now, out)

    def _resend_to_controller(self, now: int, out: list[Effect]) -> None:
        """What this broker sent the controller will not be answered: send it again."""
        assert self.broker is not None
        self._broker(self.broker.controller_connection_lost(now), now, out)
        for _waiter, msg in list(self.waiters.admin.values()):
            self._to_controller(msg, out)
