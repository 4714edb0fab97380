"""Which anomaly types a configuration may show: named policies and their resolution.

A run's verdict is `valid: true` iff every anomaly type found is in its *allowed* set
(decided in one place: checkers/verdict.py). The allowed set is the union of named policies
and single types. `ALLOWANCES` is the one definition of what each allowance covers and why,
in the one wording the verdict's reasons and the explanations share; a system's loss rules
(e.g. suites/wrack/rules.py) pick the named policies from a run's configuration and fault
history, and the result prints the set it applied.

Terms: an *acknowledged* record is one a producer was told is at offset o; a *committed*
record is below the partition's high watermark (HWM), which only advances once every
in-sync replica has the record, and consumers only ever read committed records.

| policy | allows | why |
| --- | --- | --- |
| `strict` | nothing | acks=all, min.insync.replicas >= 2, assign-mode consumers, final reads complete |
| `acks1` | lost-write, unseen, inconsistent-offsets, nonmonotonic-send, int-nonmonotonic-send, producer-reorder, producer-gap | acknowledged but uncommitted records are lost: a leader acknowledges before any follower has the record, and a failover truncates what the new leader never had. Those records are never read (lost-write once a later offset was read, unseen otherwise), their offsets are reused by later records (the offset an ack named holds another value), and a producer's next send lands at or below its previous one (also within one op, and among an idempotent producer's records: producer-reorder, producer-gap). No consumer read them (they were above the HWM), so consumer-side types stay disallowed |
| `min-isr1` | the `acks1` types, nonmonotonic-poll, int-nonmonotonic-poll, replica-divergence | acks=all with min.insync.replicas 1: the ISR may shrink to the leader, which then acknowledges *and commits* alone; if its copy is lost (a power loss, a corrupted or wiped disk), committed records that consumers read are gone too (see `power-loss-unflushed` for what consumers then see) |
| `power-loss-unflushed` | the `acks1` types, nonmonotonic-poll, int-nonmonotonic-poll, replica-divergence | replicas that lose power together lose the records still only in their page caches, committed or not: consumers had read some of them; their offsets are reused (inconsistent-offsets, now also between reads), and a consumer positioned past the shortened log is rewound (OFFSET_OUT_OF_RANGE resets it to the earliest offset, KIP-320 truncation detection to the divergence point): nonmonotonic-poll, or int-nonmonotonic-poll when the rewind falls inside one poll (a client's poll returns the records of several fetches). A rewind goes back, never forward, so poll-skip stays disallowed |
| `unclean-election` | the `acks1` types, nonmonotonic-poll, int-nonmonotonic-poll, replica-divergence | unclean.leader.election.enable=true: with no in-sync replica live, an out-of-sync one is elected and the others truncate to it, so committed records consumers read are gone too (as with `min-isr1`) |
| `subscribe` | poll-skip, nonmonotonic-poll | subscribe-mode consumers are rebalanced between polls (Jepsen allows these with `:subscribe`) |
| `final-read-deadline` | unseen | the final read phase did not run to the end (deadline, or the harness was killed), so acknowledged records may simply not have been polled yet |
| `offsets-one-copy` | lost-commit | the system keeps a consumer group's committed offsets on one node only (the wrack broker: on the group's coordinator, no replicated `__consumer_offsets`), so a wipe of that node's disk loses them; Kafka replicates them |
| `txn` | int-send-skip, G0 | Kafka transactions do not isolate writes: sends of concurrent transactions interleave (Jepsen always allows these) |
| `txn-ww-deps` | int-send-skip, G0, G1c | with `ww_deps` the graph has ww edges, and ww+wr cycles are normal without write isolation (Jepsen's `:ww-deps`) |

Never allowed by any policy: duplicate, G1a, garbage-read, precommitted-read, poll-skip (but
with subscribe), int-poll-skip, G1c without ww edges: no loss explains them. producer-reorder
and producer-gap (checkers/producers.py) only where acknowledged records may be lost. `lost-commit`
(checkers/commits.py) only for the groups whose offsets' one copy was lost.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from checkers.policy import Pick, Policy
from checkers.producers import PRODUCER_GAP, PRODUCER_REORDER
from checkers.replicas import REPLICA_DIVERGENCE

ANOMALY_TYPES: tuple[str, ...] = (
    "inconsistent-offsets", "duplicate", "lost-write", "unseen", "G1a", "garbage-read",
    "precommitted-read", "poll-skip", "nonmonotonic-poll", "int-poll-skip", "int-nonmonotonic-poll",
    "nonmonotonic-send", "int-send-skip", "int-nonmonotonic-send", "G0", "G1c",
    "lost-commit",  # the queue workload's offset commits (checkers/commits.py)
    PRODUCER_REORDER, PRODUCER_GAP,  # an idempotent producer's order (checkers/producers.py)
    REPLICA_DIVERGENCE,  # replicas that disagree on a committed record (checkers/replicas.py)
)

# acknowledged records above the HWM lost on a leader failover (no consumer saw them)
# (and with them an idempotent producer's order: a lost record leaves a gap, its offset reused a reorder)
_UNCOMMITTED_LOSS = frozenset({"lost-write", "unseen", "inconsistent-offsets", "nonmonotonic-send",
                               "int-nonmonotonic-send", PRODUCER_REORDER, PRODUCER_GAP})
# committed records lost as well: consumers had read them and are rewound (between polls, or
# inside one poll that returned the records of several fetches); a replica the loss missed
# may hold what the others lost below its high watermark until it truncates (replica-divergence)
_COMMITTED_LOSS = _UNCOMMITTED_LOSS | {"nonmonotonic-poll", "int-nonmonotonic-poll", REPLICA_DIVERGENCE}


@dataclass(frozen=True)
class Allowance:
    """One row of the table: a named policy, the anomaly types it allows, and why, in the one
    wording the verdict's reasons and the explanations both use."""

    name: str
    allows: frozenset[str]
    why: str


