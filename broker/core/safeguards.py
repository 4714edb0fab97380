"""The registry of switchable protocol safeguards (all on by default).

Each safeguard is a rule of the replication protocol (or of transactions) whose removal
brings back a historical data-loss (or isolation) bug. The harness exposes them as ``--safeguard-off NAME``; a broker
or controller takes a set of names switched off (`SafeguardSet`), and a topic may switch
more off with the topic config ``wrack.safeguards.off`` (comma-separated names). The
effective set for a partition is the union of the node's and the topic's.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Safeguard:
    """One named rule: what it guards and the bug that returns without it."""

    name: str
    rule: str
    bug: str
    # The replication simulation (broker/sim) models what it guards. False: transactions,
    # which it does not model; a broker test on real processes shows the bug (docs/broker.md,
    # Transactions). Every safeguard has a cell in the bug zoo (campaigns/bugzoo.yaml): under
    # the default options, with txn ops (`txn_p`) for a transactional one.
    simulated: bool = True


EPOCH_TRUNCATION = "epoch-truncation"
ELR = "elr"
LESO_CHECK = "leso-check"
PARTITION_EPOCH_CHECK = "partition-epoch-check"
BROKER_EPOCH_CHECK = "broker-epoch-check"
CLEAN_ELECTION_ONLY = "clean-election-only"
PRODUCER_EPOCH_FENCE = "producer-epoch-fence"

REGISTRY: dict[str, Safeguard] = {
    s.name: s
    for s in (
        Safeguard(
            EPOCH_TRUNCATION,
            "Followers truncate by leader epoch (KIP-101/KIP-279/KIP-595: last fetched epoch, "
            "DivergingEpoch) instead of to their local high watermark.",
            "Pre-KIP-101 (Kafka < 0.11, KAFKA-1211): a follower truncates to its checkpointed HW on "
            "restart or when it becomes a follower in a new epoch, drops a record that was already "
            "committed, and is then elected leader before it re-fetches it: acknowledged writes are "
            "lost (seed 000), and logs can diverge after multiple failures.",
        ),
        Safeguard(
            ELR,
            "The leader advances the HWM only while ISR >= min.insync.replicas, and the controller "
            "keeps Eligible Leader Replicas (ELR, LastKnownELR) and elects from them when the ISR is "
            "empty; a replica restarting after an unclean shutdown leaves the ELR (KIP-966).",
            "Last Replica Standing (Kafka <= 3.6, KAFKA-15583): the HWM advances with the ISR shrunk "
            "to the leader, the ISR never becomes empty, and the last ISR member is re-elected after "
            "a lossy unclean shutdown; followers truncate to it and committed data is lost globally.",
        ),
        Safeguard(
            LESO_CHECK,
            "A follower joins the ISR only if its LEO >= the Leader Epoch Start Offset (and >= HWM, "
            "and it fetched in the current leader epoch).",
            "A new leader's local HWM may be stale (below the True HWM); without the LESO rule a "
            "follower missing committed records joins the ISR and can be elected (Vanlightly 6.4.1, "
            "6.5.3): acknowledged writes are lost.",
        ),
        Safeguard(
            PARTITION_EPOCH_CHECK,
            "The controller accepts an AlterPartition only if its partition epoch equals the "
            "controller's (INVALID_UPDATE_VERSION otherwise).",
            "A stale AlterPartition (sent before a controller-side ISR change) overwrites newer "
            "metadata and re-adds a replica the controller removed, breaking Leader Candidate "
            "Completeness (KIP-497's concurrency control).",
        ),
        Safeguard(
            BROKER_EPOCH_CHECK,
            "Fetches and AlterPartition carry broker epochs; a replica whose broker epoch is stale "
            "(the broker restarted) is not added to the ISR (KIP-903, KIP-841), and requests from a "
            "stale broker epoch are rejected (STALE_BROKER_EPOCH).",
            "KAFKA-14617: a follower that caught up, then restarted with an empty disk, is added to "
            "the ISR by an AlterPartition computed before the restart and is later elected with an "
            "empty log: acknowledged writes are lost.",
        ),
        Safeguard(
            CLEAN_ELECTION_ONLY,
            "Leaders are elected only from the ISR (or ELR); with it off, unclean.leader.election."
            "enable=true lets any live replica be elected when no clean candidate is live.",
            "Unclean leader election (default before Kafka 0.11, KIP-106; Jepsen 2013): an "
            "out-of-sync replica becomes leader and acknowledged writes are truncated away.",
        ),
        Safeguard(
            PRODUCER_EPOCH_FENCE,
            "A partition leader refuses a transactional write whose producer epoch is below the "
            "producer's (INVALID_PRODUCER_EPOCH): the coordinator's epoch bump (InitProducerId of a "
            "new instance, a transaction timeout) reaches the partition with the ABORT marker and "
            "fences the old instance there.",
            "Zombie writes (KAFKA-14402, what KIP-890 closes): the old instance's late write is "
            "appended after the abort, joins the new instance's transaction on that partition and "
            "is committed with it: a read_committed consumer sees a write of a transaction that "
            "was aborted (G1a, aborted read).",
            simulated=False,
        ),
    )
}


class UnknownSafeguard(ValueError):
    """A safeguard name that is not in the registry."""


def check_names(names: object) -> frozenset[str]:
    """Validate an iterable of names; raise UnknownSafeguard naming the first bad one."""
    out = set()
    for n in names:  # type: ignore[attr-defined]
        if n not in REGISTRY:
            raise UnknownSafeguard(f"unknown safeguard {n!r} (known: {', '.join(sorted(REGISTRY))})")
        out.add(n)
    return frozenset(out)


def parse_config(value: str | None) -> frozenset[str]:
    """Parse the comma-separated config value of ``wrack.safeguards.off``."""
    if not value:
        return frozenset()
    return check_names(v.strip() for v in value.split(",") if v.strip())


@dataclass(frozen=True)
class SafeguardSet:
    """The safeguards switched off for one node, topic or partition."""

    off: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        check_names(self.off)

    def on(self, name: str) -> bool:
        """True if the safeguard `name` is in force."""
        if name not in REGISTRY:
            raise UnknownSafeguard(f"unknown safeguard {name!r}")
        return name not in self.off

    def union(self, more_off: frozenset[str]) -> SafeguardSet:
        """This set with `more_off` switched off too (node set + topic config)."""
        return SafeguardSet(self.off | more_off) if more_off else self


ALL_ON = SafeguardSet()
