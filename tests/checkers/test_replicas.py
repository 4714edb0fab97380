"""Replica agreement (checkers/replicas.py, nemesis/replicalogs.py `first_difference`): two
replicas' logs, as batch headers, differ at the first offset both hold with other records
there; a difference below both high watermarks is a `replica-divergence`, one above is a
follower's tail that may still truncate; loss rules allow it per partition. The debugging
fetch that reads real replicas is exercised in tests/broker/test_broker_replication_procs.py."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from checkers import replicas
from checkers.policy import Pick, Policy
from checkers.verdict import judge
from nemesis.replicalogs import BatchId, ReplicaLog, first_difference

S = 1_000_000_000


def log(sizes: list[int], crcs: list[int], start: int = 0, hwm: int | None = None) -> ReplicaLog:
    out, at = [], start
    for n, c in zip(sizes, crcs, strict=True):
        out.append(BatchId(at, at + n - 1, c, 0, 1000 + at))
        at += n
    return ReplicaLog(at if hwm is None else hwm, start, at, out)


batches = st.lists(st.tuples(st.integers(1, 5), st.integers(0, 3)), max_size=12)


@given(batches, batches, batches)
def test_the_first_difference_is_where_the_logs_part(common, xs, ys):
    a = log(*map(list, zip(*(common + xs), strict=True))) if common + xs else ReplicaLog(0, 0, 0)
    b = log(*map(list, zip(*(common + ys), strict=True))) if common + ys else ReplicaLog(0, 0, 0)
    d, e = first_difference(a, b), first_difference(b, a)
    assert (d is None) == (e is None)
    shared = sum(n for n, _ in common)
    if d is None:  # one log is a prefix of the other
        short, long_ = sorted((a.batches, b.batches), key=len)
        assert long_[:len(short)] == short
    else:
        assert d == (e[0], e[2], e[1]) and d[0] >= shared and d[1] is not None and d[2] is not None
    if xs and ys and xs[0] != ys[0]:  # the logs part right after the common batches
        assert d is not None and d[0] == shared


def test_a_follower_that_kept_a_record_the_leader_never_had_differs_there():
    leader = log([3, 2, 1, 4], [1, 2, 3, 4])
    follower = log([3, 2, 1, 4], [1, 2, 9, 4])  # offset 5 replaced on the leader, kept by the follower
    offset, x, y = first_difference(leader, follower)
    assert offset == 5 and (x.crc, y.crc) == (3, 9)
    assert first_difference(leader, log([3, 2], [1, 2])) is None  # a follower behind: a prefix
    assert first_difference(log([3, 2, 1], [1, 2, 3]), log([3, 3], [1, 7])) == (3, *log([3, 2, 1], [1, 2, 3]).batches[1:2],
                                                                               log([3, 3], [1, 7]).batches[1])


def test_the_same_records_under_another_leader_epoch_differ():
    a, b = log([3, 1], [1, 2]), log([3, 1], [1, 2])
    b.batches[1] = b.batches[1]._replace(epoch=1)  # the new leader wrote it again; the follower kept its own
    assert first_difference(a, b)[0] == 3


def test_logs_compared_from_the_later_log_start():
    a = log([3, 2, 2], [1, 2, 3])
    b = log([2, 2], [2, 3], start=3)
    assert first_difference(a, b) is None
    assert first_difference(a, log([2, 2], [2, 8], start=3))[0] == 5


def state(differ: list[dict], hwms: dict[str, int]) -> dict:
    reps = {n: {"hwm": h, "log_start": 0, "log_end": h + 5, "batches": 9} for n, h in hwms.items()}
    return {"process": "nemesis", "type": "info", "f": "replica-state", "time": 90 * S,
            "value": {"partitions": {"q-0": {"replicas": reps, "differ": differ}}, "unread": {}, "read_s": 0.4}}


def test_a_difference_below_both_high_watermarks_is_a_divergence():
    x, y = {"base": 40, "last": 42, "crc": 1, "epoch": 3}, {"base": 40, "last": 40, "crc": 2, "epoch": 2}
    d = {"replicas": ["n1", "n2"], "offset": 40, "a": x, "b": y, "written": 12 * S}
    r = replicas.check([state([d], {"n1": 100, "n2": 41, "n3": 100})])
    assert r["valid"] is False and r["anomaly_types"] == ["replica-divergence"]
    (e,) = r["anomalies"]["replica-divergence"]
    assert e["explanation"] == ("q-0: replicas n1 and n2 hold different records at offset 40, below both their high "
                                "watermarks (the lower is 41): n1 a batch of 40-42 (CRC 0x00000001, leader epoch 3), "
                                "n2 a batch of 40-40 (CRC 0x00000002, leader epoch 2)")
    assert {k: v for k, v in e.items() if k != "explanation"} == {
        "key": "q-0", "replicas": ["n1", "n2"], "offset": 40, "hwm": 41, "batches": [x, y], "time": 12 * S}
    assert r["anomaly_keys"] == {"replica-divergence": {"q-0": 1}} and r["anomaly_times"] == {"replica-divergence": 12 * S}


def test_the_same_batch_under_another_epoch_is_told_as_such():
    x, y = {"base": 7, "last": 7, "crc": 5, "epoch": 3}, {"base": 7, "last": 7, "crc": 5, "epoch": 2}
    d = {"replicas": ["n1", "n2"], "offset": 7, "a": x, "b": y, "written": S}
    (e,) = replicas.check([state([d], {"n1": 9, "n2": 9})])["anomalies"]["replica-divergence"]
    assert "hold the same records under other leader epochs" in e["explanation"]


def test_a_difference_in_a_followers_uncommitted_tail_is_not():
    d = {"replicas": ["n1", "n2"], "offset": 40, "a": None, "b": None, "written": None}
    r = replicas.check([state([d], {"n1": 100, "n2": 40})])
    assert r["valid"] is True and r["checked"] is True and r["replicas_read"] == 2


def test_no_replica_state_event_is_not_judged():
    assert replicas.check([{"process": "nemesis", "type": "info", "f": "kill", "value": ["n1"]}])["checked"] is False


def test_a_loss_rule_for_one_partition_allows_a_divergence_there_only():
    d = {"replicas": ["n1", "n2"], "offset": 4, "a": None, "b": None, "written": 3 * S}
    r = replicas.check([state([d], {"n1": 10, "n2": 10})])
    mine = Policy([Pick("power-loss-unflushed", "r", ["replica-divergence"], "rule", keys=["q-0"])])
    other = Policy([Pick("power-loss-unflushed", "r", ["replica-divergence"], "rule", keys=["q-1"])])
    assert judge({"replicas": r}, mine).valid is True
    v = judge({"replicas": r}, other)
    assert v.valid is False and v.bad_anomaly_types == ["replica-divergence"]
    assert judge({"replicas": r}, Policy()).valid is False
