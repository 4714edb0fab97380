"""One partition's leader and follower logic: fetch fencing, HWM, ISR changes, acks."""

from __future__ import annotations

import itertools

from core_helpers import TP, image, log_with
from kio.schema.errors import ErrorCode

from broker.core import safeguards as sg
from broker.core.messages import EpochEndOffset, FetchPartition, FetchPartitionResponse
from broker.core.metadata import PartitionRegistration
from broker.core.replica import FOLLOWER, LEADER, PartitionReplica, ReplicaEvents, ReplicaSettings
from broker.sim.batches import encode_batch

EPOCHS = {1: 10, 2: 20, 3: 30}


def leader(isr=(1, 2, 3), min_isr=2, guards=sg.ALL_ON, log=None, leader_epoch=0):
    reg = PartitionRegistration(replicas=(1, 2, 3), isr=isr, leader=1, leader_epoch=leader_epoch)
    r = PartitionReplica(TP, log or log_with([]), ReplicaSettings(1, 30000, min_isr, guards), itertools.count(1).__next__)
    img = image(EPOCHS, reg=reg)
    r.apply_registration(reg, img, 0, ReplicaEvents())
    return r, img


def fetch(r, img, replica, offset, last_epoch=0, leader_epoch=0, broker_epoch=None, now=10):
    ev = ReplicaEvents()
    p = FetchPartition(TP, leader_epoch, offset, last_epoch)
    resp = r.handle_follower_fetch(replica, EPOCHS[replica] if broker_epoch is None else broker_epoch, p, img, now, ev)
    return resp, ev


def produce(r, acks=-1, value=b"v", now=5):
    ev = ReplicaEvents()
    resp = r.append_produce("c", 1, acks, encode_batch([value]), 30000, now, ev)
    return resp, ev


def test_fetch_epoch_fencing():
    r, img = leader(leader_epoch=3)
    assert fetch(r, img, 2, 0, leader_epoch=2)[0].error is ErrorCode.fenced_leader_epoch
    assert fetch(r, img, 2, 0, leader_epoch=4)[0].error is ErrorCode.unknown_leader_epoch
    assert fetch(r, img, 2, 0, leader_epoch=3)[0].error is ErrorCode.none


def test_stale_broker_epoch_fetch_is_rejected():
    r, img = leader()
    assert fetch(r, img, 2, 0, broker_epoch=19)[0].error is ErrorCode.not_leader_or_follower


def test_hwm_is_the_minimum_leo_of_the_isr_and_acks_all_waits_for_it():
    r, img = leader()
    resp, ev = produce(r)
    assert resp is None and r.high_watermark == 0
    fetch(r, img, 2, 1)
    assert r.high_watermark == 0  # 3 has not fetched offset 1 yet
    _, ev = fetch(r, img, 3, 1)
    assert r.high_watermark == 1 and ev.hwm_changed
    assert [x.error for _, x in ev.produce_responses] == [ErrorCode.none]


def test_not_enough_replicas_rejects_before_append():
    r, img = leader(isr=(1,))
    resp, ev = produce(r)
    assert resp.error is ErrorCode.not_enough_replicas and r.log.log_end_offset == 0
    resp, _ = produce(r, acks=1)
    assert resp.error is ErrorCode.none and r.log.log_end_offset == 1


def test_hwm_frozen_below_min_isr_unless_elr_is_off():
    r, _ = leader(isr=(1,))
    produce(r, acks=1)
    assert r.high_watermark == 0
    r, _ = leader(isr=(1,), guards=sg.SafeguardSet(frozenset({sg.ELR})))
    produce(r, acks=1)
    assert r.high_watermark == 1


def test_not_enough_replicas_after_append_when_the_isr_shrinks():
    r, img = leader(isr=(1, 2))
    produce(r)
    ev = ReplicaEvents()
    r.apply_registration(PartitionRegistration((1, 2, 3), (1,), 1, 0, 1), img, 20, ev)
    assert [x.error for _, x in ev.produce_responses] == [ErrorCode.not_enough_replicas_after_append]
    assert r.log.log_end_offset == 1  # appended: the record may still be committed later


def test_divergent_fetch_gets_diverging_epoch_and_no_state_update():
    r, img = leader(log=log_with([(0, 3)]), leader_epoch=2)
    resp, _ = fetch(r, img, 2, 5, last_epoch=1, leader_epoch=2)
    assert resp.diverging_epoch is not None and resp.records == b""
    assert r.followers[2].log_end_offset == -1  # KAFKA-13141


def test_isr_expansion_needs_hwm_leso_this_epoch_and_matching_broker_epoch():
    log = log_with([(0, 4)])
    r, img = leader(isr=(1, 2), log=log, leader_epoch=1)
    assert r.leso == 4
    r.high_watermark = 2  # a stale local HWM below the LESO
    _, ev = fetch(r, img, 3, 2, leader_epoch=1)
    assert ev.alter_partition is None  # LEO 2 >= HWM but < LESO 4
    _, ev = fetch(r, img, 3, 4, leader_epoch=1)
    assert ev.alter_partition is not None and [m.broker_id for m in ev.alter_partition.new_isr_with_epochs] == [1, 2, 3]
    assert [m.broker_epoch for m in ev.alter_partition.new_isr_with_epochs] == [10, -1, 30]
    assert r.maximal_isr == (1, 2, 3) and r.isr == (1, 2)


