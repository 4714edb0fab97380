"""Which anomaly types a configuration may show: named policies and their resolution.

A run's verdict is `valid: true` iff every anomaly type found is in its *allowed* set.
The allowed set is the union of named policies and single types; the harness picks the
policies from the run's configuration, and the result prints the set it applied.

| policy | allows | why |
| --- | --- | --- |
| `strict` | nothing | the default: acks=all, min.insync.replicas >= 2, assign-mode consumers, final reads complete |
| `acks1` | lost-write, unseen, inconsistent-offsets, nonmonotonic-send, int-nonmonotonic-send, poll-skip, nonmonotonic-poll | acks=1 acknowledges before replication: a leader failover truncates acknowledged records (lost or unseen), their offsets are reused by later records (inconsistent offsets, a producer's later send landing lower), and consumers that had read past the new log end are reset |
| `subscribe` | poll-skip, nonmonotonic-poll | subscribe-mode consumers are rebalanced between polls (Jepsen allows these with `:subscribe`) |
| `final-read-deadline` | unseen | the final read phase hit its deadline, so acknowledged records may simply not have been polled yet |
| `txn` | int-send-skip, G0 | Kafka transactions do not isolate writes: sends of concurrent transactions interleave (Jepsen always allows these) |
| `txn-ww-deps` | int-send-skip, G0, G1c | with `ww_deps` the graph has ww edges, and ww+wr cycles are normal without write isolation (Jepsen's `:ww-deps`) |
"""

from __future__ import annotations

from collections.abc import Iterable

ANOMALY_TYPES: tuple[str, ...] = (
    "inconsistent-offsets", "duplicate", "lost-write", "unseen", "G1a", "garbage-read",
    "precommitted-read", "poll-skip", "nonmonotonic-poll", "int-poll-skip", "int-nonmonotonic-poll",
    "nonmonotonic-send", "int-send-skip", "int-nonmonotonic-send", "G0", "G1c",
)

POLICIES: dict[str, frozenset[str]] = {
    "strict": frozenset(),
    "acks1": frozenset({"lost-write", "unseen", "inconsistent-offsets", "nonmonotonic-send",
                        "int-nonmonotonic-send", "poll-skip", "nonmonotonic-poll"}),
    "subscribe": frozenset({"poll-skip", "nonmonotonic-poll"}),
    "final-read-deadline": frozenset({"unseen"}),
    "txn": frozenset({"int-send-skip", "G0"}),
    "txn-ww-deps": frozenset({"int-send-skip", "G0", "G1c"}),
}


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
