"""The wrack broker's option group, its checks, and what they become: broker properties,
topic configs and the run's name (contracts/options.py groups)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from broker.core.safeguards import REGISTRY as SAFEGUARDS
from contracts import store
from contracts.errors import InputError
from contracts.options import command, csv, opt
from workloads.options import KafkaClientOptions

FLUSH_POLICIES = ("none", "every")


@dataclass
class WrackOptions:
    """The wrack broker (--db wrack)."""

    rf: int = opt(3, "replication factor")
    min_isr: int = opt(2, "min.insync.replicas")
    flush_policy: str = opt("none", "none (the OS writes back), every (fsync each message) or N messages")
    safeguards_off: list[str] = opt(
        factory=list, flag="--safeguard-off", repeat=True, metavar="NAME", parse=csv,
        help="switch a broker safeguard off (repeatable; see docs/broker-replication.md)")
    unclean_election: bool = opt(
        False, "unclean.leader.election.enable=true: a configuration that may lose acknowledged writes "
               "(allowed by the policy), unlike --safeguard-off clean-election-only")
    controllers: int | None = opt(None, "controller quorum voters, on the first N nodes (combined mode; "
                                        "default 3 for 3 or more nodes, else 1)", metavar="N")
    broker_command: list[str] | None = opt(None, "command that runs the broker on a node (default wrack-broker)",
                                           parse=command, metavar="CMD")


DEFAULTS = WrackOptions()


def validate(o: Any) -> None:
    """InputError naming the first bad option of the broker's cluster (and the Kafka clients')."""
    def bad(opt_: str, msg: str) -> None:
        raise InputError(f"--{opt_}: {msg}")

    if not 1 <= o.rf <= o.nodes:
        bad("rf", f"{o.rf} must be between 1 and the number of nodes ({o.nodes})")
    if not 1 <= o.min_isr <= o.rf:
        bad("min-isr", f"{o.min_isr} must be between 1 and the replication factor ({o.rf})")
    if o.partitions < 1 or o.topics < 1:
        bad("partitions", "at least 1")
    if o.flush_policy not in FLUSH_POLICIES and not str(o.flush_policy).isdigit():
        bad("flush-policy", f"{o.flush_policy!r} is not none, every or a number of messages")
    if o.controllers is not None and not 1 <= o.controllers <= o.nodes:
        bad("controllers", f"{o.controllers} must be between 1 and the number of nodes ({o.nodes})")
    unknown = [s for s in o.safeguards_off if s not in SAFEGUARDS]
    if unknown:
        bad("safeguard-off", f"unknown safeguard {', '.join(unknown)} (known: {', '.join(sorted(SAFEGUARDS))})")
    check_kafka_clients(o, bad)


def check_kafka_clients(o: Any, bad: Callable[[str, str], None]) -> None:
    """The Kafka client options (workloads/options.py) this broker serves."""
    if o.in_flight < 0:
        bad("in-flight", f"{o.in_flight} must not be negative")
    if not 0 <= o.txn_p <= 1 or o.txn_p > 0 and o.client != "confluent":
        bad("txn-p", f"{o.txn_p} must be between 0 and 1, and transactions need --client confluent")
    if o.idempotence and o.acks != "all":
        bad("idempotence", f"needs --acks all (an idempotent producer writes with acks=all), not --acks {o.acks}")
    if o.idempotence and o.client != "confluent":
        bad("idempotence", f"needs --client confluent (not {o.client})")


def test_name(o: Any, workload: str) -> str:
    """The default run name: workload, acks, idempotence, min ISR when not the default, faults,
    switched-off safeguards, unclean election."""
    faults = "+".join(o.nemesis) or "nofaults"
    parts = [workload, f"acks{o.acks}" + ("-idem" if o.idempotence else ""), faults]
    if o.min_isr != DEFAULTS.min_isr:
        parts.insert(2, f"minisr{o.min_isr}")
    if o.safeguards_off:
        parts.append("off-" + "+".join(o.safeguards_off))
    if o.unclean_election:
        parts.append("unclean")
    return store.safe_name("-".join(parts))


GROUPS = (KafkaClientOptions, WrackOptions)  # this system's option groups, in the order its help lists them
