"""QuorumController: the controller runs on the Raft leader, answers after commit, and
moves with leadership (broker/core/quorum_controller.py)."""

from __future__ import annotations

import random

from kio.schema.errors import ErrorCode

from broker.core.controller import ControllerConfig
from broker.core.messages import (
    Actions,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
    MetadataFetchRequest,
    MetadataFetchResponse,
    NotController,
)
from broker.core.metadata import LeaderChangeRecord, RegisterBrokerRecord
from broker.core.quorum_controller import RAFT_MESSAGES, ControllerActivated, QuorumController
from broker.core.raft import RaftNode, Role

VOTERS = (1, 2, 3)
BROKER = 10  # a broker-only node talking to the controllers


class Net:
    """Delivers messages at once between the controllers; the broker's inbox collects
    what is sent to it. `down` nodes neither send nor receive."""

    def __init__(self, seed: int = 0) -> None:
        self.now = 0
        self.nodes = {
            v: QuorumController(ControllerConfig(node_id=v), RaftNode(v, VOTERS, rng=random.Random(seed * 10 + v)))
            for v in VOTERS
        }
        self.down: set[int] = set()
        self.inbox: list[tuple[int, object]] = []
        self.other: list[tuple[int, object]] = []

    def deliver(self, src: int, acts) -> None:
        queue = [(src, s.to, s.message) for s in acts.sends]
        self.other += [(src, o) for o in acts.other]
        while queue:
            frm, to, msg = queue.pop(0)
            if frm in self.down or to in self.down:
                continue
            if to == BROKER:
                self.inbox.append((frm, msg))
                continue
            out = self.nodes[to].handle(frm, msg, self.now)
            self.other += [(to, o) for o in out.other]
            queue += [(to, s.to, s.message) for s in out.sends]

    def send(self, to: int, msg: object) -> None:
        acts = Actions()
        acts.send(to, msg)
        self.deliver(BROKER, acts)

    def run(self, ms: int) -> None:
        end = self.now + ms
        while self.now < end:
            self.now += 5
            for v, n in self.nodes.items():
                if v in self.down:
                    continue
                d = n.next_deadline()
                if d is not None and d <= self.now:
                    self.deliver(v, n.tick(self.now))

    def active(self) -> list[int]:
        return [v for v, n in self.nodes.items() if n.controller is not None and v not in self.down]


def test_one_active_controller_on_the_leader_and_its_first_record_is_the_leader_change():
    net = Net()
    net.run(4000)
    assert len(net.active()) == 1
    leader = net.active()[0]
    assert net.nodes[leader].raft.role is Role.LEADER
    assert isinstance(net.nodes[leader].raft.read_from(0, 1)[0], LeaderChangeRecord)
    assert any(isinstance(o, ControllerActivated) for v, o in net.other if v == leader)


def test_a_follower_answers_not_controller_with_the_leader():
    net = Net()
    net.run(4000)
    leader = net.active()[0]
    follower = next(v for v in VOTERS if v != leader)
    net.send(follower, BrokerRegistrationRequest(1, BROKER, "inc-a"))
    assert net.inbox == [(follower, NotController(leader, net.nodes[leader].epoch))]


def test_registration_is_answered_only_once_committed_and_survives_failover():
    net = Net()
    net.run(4000)
    leader = net.active()[0]
    others = [v for v in VOTERS if v != leader]
    net.down.add(others[0])
    net.down.add(others[1])  # no majority: the record cannot commit
    net.send(leader, BrokerRegistrationRequest(1, BROKER, "inc-a"))
    assert not [m for _, m in net.inbox if isinstance(m, BrokerRegistrationResponse)]
    net.down.clear()
    net.run(1000)
    resp = [m for _, m in net.inbox if isinstance(m, BrokerRegistrationResponse)]
    assert len(resp) == 1 and resp[0].error is ErrorCode.none
    epoch = resp[0].broker_epoch
    assert net.nodes[leader].raft.committed_offset > epoch
    # The leader dies: another becomes active, with the registration in its image.
    net.down.add(leader)
    net.inbox.clear()
    net.run(6000)
    (new,) = net.active()
    assert new != leader
    image = net.nodes[new].controller.image
    assert image.brokers[BROKER].broker_epoch == epoch
    net.send(new, MetadataFetchRequest(2, BROKER, 0, 0))
    (fetched,) = [m for _, m in net.inbox if isinstance(m, MetadataFetchResponse)]
    assert any(isinstance(r, RegisterBrokerRecord) and r.broker_id == BROKER for r in fetched.records)
    assert sum(isinstance(r, LeaderChangeRecord) for r in fetched.records) >= 2


def test_a_deposed_controller_tells_its_brokers_where_to_go():
    net = Net()
    net.run(4000)
    leader = net.active()[0]
    net.send(leader, BrokerRegistrationRequest(1, BROKER, "inc-a"))
    net.run(500)
    net.inbox.clear()
    # Cut the leader off from both voters: check quorum makes it resign.
    others = [v for v in VOTERS if v != leader]
    cut = net.down
    net.down = set()
    original = net.deliver

    def partitioned(src, acts):
        acts.sends[:] = [s for s in acts.sends if not ({src, s.to} & {leader} and {src, s.to} & set(others))]
        original(src, acts)

    net.deliver = partitioned  # type: ignore[method-assign]
    net.run(8000)
    assert leader not in net.active()
    assert [m for src, m in net.inbox if src == leader and isinstance(m, NotController)]
    net.down = cut


def test_raft_messages_are_the_quorum_s_own():
    assert not set(RAFT_MESSAGES) & {BrokerRegistrationRequest, MetadataFetchRequest}
