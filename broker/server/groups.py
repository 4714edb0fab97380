"""Consumer groups: Kafka's classic group membership protocol (JoinGroup, SyncGroup,
Heartbeat, LeaveGroup) on the group's coordinator broker. Sans-IO: calls take `now`
(ms) and a `reply` callable for answers that wait (a join waits for the rebalance, a
follower's sync for the leader's); `tick(now)` completes rebalances whose time is up and
expires members whose session timed out; `next_deadline()` says when to call it.

States (Kafka's GroupCoordinator): Empty -> PreparingRebalance (members (re)join; it
ends when every known member has joined or the rebalance timeout passes; a new group
first waits group.initial.rebalance.delay.ms) -> CompletingRebalance (generation bumped,
protocol chosen, leader told the members; waiting for the leader's SyncGroup) -> Stable.
Membership is in memory: after a coordinator restart members get UNKNOWN_MEMBER_ID and
rejoin (committed offsets are persistent, see offsets.py). Static membership
(group.instance.id) is accepted but treated as dynamic. DeleteGroups and OffsetDelete
ask here whether a group (and which of its offsets) may go.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

EMPTY = "Empty"
PREPARING = "PreparingRebalance"
COMPLETING = "CompletingRebalance"
STABLE = "Stable"


@dataclass(frozen=True, slots=True)
class JoinResult:
    error: ErrorCode
    member_id: str = ""
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    members: tuple[tuple[str, str | None, bytes], ...] = ()  # (member id, instance id, metadata): the leader only


@dataclass(frozen=True, slots=True)
class SyncResult:
    error: ErrorCode
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    last_heartbeat: int = 0
    join_reply: Callable[[JoinResult], None] | None = None
    sync_reply: Callable[[SyncResult], None] | None = None


@dataclass
class Group:
    group_id: str
    state: str = EMPTY
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    pending_ids: dict[str, int] = field(default_factory=dict)  # MEMBER_ID_REQUIRED ids -> expiry
    rebalance_deadline: int | None = None
    initial_until: int | None = None  # a new group's initial rebalance delay


class GroupCoordinator:
    def __init__(self, initial_rebalance_delay_ms: int = 3000, min_session_ms: int = 6000, max_session_ms: int = 1800000):
        self.initial_delay = initial_rebalance_delay_ms
        self.min_session = min_session_ms
        self.max_session = max_session_ms
        self.groups: dict[str, Group] = {}

    # ------------------------------------------------------------ JoinGroup
    def join(
        self, now: int, group_id: str, member_id: str, group_instance_id: str | None, client_id: str, client_host: str,
        session_timeout_ms: int, rebalance_timeout_ms: int, protocol_type: str, protocols: list[tuple[str, bytes]],
        require_known_member_id: bool, reply: Callable[[JoinResult], None],
    ) -> None:
        if not group_id:
            reply(JoinResult(ErrorCode.invalid_group_id, member_id))
            return
        if not self.min_session <= session_timeout_ms <= self.max_session:
            reply(JoinResult(ErrorCode.invalid_session_timeout, member_id))
            return
        if rebalance_timeout_ms < 0:
            rebalance_timeout_ms = session_timeout_ms  # JoinGroup v0 has no rebalance timeout
        g = self.groups.setdefault(group_id, Group(group_id))
        names = {p for p, _ in protocols}
        if not protocols or (g.members and (protocol_type != g.protocol_type or not names & self._common(g))):
            reply(JoinResult(ErrorCode.inconsistent_group_protocol, member_id))
            return
        if not member_id:
            member_id = f"{client_id or 'member'}-{uuid.uuid4()}"
            if require_known_member_id:  # KIP-394: the client rejoins with this id
                g.pending_ids[member_id] = now + session_timeout_ms
                reply(JoinResult(ErrorCode.member_id_required, member_id))
                return
        elif member_id not in g.members and member_id not in g.pending_ids:
            reply(JoinResult(ErrorCode.unknown_member_id, member_id))
            return
        g.pending_ids.pop(member_id, None)
        m = g.members.get(member_id)
        if m is None:
            m = g.members[member_id] = Member(member_id, group_instance_id, client_id, client_host, session_timeout_ms,
                                              rebalance_timeout_ms, list(protocols))
        else:
            m.protocols, m.session_timeout_ms, m.rebalance_timeout_ms = list(protocols), session_timeout_ms, rebalance_timeout_ms
            if m.join_reply is not None:  # a duplicate join: the older request is superseded
                m.join_reply(JoinResult(ErrorCode.rebalance_in_progress, member_id))
        g.protocol_type = protocol_type
        m.join_reply = reply
        m.last_heartbeat = now
        if g.state != PREPARING:
            self._prepare_rebalance(g, now)
        self._maybe_complete_join(g, now)

    def _common(self, g: Group) -> set[str]:
        sets = [{p for p, _ in m.protocols} for m in g.members.values()]
        return set.intersection(*sets) if sets else set()

    def _prepare_rebalance(self, g: Group, now: int) -> None:
        if g.state == COMPLETING:
            for m in g.members.values():
                if m.sync_reply is not None:
                    m.sync_reply(SyncResult(ErrorCode.rebalance_in_progress))
                    m.sync_reply = None
        if g.state == EMPTY and g.generation_id == 0 and self.initial_delay > 0:
            g.initial_until = now + self.initial_delay
        timeout = max((m.rebalance_timeout_ms for m in g.members.values()), default=0)
        g.rebalance_deadline = now + timeout
        g.state = PREPARING

    def _maybe_complete_join(self, g: Group, now: int) -> None:
        if g.state != PREPARING:
            return
        if g.initial_until is not None and now < g.initial_until:
            return
        if any(m.join_reply is None for m in g.members.values()) and (g.rebalance_deadline is None or now < g.rebalance_deadline):
            return
        self._complete_join(g, now)

    def _complete_join(self, g: Group, now: int) -> None:
        for mid in [mid for mid, m in g.members.items() if m.join_reply is None]:
            del g.members[mid]  # did not rejoin in time
        g.initial_until = None
        g.rebalance_deadline = None
        g.generation_id += 1
        if not g.members:
            g.state, g.leader, g.protocol_name = EMPTY, None, None
            return
        if g.leader not in g.members:
            g.leader = next(iter(g.members))
        common = self._common(g)
        leader = g.members[g.leader]
        g.protocol_name = next((p for p, _ in leader.protocols if p in common), None)
        g.state = COMPLETING
        listing = tuple((m.member_id, m.group_instance_id, dict(m.protocols).get(g.protocol_name or "", b""))
                        for m in g.members.values())
        for m in g.members.values():
            reply, m.join_reply = m.join_reply, None
            m.last_heartbeat = now
            assert reply is not None
            reply(JoinResult(ErrorCode.none, m.member_id, g.generation_id, g.protocol_type, g.protocol_name, g.leader,
                             listing if m.member_id == g.leader else ()))

    # ------------------------------------------------------------ SyncGroup
    def sync(self, now: int, group_id: str, generation_id: int, member_id: str, assignments: dict[str, bytes],
             reply: Callable[[SyncResult], None]) -> None:
        g = self.groups.get(group_id)
        m = g.members.get(member_id) if g is not None else None
        if g is None or m is None:
            reply(SyncResult(ErrorCode.unknown_member_id))
            return
        if generation_id != g.generation_id:
            reply(SyncResult(ErrorCode.illegal_generation))
            return
        if g.state == PREPARING:
            reply(SyncResult(ErrorCode.rebalance_in_progress))
            return
        m.last_heartbeat = now
        if g.state == STABLE:
            reply(SyncResult(ErrorCode.none, g.protocol_type, g.protocol_name, m.assignment))
            return
        m.sync_reply = reply
        if member_id == g.leader:
            for mm in g.members.values():
                mm.assignment = assignments.get(mm.member_id, b"")
            g.state = STABLE
            for mm in g.members.values():
                if mm.sync_reply is not None:
                    r, mm.sync_reply = mm.sync_reply, None
                    r(SyncResult(ErrorCode.none, g.protocol_type, g.protocol_name, mm.assignment))

    # ------------------------------------------------------------ Heartbeat, LeaveGroup, commits
    def _member_error(self, g: Group | None, member_id: str, generation_id: int) -> ErrorCode:
        if g is None or member_id not in g.members:
            return ErrorCode.unknown_member_id
        if generation_id != g.generation_id:
            return ErrorCode.illegal_generation
        return ErrorCode.none

    def heartbeat(self, now: int, group_id: str, generation_id: int, member_id: str) -> ErrorCode:
        g = self.groups.get(group_id)
        err = self._member_error(g, member_id, generation_id)
        if err is not ErrorCode.none:
            return err
        assert g is not None
        g.members[member_id].last_heartbeat = now
        return ErrorCode.rebalance_in_progress if g.state == PREPARING else ErrorCode.none

    def leave(self, now: int, group_id: str, member_ids: list[str]) -> list[ErrorCode]:
        g = self.groups.get(group_id)
        out = []
        for mid in member_ids:
            if g is None or mid not in g.members:
                out.append(ErrorCode.unknown_member_id)
                continue
            out.append(ErrorCode.none)
            self._remove(g, mid, now)
        return out

    def _remove(self, g: Group, member_id: str, now: int) -> None:
        m = g.members.pop(member_id)
        if m.join_reply is not None:
            m.join_reply(JoinResult(ErrorCode.unknown_member_id, member_id))
        if m.sync_reply is not None:
            m.sync_reply(SyncResult(ErrorCode.unknown_member_id))
        if g.state in (STABLE, COMPLETING):
            self._prepare_rebalance(g, now)
        self._maybe_complete_join(g, now)

    def commit_error(self, now: int, group_id: str, generation_id: int, member_id: str) -> ErrorCode:
        """Whether an OffsetCommit with this generation and member may commit: simple
        commits (generation -1, e.g. an admin's AlterConsumerGroupOffsets) need a group
        without members; on a group with members they are checked as a member's, so an
        admin's (no member id) gets UNKNOWN_MEMBER_ID, as from Kafka."""
        g = self.groups.get(group_id)
        if generation_id < 0 and (g is None or not g.members):
            return ErrorCode.none
        err = self._member_error(g, member_id, generation_id)
        if err is not ErrorCode.none:
            return err
        assert g is not None
        g.members[member_id].last_heartbeat = now
        return ErrorCode.rebalance_in_progress if g.state == PREPARING else ErrorCode.none

    # ------------------------------------------------------------ DeleteGroups, OffsetDelete
    def delete_error(self, group_id: str, has_offsets: bool) -> ErrorCode:
        """DeleteGroups: NONE when the group may go (known here, by its state or by
        committed offsets, and without members), NON_EMPTY_GROUP while it has members,
        GROUP_ID_NOT_FOUND when unknown."""
        g = self.groups.get(group_id)
        if g is None:
            return ErrorCode.none if has_offsets else ErrorCode.group_id_not_found
        return ErrorCode.none if g.state == EMPTY else ErrorCode.non_empty_group

    def delete(self, group_id: str) -> None:
        """Forget the group's state (after `delete_error` said NONE)."""
        self.groups.pop(group_id, None)

    def offset_delete_scope(self, group_id: str, has_offsets: bool) -> tuple[ErrorCode, frozenset[str] | None]:
        """OffsetDelete (Kafka's GroupCoordinator.handleDeleteOffsets): the group error and
        the topics whose offsets must stay. A group without members keeps none (empty
        set); a consumer group with members keeps those of the topics its members
        subscribe to (None: not known yet, i.e. every topic: GROUP_SUBSCRIBED_TO_TOPIC);
        another protocol's group with members answers NON_EMPTY_GROUP."""
        if not group_id:
            return ErrorCode.invalid_group_id, None
        g = self.groups.get(group_id)
        if g is None:
            return (ErrorCode.none, frozenset()) if has_offsets else (ErrorCode.group_id_not_found, None)
        if g.state == EMPTY:
            return ErrorCode.none, frozenset()
        if g.protocol_type != "consumer":
            return ErrorCode.non_empty_group, None
        return ErrorCode.none, self._subscribed_topics(g)

    def _subscribed_topics(self, g: Group) -> frozenset[str] | None:
        """The union of the members' subscriptions under the group's protocol, or None
        when there is no protocol yet or a subscription does not parse."""
        if g.protocol_name is None:
            return None
        topics: set[str] = set()
        for m in g.members.values():
            subscription = subscription_topics(dict(m.protocols).get(g.protocol_name, b""))
            if subscription is None:
                return None
            topics |= subscription
        return frozenset(topics)

    # ------------------------------------------------------------ timers
    def tick(self, now: int) -> None:
        for g in list(self.groups.values()):
            for mid, expiry in list(g.pending_ids.items()):
                if now >= expiry:
                    del g.pending_ids[mid]
            for mid, m in list(g.members.items()):
                if m.join_reply is None and now > m.last_heartbeat + m.session_timeout_ms:
                    self._remove(g, mid, now)
            self._maybe_complete_join(g, now)

    def next_deadline(self) -> int | None:
        ds: list[int] = []
        for g in self.groups.values():
            ds.extend(g.pending_ids.values())
            for m in g.members.values():
                if m.join_reply is None:
                    ds.append(m.last_heartbeat + m.session_timeout_ms + 1)
            if g.state == PREPARING:
                if g.initial_until is not None:
                    ds.append(g.initial_until)
                if g.rebalance_deadline is not None:
                    ds.append(g.rebalance_deadline)
        return min(ds) if ds else None

    # ------------------------------------------------------------ admin views
    def describe(self, group_id: str) -> Group | None:
        return self.groups.get(group_id)


def subscription_topics(metadata: bytes) -> set[str] | None:
    """The topics of a ConsumerProtocolSubscription (any version: int16 version, then an
    int32 count of int16-length strings), or None if it does not parse."""
    try:
        pos = 2
        n = int.from_bytes(metadata[pos:pos + 4], "big", signed=True)
        pos += 4
        if len(metadata) < pos or n < 0:
            return None
        out = set()
        for _ in range(n):
            size = int.from_bytes(metadata[pos:pos + 2], "big", signed=True)
            pos += 2
            if size < 0 or pos + size > len(metadata):
                return None
            out.add(metadata[pos:pos + size].decode("utf-8"))
            pos += size
        return out
    except UnicodeDecodeError:
        return None
