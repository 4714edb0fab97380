"""KIP-704 leader recovery: the leader of a RECOVERING partition proposes RECOVERED with the
epochs it holds and asks again until the controller accepts it or another broker leads.

The bug these pin down (issue 13, `leader-churn` / unclean election left a partition
RECOVERING with an ISR of one for good): the proposal carried the partition epoch of the
registration *before* the one that made the broker leader, so the controller answered
INVALID_UPDATE_VERSION; the leader then waited for newer metadata that never came (it
already had it), and nothing proposed RECOVERED again."""

from __future__ import annotations

import itertools
from dataclasses import replace

from core_helpers import TP, image, log_with
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from broker.core import safeguards as sg
from broker.core.controller import Controller, ControllerConfig
from broker.core.metadata import RECOVERED, RECOVERING, PartitionRegistration
from broker.core.replica import LEADER, PartitionReplica, ReplicaEvents, ReplicaSettings

EPOCHS = {1: 10, 2: 20, 3: 30}
TIMEOUT = 5000
# before: 1 follows 2; then 2 is gone and 1 is elected uncleanly (a new leader and partition epoch)
BEFORE = PartitionRegistration(replicas=(1, 2, 3), isr=(2,), leader=2, leader_epoch=1, partition_epoch=4)
ELECTED = replace(BEFORE, isr=(1,), leader=1, leader_epoch=2, partition_epoch=5, leader_recovery_state=RECOVERING)


def follower_of(reg: PartitionRegistration = BEFORE) -> PartitionReplica:
    r = PartitionReplica(TP, log_with([(0, 3)]), ReplicaSettings(1, 30000, 2, sg.ALL_ON), itertools.count(1).__next__)
    r.apply_registration(reg, image(EPOCHS, reg=reg), 0, ReplicaEvents())
    return r


def controller_with(reg: PartitionRegistration) -> Controller:
    """A controller whose image holds brokers 1-3 (unfenced) and `reg`: its AlterPartition
    checks (`validate_alter_partition`) are the real ones."""
    ctl = Controller(ControllerConfig())
    ctl.image = image(EPOCHS, reg=reg)
    return ctl


def test_the_new_leader_proposes_recovered_with_the_epochs_that_made_it_leader():
    r = follower_of()
    ev = ReplicaEvents()
    r.apply_registration(ELECTED, image(EPOCHS, reg=ELECTED), 10, ev)
    req = ev.alter_partition
    assert r.role == LEADER and req is not None and req.leader_recovery_state == RECOVERED
    assert (req.leader_epoch, req.partition_epoch) == (2, 5)
    assert [m.broker_id for m in req.new_isr_with_epochs] == [1]
    assert controller_with(ELECTED).validate_alter_partition(req) is ErrorCode.none


def test_a_refused_proposal_is_made_again_until_accepted():
    r = follower_of()
    img = image(EPOCHS, reg=ELECTED)
    r.apply_registration(ELECTED, img, 10, ev := ReplicaEvents())
    first = ev.alter_partition
    r.handle_alter_response(first.correlation_id, ErrorCode.not_controller, (1,), 5, 2, RECOVERING, 20, ReplicaEvents())
    assert r.pending_alter is None and r.recovery_state == RECOVERING
    r.maybe_propose_recovered(img, 30, ev := ReplicaEvents())  # the Broker's next tick
    again = ev.alter_partition
    assert again is not None and again.correlation_id != first.correlation_id and again.leader_recovery_state == RECOVERED
    r.handle_alter_response(again.correlation_id, ErrorCode.none, (1,), 6, 2, RECOVERED, 40, ReplicaEvents())
    assert r.recovery_state == RECOVERED and r.partition_epoch == 6
    r.maybe_propose_recovered(img, 50, ev := ReplicaEvents())
    assert ev.alter_partition is None


def test_a_proposal_superseded_by_newer_metadata_is_made_again_with_its_epoch():
    """INVALID_UPDATE_VERSION (the controller changed the partition meanwhile) keeps the
    proposal pending until the newer registration arrives; that registration, still
    RECOVERING and still ours, brings a new proposal with its partition epoch."""
    r = follower_of()
    r.apply_registration(ELECTED, image(EPOCHS, reg=ELECTED), 10, ev := ReplicaEvents())
    first = ev.alter_partition
    r.handle_alter_response(first.correlation_id, ErrorCode.invalid_update_version, (1,), 6, 2, RECOVERING, 20, ReplicaEvents())
    assert r.pending_alter is not None and r.pending_alter.outdated
    newer = replace(ELECTED, partition_epoch=6)
    r.apply_registration(newer, image(EPOCHS, reg=newer), 30, ev := ReplicaEvents())
    req = ev.alter_partition
    assert req is not None and (req.leader_epoch, req.partition_epoch, req.leader_recovery_state) == (2, 6, RECOVERED)
    assert controller_with(newer).validate_alter_partition(req) is ErrorCode.none


