"""The Kafka-wire workloads' option group: what a test tells the Kafka clients (acks, library,
topics, transactions), for any system that speaks Kafka's protocol (contracts/options.py
groups; a system under test lists this group among its `option_groups`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from contracts.options import opt


def acks_name(s: Any) -> str:
    """An acks setting as the harness names it: "-1" is "all", anything else its text."""
    return {"-1": "all"}.get(str(s), str(s))


@dataclass
class KafkaClientOptions:
    """Kafka clients (the queue, log and noop workloads of every Kafka-wire system)."""

    acks: str = opt("all", "all, 1 or mixed (per op)", parse=acks_name, choices=("all", "1", "mixed"))
    partitions: int = opt(2, "partitions per topic")
    topics: int = opt(2, "topics")
    in_flight: int = opt(64, "queue workload: send-only processes beside the consuming clients, so up to N "
                             "more sends are in flight at once (0: none)", metavar="N")
    txn_p: float = opt(0.0, "queue workload: share of the consuming clients' ops that are `txn` ops (Kafka "
                            "transactions of sends and polls; read_committed consumers; --client confluent)",
                       metavar="P")
    client: str = opt("confluent", "confluent (librdkafka) or kafka-python", choices=("confluent", "kafka-python"))
    idempotence: bool = opt(False, "idempotent producers as applications run them: enable.idempotence, retries "
                                   "on, up to 5 requests in flight per connection (acks=all, --client confluent); "
                                   "a duplicate is then the broker's bug")


KAFKA_DEFAULTS = KafkaClientOptions()
