"""The log start offset across replicas (issue 16): DeleteRecords on the leader, a
follower following its leader's log start offset, and a follower whose LEO is below it
starting over there (Kafka's truncateFullyAndStartAt)."""

from __future__ import annotations

import itertools

from core_helpers import TP, image, log_with
from kio.schema.errors import ErrorCode

from broker.core import safeguards as sg
from broker.core.messages import FetchPartition, FetchPartitionResponse
from broker.core.metadata import PartitionRegistration
from broker.core.replica import FOLLOWER, PartitionReplica, ReplicaEvents, ReplicaSettings
from broker.sim.batches import encode_batch

EPOCHS = {1: 10, 2: 20, 3: 30}
REG = PartitionRegistration(replicas=(1, 2, 3), isr=(1, 2, 3), leader=1, leader_epoch=0)


def replica(me: int, log) -> PartitionReplica:
    r = PartitionReplica(TP, log, ReplicaSettings(me, 30000, 1, sg.ALL_ON), itertools.count(1).__next__)
    r.apply_registration(REG, image(EPOCHS, reg=REG), 0, ReplicaEvents())
    return r


def test_delete_records_on_the_leader():
    r = replica(1, log_with([(0, 10)]))
    r.high_watermark = 8
    assert r.delete_records(9) == (ErrorCode.offset_out_of_range, -1)  # beyond the high watermark
    assert r.delete_records(-5) == (ErrorCode.offset_out_of_range, -1)
    assert r.delete_records(4) == (ErrorCode.none, 4)
    assert r.delete_records(2) == (ErrorCode.none, 4)  # never moves down
    assert r.consumer_read(3, 1 << 20).error is ErrorCode.offset_out_of_range
    assert r.delete_records(-1) == (ErrorCode.none, 8)  # -1: the high watermark
    follower = replica(2, log_with([(0, 10)]))
    assert follower.delete_records(1) == (ErrorCode.not_leader_or_follower, -1)


def _follower_fetch(r: PartitionReplica, rid: int, log_start: int, img, now: int = 0) -> ReplicaEvents:
    """Follower `rid` fetches at the leader's LEO, saying its log start offset."""
    ev = ReplicaEvents()
    fp = FetchPartition(TP, r.leader_epoch, r.log.log_end_offset, r.log.latest_epoch(), log_start)
    assert r.handle_follower_fetch(rid, EPOCHS[rid], fp, img, now, ev).error is ErrorCode.none
    return ev


def test_delete_records_waits_for_the_low_watermark_of_the_replicas_on_live_brokers():
    """Kafka's DelayedDeleteRecords: answered once every replica on a live broker says
    (in its fetch) that its log start reached the offset; a fenced broker's does not count."""
    img = image(EPOCHS, reg=REG)
    r = replica(1, log_with([(0, 10)]))
    r.high_watermark = 8
    assert r.delete_records(6) == (ErrorCode.none, 6)
    ev = ReplicaEvents()
    r.await_low_watermark("c", 7, 6, 1000, img, ev)
    assert ev.delete_responses == [] and r.low_watermark(img) == -1  # no follower has said yet
    assert _follower_fetch(r, 2, 6, img).delete_responses == []
    assert _follower_fetch(r, 3, 0, img).delete_responses == []  # 3 still starts at 0
    done = _follower_fetch(r, 3, 6, img).delete_responses
    assert [(c, x.correlation_id, x.error, x.low_watermark) for c, x in done] == [("c", 7, ErrorCode.none, 6)]

    assert r.delete_records(8) == (ErrorCode.none, 8)
    r.await_low_watermark("c", 8, 8, 1000, image(EPOCHS, fenced={3}, reg=REG), ev := ReplicaEvents())
    assert ev.delete_responses == []
    fenced3 = image(EPOCHS, fenced={3}, reg=REG)
    done = _follower_fetch(r, 2, 8, fenced3).delete_responses  # 3's broker is fenced: not waited for
    assert [(x.error, x.low_watermark) for _, x in done] == [(ErrorCode.none, 8)]


def test_a_waiting_delete_records_times_out_or_fails_with_the_leadership():
    img = image(EPOCHS, reg=REG)
    r = replica(1, log_with([(0, 10)]))
    r.high_watermark = 8
    r.delete_records(4)
    r.await_low_watermark("c", 1, 4, 500, img, ReplicaEvents())
    r.await_low_watermark("c", 2, 4, 900, img, ReplicaEvents())
    r.expire_deletes(499, ev := ReplicaEvents())
    assert ev.delete_responses == []
    r.expire_deletes(500, ev)
    assert [(x.correlation_id, x.error) for _, x in ev.delete_responses] == [(1, ErrorCode.request_timed_out)]
    new = PartitionRegistration(replicas=(1, 2, 3), isr=(2, 3), leader=2, leader_epoch=1)
    ev = ReplicaEvents()
    r.apply_registration(new, image(EPOCHS, reg=new), 600, ev)
    assert [(x.correlation_id, x.error) for _, x in ev.delete_responses] == [(2, ErrorCode.not_leader_or_follower)]


def test_a_follower_follows_the_leaders_log_start_offset():
    f = replica(2, log_with([(0, 6)]))
    assert f.role == FOLLOWER
    sent = f.fetch_partition()
    f.handle_fetch_response(sent, FetchPartitionResponse(TP, ErrorCode.none, 7, 4, None, encode_batch([b"x"], base_offset=6,
                                                                                                      leader_epoch=0)), 0, 1000)
    assert (f.log.log_start_offset, f.log.log_end_offset, f.high_watermark) == (4, 7, 7)


def test_a_follower_below_the_leaders_log_start_starts_over_there():
    f = replica(2, log_with([(0, 3)]))
    sent = f.fetch_partition()
    f.handle_fetch_response(sent, FetchPartitionResponse(TP, ErrorCode.offset_out_of_range, 50, 40, log_end_offset=50), 0, 1000)
    assert (f.log.log_start_offset, f.log.log_end_offset, f.log.epoch_entries()) == (40, 40, [])
    assert f.truncations == [(3, 40, "below-leader-log-start")]
    assert f.fetch_partition().fetch_offset == 40