def test_a_leader_that_is_not_recovering_or_no_longer_leads_proposes_nothing():
    r = follower_of()
    ev = ReplicaEvents()
    r.maybe_propose_recovered(image(EPOCHS, reg=BEFORE), 10, ev)
    assert ev.alter_partition is None  # a follower
    recovered = replace(ELECTED, leader_recovery_state=RECOVERED)
    r.apply_registration(recovered, image(EPOCHS, reg=recovered), 10, ev)
    assert ev.alter_partition is None
    moved = replace(ELECTED, leader=3, isr=(3,), leader_epoch=3, partition_epoch=7)
    r = follower_of()
    r.apply_registration(ELECTED, image(EPOCHS, reg=ELECTED), 10, ReplicaEvents())
    r.apply_registration(moved, image(EPOCHS, reg=moved), 20, ev := ReplicaEvents())
    r.maybe_propose_recovered(image(EPOCHS, reg=moved), 30, ev)
    assert ev.alter_partition is None and r.pending_alter is None


# ---------------------------------------------------------------- property: it always recovers
OPS = ["bump", "metadata", "deliver", "drop-request", "refuse", "answer", "drop-answer", "tick"]


class Link:
    """The leader replica, the real controller checks, and the messages between them."""

    def __init__(self) -> None:
        self.reg = ELECTED  # the controller's registration
        self.ctl = controller_with(self.reg)
        self.r = follower_of()
        self.now = 0
        self.requests: list = []
        self.answers: list = []
        self.seen = BEFORE  # the newest registration the broker applied
        self.metadata()

    def send(self, ev: ReplicaEvents) -> None:
        req = ev.alter_partition
        if req is not None:
            # what the leader proposes carries the epochs it holds at the time
            assert (req.leader_epoch, req.partition_epoch) == (self.r.leader_epoch, self.r.partition_epoch)
            self.requests.append(req)

    def metadata(self) -> None:
        if self.seen != self.reg:
            self.seen = self.reg
            self.r.apply_registration(self.reg, image(EPOCHS, reg=self.reg), self.now, ev := ReplicaEvents())
            self.send(ev)

    def commit(self, reg: PartitionRegistration) -> None:
        self.reg = replace(reg, partition_epoch=self.reg.partition_epoch + 1)
        self.ctl.image = image(EPOCHS, reg=self.reg)

    def step(self, op: str) -> None:
        self.now += 100
        if op == "bump":  # a controller-side change that keeps the leader (ELR bookkeeping, ...)
            self.commit(self.reg)
        elif op == "metadata":
            self.metadata()
        elif op in ("deliver", "drop-request", "refuse") and self.requests:
            req = self.requests.pop(0)
            if op == "drop-request":
                return
            err = ErrorCode.not_controller if op == "refuse" else self.ctl.validate_alter_partition(req)
            if err is ErrorCode.none:
                self.commit(replace(self.reg, isr=tuple(m.broker_id for m in req.new_isr_with_epochs),
                                    leader_recovery_state=req.leader_recovery_state))
            g = self.reg
            self.answers.append((req.correlation_id, err, g.isr, g.partition_epoch, g.leader_epoch, g.leader_recovery_state))
        elif op in ("answer", "drop-answer") and self.answers:
            a = self.answers.pop(0)
            if op == "answer":
                self.r.handle_alter_response(*a, self.now, ev := ReplicaEvents())
                self.send(ev)
        elif op == "tick":  # what Broker.tick does for a leader
            self.now += TIMEOUT
            ev = ReplicaEvents()
            ev.alter_partition = self.r.alter_timed_out(self.now, TIMEOUT)
            self.r.maybe_propose_recovered(image(EPOCHS, reg=self.seen), self.now, ev)
            self.send(ev)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(OPS), max_size=40))
def test_after_any_refusals_losses_and_controller_changes_the_partition_recovers(ops):
    link = Link()
    for op in ops:
        link.step(op)
    for _ in range(10):  # then a healthy network: every message arrives, ticks go on
        link.step("metadata")
        while link.requests or link.answers:
            link.step("deliver")
            link.step("answer")
        link.step("tick")
    assert link.reg.leader_recovery_state == RECOVERED, (link.reg, ops)
    link.step("metadata")
    assert link.r.recovery_state == RECOVERED and link.r.role == LEADER