def test_without_the_leso_rule_a_lagging_follower_is_proposed():
    log = log_with([(0, 4)])
    r, img = leader(isr=(1, 2), log=log, leader_epoch=1, guards=sg.SafeguardSet(frozenset({sg.LESO_CHECK})))
    r.high_watermark = 2
    _, ev = fetch(r, img, 3, 2, leader_epoch=1)
    assert ev.alter_partition is not None


def test_expansion_refused_for_a_fenced_or_restarted_follower():
    r, img = leader(isr=(1, 2))
    img.brokers[3].fenced = True
    assert fetch(r, img, 3, 0)[1].alter_partition is None
    img.brokers[3].fenced = False
    img.brokers[3].broker_epoch = 31  # 3 restarted; the leader still has a fetch from epoch 30
    r.followers[3].broker_epoch = 30
    r.maybe_expand_isr(3, r.followers[3], img, 10, ev := ReplicaEvents())
    assert ev.alter_partition is None


def test_alter_response_commits_or_rolls_back_and_ignores_older_epochs():
    r, img = leader(isr=(1, 2))
    _, ev = fetch(r, img, 3, 0)
    cid = ev.alter_partition.correlation_id
    r.handle_alter_response(cid, ErrorCode.ineligible_replica, (1, 2), 0, 0, 0, 20, ReplicaEvents())
    assert r.isr == (1, 2) and r.maximal_isr == (1, 2) and r.pending_alter is None
    _, ev = fetch(r, img, 3, 0, now=30)
    r.handle_alter_response(ev.alter_partition.correlation_id, ErrorCode.none, (1, 2, 3), 1, 0, 0, 40, ReplicaEvents())
    assert r.isr == (1, 2, 3) and r.partition_epoch == 1


def test_an_unanswered_alter_is_sent_again_and_stays_pending_until_answered_or_outdated():
    """A request held up in the network may still be applied: the leader keeps the Maximal
    ISR and sends the same request again (found by the random sim's held-AlterPartition
    story: dropping it let the HWM advance without the proposed follower, which the late
    request then put in the ISR)."""
    r, img = leader(isr=(1, 2))
    _, ev = fetch(r, img, 3, 0)
    first = ev.alter_partition  # sent at 10
    assert r.alter_timed_out(5009, 5000) is None and r.alter_deadline(5000) == 5010
    again = r.alter_timed_out(5010, 5000)
    assert again == first and r.maximal_isr == (1, 2, 3) and r.alter_deadline(5000) == 10010
    r.handle_alter_response(first.correlation_id, ErrorCode.invalid_update_version, (1, 2), 0, 0, 0, 5020, ReplicaEvents())
    assert r.pending_alter is not None and r.maximal_isr == (1, 2, 3)  # an earlier copy may have been applied
    assert r.alter_timed_out(20000, 5000) is None and r.alter_deadline(5000) is None


def test_isr_shrinks_after_the_lag_time_only_when_behind_a_moving_leo():
    r, img = leader()
    fetch(r, img, 2, 0, now=0)
    fetch(r, img, 3, 0, now=0)
    ev = ReplicaEvents()
    r.maybe_shrink_isr(img, 40000, ev)
    assert ev.alter_partition is None  # at the LEO: in sync however long ago
    produce(r, acks=1, now=40000)
    fetch(r, img, 2, 1, now=40001)
    r.maybe_shrink_isr(img, 70001, ev)
    assert [m.broker_id for m in ev.alter_partition.new_isr_with_epochs] == [1, 2]


def test_follower_truncates_on_diverging_epoch_and_ignores_stale_responses():
    reg = PartitionRegistration(replicas=(1, 2, 3), isr=(1, 2, 3), leader=1, leader_epoch=2)
    f = PartitionReplica(TP, log_with([(0, 3), (1, 2)]), ReplicaSettings(2, 30000, 2, sg.ALL_ON), itertools.count().__next__)
    f.apply_registration(reg, image(EPOCHS, reg=reg), 0, ReplicaEvents())
    assert f.role == FOLLOWER
    sent = f.fetch_partition()
    assert (sent.fetch_offset, sent.last_fetched_epoch, sent.current_leader_epoch) == (5, 1, 2)
    resp = FetchPartitionResponse(TP, ErrorCode.none, 9, 0, EpochEndOffset(0, 3))
    f.handle_fetch_response(FetchPartition(TP, 1, 5, 1), resp, 0, 1000)  # stale epoch: ignored
    assert f.log.log_end_offset == 5
    f.handle_fetch_response(sent, resp, 0, 1000)
    assert f.log.log_end_offset == 3 and f.high_watermark == 0  # no HWM from a diverging response


