"""Consumer groups: the coordinator's state machine (sans-IO, virtual clock) and
subscribe-mode consumers of both client libraries against a real broker."""

from __future__ import annotations

import threading
import time

from kio.schema.errors import ErrorCode as E

from broker.server.groups import COMPLETING, EMPTY, PREPARING, STABLE, GroupCoordinator


class Replies:
    def __init__(self) -> None:
        self.got: list = []

    def __call__(self, r) -> None:
        self.got.append(r)

    @property
    def last(self):
        return self.got[-1]


def join(gc: GroupCoordinator, now: int, member: str = "", protocols=(("range", b"m"),), known: bool = True, session=10000):
    r = Replies()
    gc.join(now, "g", member, None, "client", "h", session, 30000, "consumer", list(protocols), known, r)
    return r


def test_two_members_join_sync_and_heartbeat():
    gc = GroupCoordinator(initial_rebalance_delay_ms=0)
    a = join(gc, 0)
    assert a.last.error is E.member_id_required and a.last.member_id
    a_id = a.last.member_id
    a2 = join(gc, 1, a_id)
    assert a2.last.error is E.none and a2.last.generation_id == 1 and a2.last.leader == a_id
    assert [m[0] for m in a2.last.members] == [a_id]
    s = Replies()
    gc.sync(2, "g", 1, a_id, {a_id: b"all"}, s)
    assert s.last.assignment == b"all" and gc.groups["g"].state == STABLE
    # a second member joins: the first learns of the rebalance through its heartbeat
    b = join(gc, 3, known=False)
    b_id = b.got[0].member_id if b.got else None
    assert b.got == [] and gc.groups["g"].state == PREPARING
    assert gc.heartbeat(4, "g", 1, a_id) is E.rebalance_in_progress
    a3 = join(gc, 5, a_id)
    assert a3.last.generation_id == 2 and b.last.generation_id == 2 and b.last.members == ()
    b_id = b.last.member_id
    assert len(a3.last.members) == 2 and gc.groups["g"].state == COMPLETING
    fs = Replies()
    gc.sync(6, "g", 2, b_id, {}, fs)
    assert fs.got == []  # waits for the leader
    ls = Replies()
    gc.sync(7, "g", 2, a_id, {a_id: b"p0", b_id: b"p1"}, ls)
    assert ls.last.assignment == b"p0" and fs.last.assignment == b"p1"
    assert gc.heartbeat(8, "g", 2, b_id) is E.none
    assert gc.heartbeat(8, "g", 1, b_id) is E.illegal_generation
    assert gc.heartbeat(8, "g", 2, "nobody") is E.unknown_member_id


def test_session_expiry_and_leave_trigger_rebalances():
    gc = GroupCoordinator(initial_rebalance_delay_ms=0)
    a_id = join(gc, 0).last.member_id
    assert join(gc, 0, a_id).last.generation_id == 1  # alone: the rebalance completes at once
    b = join(gc, 0, known=False)  # a newcomer opens a rebalance that waits for a
    assert b.got == []
    join(gc, 1, a_id)
    b_id = b.last.member_id
    g = gc.groups["g"]
    gen = g.generation_id
    gc.sync(2, "g", gen, g.leader, {}, Replies())
    # b stops heartbeating: after its session timeout it is removed and a rebalance starts
    gc.heartbeat(5000, "g", gen, a_id)
    gc.tick(10003)
    assert b_id not in g.members and g.state == PREPARING
    a2 = join(gc, 10004, a_id)
    assert a2.last.generation_id == gen + 1 and [m[0] for m in a2.last.members] == [a_id]
    gc.sync(10005, "g", gen + 1, a_id, {}, Replies())
    assert gc.leave(10006, "g", [a_id, "ghost"]) == [E.none, E.unknown_member_id]
    assert g.state == EMPTY and not g.members


def test_a_member_that_does_not_rejoin_is_dropped_at_the_rebalance_timeout():
    gc = GroupCoordinator(initial_rebalance_delay_ms=0)
    a_id = join(gc, 0).last.member_id
    join(gc, 0, a_id)
    g = gc.groups["g"]
    gc.sync(0, "g", 1, a_id, {}, Replies())
    b = join(gc, 100, known=False)
    assert gc.next_deadline() <= 100 + 30000
    gc.tick(100 + 30000)
    assert g.members.keys() == {b.last.member_id} and b.last.generation_id == 2


def test_commits_check_membership_and_simple_commits_need_an_empty_group():
    gc = GroupCoordinator(initial_rebalance_delay_ms=0)
    assert gc.commit_error(0, "g", -1, "") is E.none
    a_id = join(gc, 0).last.member_id
    join(gc, 0, a_id)
    assert gc.commit_error(1, "g", -1, "") is E.unknown_member_id  # an admin's commit, as Kafka answers it
    assert gc.commit_error(1, "g", 1, a_id) is E.none
    assert gc.commit_error(1, "g", 0, a_id) is E.illegal_generation
    assert gc.commit_error(1, "g", 1, "x") is E.unknown_member_id


def subscription(*topics: str, version: int = 1) -> bytes:
    """A ConsumerProtocolSubscription: version, topics, then (v1+) user data and more."""
    out = version.to_bytes(2, "big") + len(topics).to_bytes(4, "big")
    for t in topics:
        out += len(t).to_bytes(2, "big") + t.encode()
    return out + b"\xff\xff\xff\xff"  # null user data


