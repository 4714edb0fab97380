"""Replica placement (seed 004), the metadata record encoding, the safeguard registry."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.core import safeguards as sg
from broker.core.messages import TopicPartition
from broker.core.metadata import (
    BrokerRegistrationChangeRecord,
    MetadataImage,
    PartitionChangeRecord,
    PartitionRecord,
    PartitionRegistration,
    RegisterBrokerRecord,
    TopicRecord,
    decode_line,
    encode_record,
)
from broker.core.placement import PlacementError, assign_replicas


def test_first_replica_of_partition_i_is_on_broker_i_mod_n():
    a = assign_replicas([10, 11, 12, 13, 14], 15, 3)
    assert [r[0] for r in a] == [10, 11, 12, 13, 14] * 3


@given(n=st.integers(2, 7), parts=st.integers(1, 40), data=st.data())
def test_placement_is_valid_and_spreads_followers(n, parts, data):
    rf = data.draw(st.integers(1, n))
    a = assign_replicas(list(range(n)), parts, rf)
    assert all(len(set(r)) == rf for r in a)
    if rf > 1 and parts >= n * (n - 1):
        # the followers of broker 0's partitions land on every other broker
        followers = Counter(x for r in a if r[0] == 0 for x in r[1:])
        assert set(followers) == set(range(1, n))


def test_placement_errors():
    with pytest.raises(PlacementError, match="replication factor 4 larger than the 3"):
        assign_replicas([1, 2, 3], 1, 4)
    with pytest.raises(PlacementError, match="partitions must be positive"):
        assign_replicas([1, 2, 3], 0, 1)


def test_metadata_records_round_trip_through_the_file_encoding():
    tp = TopicPartition("t", 2)
    reg = PartitionRegistration((1, 2, 3), (1, 2), 1, 4, 7, (3,), (2,), 1)
    recs = [
        RegisterBrokerRecord(1, 0, "abc"),
        BrokerRegistrationChangeRecord(1, 0, fenced=False),
        TopicRecord("t", (("min.insync.replicas", "2"),)),
        PartitionRecord(tp, reg),
        PartitionChangeRecord(tp, reg),
    ]
    img = MetadataImage()
    for off, r in enumerate(recs):
        line = encode_record(off, r)
        assert line.endswith(b"\n")
        assert decode_line(line) == (off, r)
        img.apply(off, r)
    assert img.partitions[tp] == reg and not img.brokers[1].fenced and img.topics["t"]["min.insync.replicas"] == "2"


def test_bad_metadata_lines_name_the_problem():
    with pytest.raises(ValueError, match="meta.log:3: bad metadata record"):
        decode_line(b'{"offset": 1, "type": "Nope"}', "meta.log:3")
    with pytest.raises(ValueError, match="bad metadata record"):
        decode_line(b"not json", "x")


def test_image_refuses_a_gap():
    with pytest.raises(ValueError, match="expected 0"):
        MetadataImage().apply(1, TopicRecord("t"))


def test_safeguard_registry_names_and_documents_every_switch():
    assert set(sg.REGISTRY) == {
        "epoch-truncation", "elr", "leso-check", "partition-epoch-check", "broker-epoch-check", "clean-election-only",
        "producer-epoch-fence",
    }
    for s in sg.REGISTRY.values():
        assert s.rule and s.bug and s.name == s.name.lower()
    assert sg.ALL_ON.on("elr")
    assert not sg.SafeguardSet(frozenset({"elr"})).on("elr")
    assert sg.parse_config("elr, leso-check") == {"elr", "leso-check"}
    with pytest.raises(sg.UnknownSafeguard, match="unknown safeguard 'nope'"):
        sg.parse_config("nope")


def test_metadata_file_round_trip_through_the_quorum_hook(tmp_path):
    from broker.core.controller import Controller, ControllerConfig, LocalMetadataQuorum
    from broker.core.messages import BrokerRegistrationRequest
    from broker.core.metadata import metadata_log_from_lines

    path = tmp_path / "metadata.log"
    with path.open("ab") as f:
        c = Controller(ControllerConfig(), LocalMetadataQuorum(on_append=lambda off, rec: f.write(encode_record(off, rec))))
        c.handle(1, BrokerRegistrationRequest(1, 1, "a"), 0)
        c.handle(2, BrokerRegistrationRequest(1, 2, "b"), 0)
    lines = path.read_bytes().splitlines(keepends=True)
    log = metadata_log_from_lines(lines + [b'{"offset": 2, "ty'])  # a torn last line is dropped
    assert log.end_offset == 2
    again = Controller(ControllerConfig(), LocalMetadataQuorum(log))
    assert sorted(again.image.brokers) == [1, 2] and again.image.brokers[2].broker_epoch == 1
    with pytest.raises(ValueError, match=r"m:2: record offset 0, expected 1"):
        metadata_log_from_lines([lines[0], lines[0], b"\n"], "m")


def test_placement_start_spreads_topics():
    """The controller starts a topic after the partitions the cluster already has (Kafka: at a
    random broker), so two small topics do not sit on the same brokers."""
    first = assign_replicas([1, 2, 3, 4, 5], 2, 3)
    second = assign_replicas([1, 2, 3, 4, 5], 2, 3, start=2)
    assert [r[0] for r in first + second] == [1, 2, 3, 4]
    assert set().union(*first, *second) == {1, 2, 3, 4, 5}
    assert assign_replicas([1, 2, 3], 2, 2, start=3) == assign_replicas([1, 2, 3], 2, 2)