ALLOWANCES: tuple[Allowance, ...] = (
    Allowance("strict", frozenset(), "acks=all with min.insync.replicas >= 2, no unclean election, no "
              "partition over the ELR's bound of lossy shutdowns: no acknowledged write may be lost"),
    Allowance("acks1", _UNCOMMITTED_LOSS, "the leader acknowledges a record before any follower has it, so a "
              "leader failover truncates acknowledged records that no consumer could read yet (they were "
              "above the high watermark)"),
    Allowance("min-isr1", _COMMITTED_LOSS, "the ISR may shrink to the leader, which then acknowledges and "
              "commits records alone; losing its copy loses records consumers have read"),
    Allowance("power-loss-unflushed", _COMMITTED_LOSS, "more replicas of a partition lost their unflushed "
              "writes at once than min.insync.replicas - 1 (seed 002, 5.1.2: the ELR's bound), so the "
              "protocol promises nothing for that partition: committed records consumers read may be gone"),
    Allowance("unclean-election", _COMMITTED_LOSS, "with no in-sync replica live, an out-of-sync one may be "
              "elected and the others truncate to it, losing records consumers have read"),
    Allowance("subscribe", frozenset({"poll-skip", "nonmonotonic-poll"}), "subscribe-mode consumers are "
              "rebalanced between polls"),
    Allowance("final-read-deadline", frozenset({"unseen"}), "the final read-back did not run to the end "
              "(its deadline, or the harness was killed): acknowledged records may not have been polled yet"),
    Allowance("offsets-one-copy", frozenset({"lost-commit"}), "the system keeps a consumer group's committed "
              "offsets on one node only (the wrack broker: on the group's coordinator, with no replicated "
              "__consumer_offsets topic, docs/broker.md), so losing that node's disk loses them; Kafka replicates "
              "them"),
    Allowance("txn", frozenset({"int-send-skip", "G0"}), "Kafka transactions do not isolate writes, so sends "
              "of concurrent transactions interleave within one (int-send-skip) and their write order can "
              "form cycles (G0)"),
    Allowance("txn-ww-deps", frozenset({"int-send-skip", "G0", "G1c"}), "with ww edges in the graph, ww+wr "
              "cycles are normal without write isolation (Jepsen's :ww-deps)"),
)
POLICIES: dict[str, frozenset[str]] = {a.name: a.allows for a in ALLOWANCES}
WHY: dict[str, str] = {a.name: a.why for a in ALLOWANCES}

# policies under which acknowledged writes may be lost (other checkers map these to their
# own loss verdict, e.g. the linearizability checker's `nonlinearizable`)
LOSSY_POLICIES: frozenset[str] = frozenset({"acks1", "min-isr1", "power-loss-unflushed", "unclean-election"})
LINEARIZABLE_LOSS = "nonlinearizable"


def allowed_by(checker: str, name: str) -> list[str]:
    """What policy `name` allows in the terms of `checker`'s anomaly types (the queue checker's
    own, or the linearizability checker's one loss verdict for a lossy policy)."""
    if checker == "queue":
        return sorted(POLICIES[name])
    return [LINEARIZABLE_LOSS] + ([REPLICA_DIVERGENCE] if REPLICA_DIVERGENCE in POLICIES[name] else []) \
        if name in LOSSY_POLICIES else []


def type_order(t: str) -> int:
    """Sort key of anomaly types: ANOMALY_TYPES' order, unknown types last."""
    try:
        return ANOMALY_TYPES.index(t)
    except ValueError:
        return len(ANOMALY_TYPES)


def resolve_allowed(allowed: Iterable[str] = (), policies: Iterable[str] = ()) -> frozenset[str]:
    """The allowed set from single types and named policies.

    An entry of `allowed` may also be `policy:NAME`. Unknown names raise `ValueError`
    with the list of valid ones (the CLI turns it into a bad-argument error).
    """
    out: set[str] = set()
    names = list(policies)
    for a in allowed:
        if a.startswith("policy:"):
            names.append(a[len("policy:"):])
        elif a in ANOMALY_TYPES:
            out.add(a)
        else:
            raise ValueError(f"unknown anomaly type {a!r} (known: {', '.join(ANOMALY_TYPES)})")
    for n in names:
        if n not in POLICIES:
            raise ValueError(f"unknown policy {n!r} (known: {', '.join(POLICIES)})")
        out |= POLICIES[n]
    return frozenset(out)


def named_policy(allowed: Iterable[str] = (), policies: Iterable[str] = (), *, rule: str = "as asked") -> Policy:
    """Loss rules from named policies and single types (`resolve_allowed`'s forms, ValueError for
    unknown ones), for a verdict asked of a history alone (`wrack check --allow/--policy`)."""
    allowed, policies = list(allowed), list(policies)
    resolve_allowed(allowed, policies)
    names = [*policies, *(a.removeprefix("policy:") for a in allowed if a.startswith("policy:"))]
    picks = [Pick(n, WHY[n], sorted(POLICIES[n], key=type_order), rule) for n in names]
    types = [a for a in allowed if not a.startswith("policy:")]
    if types:
        picks.append(Pick("allow", "allowed as asked", sorted(types, key=type_order), rule))
    return Policy(picks)
