"""Role targets against a real broker: a KRaft broker's Metadata answer names itself (any
live broker) as the controller, so `KafkaMetadata` takes the active controller from the
DB (`active_controller`, an address) and maps it to the broker at that address."""

from __future__ import annotations

from nemesis.targets import KafkaMetadata


def test_the_active_controller_is_the_broker_at_the_address_the_db_names(fleet):
    b = fleet.single().start()
    assert KafkaMetadata(b.bootstrap)().controller_id == 0  # the broker's own answer
    where = {"addr": "127.0.0.1"}
    md = KafkaMetadata(b.bootstrap, active_controller=lambda: where["addr"])
    assert md().controller_id == 0
    where["addr"] = "127.0.0.9"  # not a broker of this cluster
    assert md().controller_id == -1
    where["addr"] = None  # the controller's node is down
    assert md().controller_id == -1