def test_delete_groups_and_offset_delete_follow_the_group_state():
    gc = GroupCoordinator(initial_rebalance_delay_ms=0)
    assert gc.delete_error("g", has_offsets=False) is E.group_id_not_found
    assert gc.delete_error("g", has_offsets=True) is E.none  # known by its offsets (after a restart)
    assert gc.offset_delete_scope("g", has_offsets=False) == (E.group_id_not_found, None)
    assert gc.offset_delete_scope("g", has_offsets=True) == (E.none, frozenset())
    assert gc.offset_delete_scope("", has_offsets=True) == (E.invalid_group_id, None)
    a_id = join(gc, 0, protocols=(("range", subscription("t1", "t2")),)).last.member_id
    join(gc, 0, a_id, protocols=(("range", subscription("t1", "t2")),))
    assert gc.delete_error("g", has_offsets=False) is E.non_empty_group
    assert gc.offset_delete_scope("g", has_offsets=True) == (E.none, frozenset({"t1", "t2"}))
    gc.groups["g"].protocol_type = "connect"  # another protocol's members: the group is not empty
    assert gc.offset_delete_scope("g", has_offsets=True) == (E.non_empty_group, None)
    gc.groups["g"].protocol_type = "consumer"
    gc.groups["g"].members[a_id].protocols = [("range", b"\x00")]  # does not parse: every topic is kept
    assert gc.offset_delete_scope("g", has_offsets=True) == (E.none, None)
    gc.leave(1, "g", [a_id])
    assert gc.groups["g"].state == EMPTY and gc.delete_error("g", has_offsets=False) is E.none
    gc.delete("g")
    assert gc.describe("g") is None


def test_subscription_topics_of_every_version():
    from broker.server.groups import subscription_topics

    for v in (0, 1, 2, 3):
        assert subscription_topics(subscription("a", "bb", version=v)) == {"a", "bb"}
    assert subscription_topics(b"") is None and subscription_topics(subscription("a")[:-6]) is None


def test_bad_joins():
    gc = GroupCoordinator(initial_rebalance_delay_ms=0)
    r = Replies()
    gc.join(0, "g", "", None, "c", "h", 10, 100, "consumer", [("range", b"")], True, r)
    assert r.last.error is E.invalid_session_timeout
    assert join(gc, 0, "never-seen").last.error is E.unknown_member_id
    a_id = join(gc, 0).last.member_id
    join(gc, 0, a_id)
    other = join(gc, 1, protocols=(("sticky-only", b""),), known=False)
    assert other.last.error is E.inconsistent_group_protocol


def test_a_new_group_waits_the_initial_rebalance_delay():
    gc = GroupCoordinator(initial_rebalance_delay_ms=3000)
    a_id = join(gc, 0).last.member_id
    a = join(gc, 0, a_id)
    assert a.got == [] and gc.next_deadline() == 3000
    gc.tick(3000)
    assert a.last.error is E.none and a.last.generation_id == 1


# ---------------------------------------------------------------- real clients
def test_subscribe_mode_consumers_of_both_libraries_share_and_rebalance(fleet):
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic
    from kafka import KafkaConsumer

    b = fleet.single(extra={"group.initial.rebalance.delay.ms": "0"}).start()
    bs = b.bootstrap
    admin = AdminClient({"bootstrap.servers": bs})
    for f in admin.create_topics([NewTopic("sub", 4, 1)]).values():
        f.result(15)
    p = Producer({"bootstrap.servers": bs})
    for i in range(400):
        p.produce("sub", str(i).encode(), partition=i % 4)
    assert p.flush(15) == 0

    assignments: dict[str, list[int]] = {}
    seen: dict[str, set[bytes]] = {}
    stop = threading.Event()

    def run(name: str, leave_after: float | None) -> None:
        c = Consumer({"bootstrap.servers": bs, "group.id": "shared", "auto.offset.reset": "earliest",
                      "session.timeout.ms": 6000, "enable.auto.commit": True, "auto.commit.interval.ms": 200})
        c.subscribe(["sub"])
        t0 = time.monotonic()
        while not stop.is_set() and (leave_after is None or time.monotonic() - t0 < leave_after):
            for m in c.consume(100, 0.2):
                if m.error() is None:
                    seen.setdefault(name, set()).add(m.value())
            assignments[name] = sorted(tp.partition for tp in c.assignment())
        c.close()

    t1 = threading.Thread(target=run, args=("a", None))
    t2 = threading.Thread(target=run, args=("b", 8.0))
    t1.start()
    t2.start()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not (len(assignments.get("a", [])) == 2 and len(assignments.get("b", [])) == 2):
        time.sleep(0.2)
    assert sorted(assignments["a"] + assignments["b"]) == [0, 1, 2, 3]
    t2.join(30)  # b leaves: a takes every partition
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and assignments.get("a") != [0, 1, 2, 3]:
        time.sleep(0.2)
    assert assignments["a"] == [0, 1, 2, 3]
    stop.set()
    t1.join(30)
    assert set().union(*seen.values()) == {str(i).encode() for i in range(400)}

    kc = KafkaConsumer("sub", bootstrap_servers=bs, group_id="kp-sub", auto_offset_reset="earliest",
                       consumer_timeout_ms=8000, enable_auto_commit=False)
    values = {m.value for m in kc}
    kc.commit()
    kc.close()
    assert values == {str(i).encode() for i in range(400)}
