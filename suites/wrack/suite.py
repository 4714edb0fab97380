"""The project's broker as a system under test (`wrack test --db wrack`, the default).

`wrack-broker` on every node (db.py, its properties from options.py's group), the Kafka-wire
workloads (workloads/: queue, log, noop) through real Kafka clients, the generic faults
plus those aimed at its partitions' leaders, its controller and the fault stories (faults.py),
the cluster's partitions observed while the test runs (nemesis/observer.py), the Kafka
protocol's promises as the loss rules (rules.py, lossy.py) and the story of each lost
offset from the nodes' event lines (explain.py, nodelogs.py).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import workloads
from checkers.policy import Policy
from nemesis.observer import ClusterObserver
from nemesis.targets import KafkaMetadata
from suites.base import RunFacts, Suite
from suites.wrack import faults, options, rules, triage
from suites.wrack.db import BrokerDB, BrokerOptions
from suites.wrack.explain import explain_run, isr_changes
from workloads.kafka_io import create_topics


class WrackSuite(Suite):
    name = "wrack"
    summary = "the project's Kafka-compatible broker (broker/), with switchable safeguards"
    option_groups = options.GROUPS
    workloads = workloads.factories(("queue", "log", "noop"))
    default_workload = "queue"
    default_mix = faults.MIX

    def validate(self, o: Any) -> None:
        options.validate(o)

    def test_name(self, o: Any) -> str:
        return options.test_name(o, o.workload or self.default_workload)

    def make_db(self, o: Any, cluster: Any) -> BrokerDB:
        return BrokerDB(cluster, broker_options(o))

    def metadata(self, db: Any, cluster: Any, timeout: float = 5.0) -> KafkaMetadata:
        """The brokers' Kafka metadata (partition roles), and the active controller from the quorum."""
        return KafkaMetadata(db.bootstrap_servers(), timeout=timeout, active_controller=db.active_controller)

    def fault_packages(self, topics: Mapping[str, int]) -> tuple[dict[str, Any], tuple[str, ...]]:
        return faults.packages(topics), faults.MIX

    def prepare_workload(self, db: Any, workload: Any, o: Any) -> None:
        """Create the workload's topics (every partition with a leader)."""
        topics = workload.topics()
        if topics:
            create_topics(db.bootstrap_servers(), topics, replication_factor=o.rf,
                          config=topic_config(o), timeout=60)

    def observer(self, db: Any, cluster: Any, history: Any) -> ClusterObserver:
        """The partitions' leaders and ISRs while the test runs (nemesis/observer.py)."""
        return ClusterObserver(self.metadata(db, cluster, timeout=2.0),
                               {n.name: n.address for n in cluster.nodes}, history)

    def loss_rules(self, facts: RunFacts) -> Policy:
        changes = isr_changes(facts.run_dir, facts.test) if facts.run_dir is not None else []
        return rules.choose(facts.options, incomplete=facts.incomplete, events=facts.events, keys=facts.keys,
                            isr_changes=changes)

    def explain(self, run_dir: Path, results: Mapping[str, Any], test: Mapping[str, Any]) -> dict[str, Any] | None:
        if results.get("checker") != "queue" or not results.get("anomaly_types"):
            return None
        return explain_run(run_dir, results, test)

    def report_sections(self, results: Mapping[str, Any], test: Mapping[str, Any]) -> list[str]:
        """Why each anomalous offset was lost (templates/explanations.html.j2) and the lossy
        shutdowns the loss rules counted (templates/lossy.html.j2)."""
        # lazy: jinja2 is loaded in the background while a test runs (harness.runner._preload_reporting)
        import jinja2

        env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(Path(__file__).parent / "templates")),
                                 autoescape=True)
        explanations = results.get("explanations") if isinstance(results.get("explanations"), dict) else None
        policy = results.get("policy") if isinstance(results.get("policy"), dict) else None
        return [env.get_template("explanations.html.j2").render(explanations=explanations),
                env.get_template("lossy.html.j2").render(policy=policy)]

    def cause(self, results: Mapping[str, Any], test: Mapping[str, Any]) -> str | None:
        return triage.cause(results)

    def coverage_notes(self, results: Mapping[str, Any], test: Mapping[str, Any],
                       played: Mapping[str, int]) -> list[tuple[str, bool]]:
        return triage.coverage_notes(test.get("options") or {}, results, played)


def flush_interval(policy: str) -> int | None:
    if policy == "none":
        return None
    if policy == "every":
        return 1
    return int(policy)


def broker_options(o: Any) -> BrokerOptions:
    """The broker's options for the test's: quorum, replication, flush policy, safeguards, command."""
    extra = {"unclean.leader.election.enable": str(bool(o.unclean_election)).lower()}
    if o.safeguards_off:
        extra["wrack.safeguards.off"] = ",".join(o.safeguards_off)
    bo = BrokerOptions(controllers=o.controllers, replication_factor=o.rf, min_insync_replicas=o.min_isr,
                       flush_interval_messages=flush_interval(o.flush_policy), extra=extra)
    if o.broker_command:
        bo.command = list(o.broker_command)
    elif o.backend == "local":  # local nodes share this machine's files: this environment's broker
        exe = Path(sys.executable).parent / "wrack-broker"
        if exe.exists():
            bo.command = [str(exe)]
    return bo


def topic_config(o: Any) -> dict[str, str]:
    cfg = {"min.insync.replicas": str(o.min_isr)}
    if o.safeguards_off:
        cfg["wrack.safeguards.off"] = ",".join(o.safeguards_off)
    return cfg


SUITE = WrackSuite()
