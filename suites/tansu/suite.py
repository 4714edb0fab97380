"""Tansu 0.6.0 on PostgreSQL as a system under test (`wrack test --db tansu`, docs/tansu.md).

A cluster is PostgreSQL from Debian on the first node and a stateless Tansu broker on each
other node, every broker leading every partition and coordinating every group through the
one database (db.py, postgres.py, schema.sql: the project's own DDL); the binary is built
from its cargo package on first use (build.py). Workloads: the Kafka-wire queue, log and
noop workloads and the consumer-group workload (workloads/), through producers without
idempotence (Tansu is tested without the idempotent producer and transactions). Faults aimed
at the database, the brokers and the links between them and the clients (faults.py); the
loss rules: Tansu commits before it acknowledges, so nothing may be lost (rules.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import workloads
from checkers.policy import Policy
from contracts import store
from suites.base import RunFacts, Suite
from suites.tansu import build, faults, options, rules
from suites.tansu.db import TansuConfig, TansuDB
from suites.tansu.queue import TansuQueueWorkload
from workloads.base import WorkloadOptions
from workloads.kafka_io import create_topics


class TansuSuite(Suite):
    name = "tansu"
    summary = "Tansu 0.6.0 (cargo package tansu): stateless Kafka-compatible brokers on one PostgreSQL"
    option_groups = options.GROUPS
    workloads = {"queue": lambda options: TansuQueueWorkload(tansu_options(options)),
                 **workloads.factories(("group", "log", "noop"), idempotent=False)}
    default_workload = "queue"
    default_mix = faults.MIX

    def validate(self, o: Any) -> None:
        options.validate(o)

    def test_name(self, o: Any) -> str:
        parts = [self.name, o.workload or self.default_workload, f"acks{o.acks}", "+".join(o.nemesis) or "nofaults"]
        if rules.unsafe_settings({"postgres_settings": o.postgres_settings}):
            parts.append("unsafe-pg")
        return store.safe_name("-".join(parts))

    def make_db(self, o: Any, cluster: Any) -> TansuDB:
        """The cluster's DB; Tansu's binary is built here on first use (build.py: minutes)."""
        binary = o.tansu_binary or str(build.ensure())
        return TansuDB(cluster, TansuConfig(binary=binary, rust_log=o.tansu_log,
                                            postgres=options.postgres_settings(o)))

    def fault_packages(self, topics: Mapping[str, int]) -> tuple[dict[str, Any], tuple[str, ...]]:
        return faults.packages(), faults.MIX

    def prepare_workload(self, db: Any, workload: Any, o: Any) -> None:
        """Create the workload's topics (replication factor 1: Tansu keeps one copy, in the database)."""
        topics = workload.topics()
        if topics:
            create_topics(db.bootstrap_servers(), topics, replication_factor=1, timeout=60)

    def loss_rules(self, facts: RunFacts) -> Policy:
        return rules.choose(facts.options, incomplete=facts.incomplete)

    def explain(self, run_dir: Path, results: Mapping[str, Any], test: Mapping[str, Any]) -> dict[str, Any] | None:
        return None


def tansu_options(options: Mapping[str, Any]) -> WorkloadOptions:
    """The workload options of a test on Tansu: its producers are not idempotent."""
    wo = WorkloadOptions.from_test(options)
    wo.idempotent = False
    return wo


SUITE = TansuSuite()