def test_pre_kip_101_follower_truncates_to_its_hw_on_a_new_epoch():
    guards = sg.SafeguardSet(frozenset({sg.EPOCH_TRUNCATION}))
    f = PartitionReplica(TP, log_with([(0, 5)]), ReplicaSettings(2, 30000, 2, guards), itertools.count().__next__, hwm=3)
    reg = PartitionRegistration(replicas=(1, 2, 3), isr=(1, 2, 3), leader=1, leader_epoch=1)
    f.apply_registration(reg, image(EPOCHS, reg=reg), 0, ReplicaEvents())
    assert f.log.log_end_offset == 3 and f.fetch_partition().last_fetched_epoch == -1


def test_new_leader_assigns_its_epoch_start_offset():
    r, _ = leader(log=log_with([(0, 4)]), leader_epoch=3)
    assert r.role == LEADER and r.leso == 4 and r.log.epoch_entries()[-1] == (3, 4)


def test_consumers_read_below_the_hwm_only():
    r, img = leader(isr=(1, 2))
    produce(r, value=b"a")
    produce(r, value=b"b")
    assert r.consumer_read(0, 1 << 20).records == b""  # nothing committed yet
    fetch(r, img, 2, 1)
    got = r.consumer_read(0, 1 << 20)
    assert got.high_watermark == 1 and got.records and r.log.read(0, 1 << 20, 1) == got.records
    # between the HWM and the LEO: empty, not out of range (a lagging new leader's HWM)
    at_leo = r.consumer_read(2, 100)
    assert at_leo.error is ErrorCode.none and at_leo.records == b"" and at_leo.high_watermark == 1
    assert r.consumer_read(3, 100).error is ErrorCode.offset_out_of_range  # past the LEO


# ---------------------------------------------------------------- storage failures (error codes)
class FailingLog:
    """An in-memory log whose chosen calls fail the way the on-disk log does."""

    def __init__(self, fail: dict[str, BaseException]):
        self._log = log_with([])
        self.fail = fail

    def __getattr__(self, name):
        attr = getattr(self._log, name)
        if name in self.fail and callable(attr):
            def failing(*a, **k):
                raise self.fail[name]
            return failing
        return attr


def test_append_errors_map_to_their_kafka_codes():
    from broker.records import BatchError
    from broker.storage import StorageError

    r, _ = leader(log=FailingLog({"append_as_leader": StorageError("x.log: append at byte 0 failed: [Errno 28] No space")}))
    resp, _ = produce(r, acks=1)
    assert resp.error is ErrorCode.kafka_storage_error
    assert r.failures == [("append", "StorageError: x.log: append at byte 0 failed: [Errno 28] No space")]
    r, _ = leader(log=FailingLog({"append_as_leader": OSError(5, "Input/output error")}))
    assert produce(r, acks=1)[0].error is ErrorCode.kafka_storage_error
    r, _ = leader(log=FailingLog({"append_as_leader": BatchError("magic 1", ErrorCode.unsupported_for_message_format)}))
    assert produce(r, acks=-1)[0].error is ErrorCode.unsupported_for_message_format
    r, _ = leader(log=FailingLog({"append_as_leader": ValueError("not a batch")}))
    assert produce(r, acks=-1)[0].error is ErrorCode.corrupt_message


def test_read_failures_answer_kafka_storage_error_to_consumers_and_followers():
    from broker.storage import StorageError

    r, img = leader(log=FailingLog({"read": StorageError("x.log: short read at byte 0")}))
    produce(r, acks=1)
    fetch(r, img, 2, 1)
    fetch(r, img, 3, 1)
    assert r.high_watermark == 1
    assert r.consumer_read(0, 1 << 20).error is ErrorCode.kafka_storage_error
    assert fetch(r, img, 2, 0)[0].error is ErrorCode.kafka_storage_error
    assert [op for op, _ in r.failures] == ["read for a consumer", "read for a follower"]


def test_a_follower_whose_append_fails_backs_off_instead_of_raising():
    from broker.storage import StorageError

    f = PartitionReplica(TP, FailingLog({"append_as_follower": StorageError("disk gone")}),
                         ReplicaSettings(2, 30000, 2, sg.ALL_ON), itertools.count(1).__next__)
    reg = PartitionRegistration(replicas=(1, 2, 3), isr=(1, 2, 3), leader=1)
    f.apply_registration(reg, image(EPOCHS, reg=reg), 0, ReplicaEvents())
    sent = f.fetch_partition()
    f.handle_fetch_response(sent, FetchPartitionResponse(TP, ErrorCode.none, 1, 0, None, encode_batch([b"x"], leader_epoch=0)), 100, 1000)
    assert f.fetch_backoff_until == 1100 and f.log.log_end_offset == 0
    assert f.failures and f.failures[0][0] == "follower append or truncation"
