"""What a run on Tansu may lose: nothing a consumer of Kafka's protocol is promised.

Tansu 0.6.0 calls itself "a drop-in replacement for Apache Kafka" whose data durability is
PostgreSQL's (its README: "For data durability: ... PostgreSQL with continuous archiving").
Its PostgreSQL engine (tansu-storage 0.6.0 src/pg.rs, `Storage::produce`) writes each produced
batch, the partition's high watermark with it, in one PostgreSQL transaction and answers the
producer only after that transaction committed, whatever the request's acks: with
PostgreSQL's `fsync` and `synchronous_commit` on (suites/tansu/postgres.py), an acknowledged
record is durable, so no fault of this harness (one database, never more than one copy) may
lose it, duplicate it or give its offset to another record; offsets are assigned under the
watermark row's lock, so they never repeat or go backwards. So:

- the queue and log workloads: `strict` (acks=1 included: Tansu commits before it answers);
- the group workload (subscribe mode): `subscribe` (rebalances move a partition between
  members between polls, Jepsen's allowance); its own checks (committed offsets, group skips,
  one owner per partition and generation) allow nothing;
- the harness stopped before the final read-back: `final-read-deadline`;
- a `--postgres-setting` that turns durability off (`fsync`, `synchronous_commit`,
  `full_page_writes` off) allows nothing either: such a run is a control that must show the
  loss (docs/tansu.md), and its policy says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from checkers.policy import Pick, Policy
from checkers.queue.policy import WHY, allowed_by

PROMISE = ("Tansu commits each produced batch in PostgreSQL before it answers (tansu-storage 0.6.0 "
           "src/pg.rs, Storage::produce; README: a drop-in replacement for Apache Kafka, durable through "
           "PostgreSQL), with fsync and synchronous_commit on: no acknowledged record may be lost, "
           "duplicated or moved, whatever the acks")
UNSAFE = ("fsync", "synchronous_commit", "full_page_writes")


def unsafe_settings(options: Mapping[str, Any]) -> list[str]:
    """The `--postgres-setting` lines that turn one of PostgreSQL's durability settings off."""
    out = []
    for s in options.get("postgres_settings") or []:
        key, _, value = str(s).partition("=")
        if key.strip() in UNSAFE and value.strip().strip("'").lower() in ("off", "false", "0", "no", "local"):
            out.append(str(s))
    return out


def choose(options: Mapping[str, Any], *, incomplete: bool = False) -> Policy:
    """The policy of a run (module docstring)."""
    workload = options.get("workload") or "queue"
    if workload == "noop":
        return Policy(notes=["the no-op workload has nothing to lose"])
    checker = "linearizable" if workload == "log" else "queue"
    picks = []
    if workload == "group":
        picks.append(Pick("subscribe", "group members are rebalanced between polls: " + WHY["subscribe"],
                          allowed_by(checker, "subscribe"), "group consumers (subscribe)"))
    if incomplete and checker == "queue":
        picks.append(Pick("final-read-deadline", "the harness stopped before the final read-back: "
                          + WHY["final-read-deadline"], allowed_by(checker, "final-read-deadline"),
                          "final read not done"))
    notes = [PROMISE + ("; nothing else is allowed" if picks else ", so no anomaly is allowed")]
    if unsafe := unsafe_settings(options):
        notes.append(f"PostgreSQL's durability is off ({', '.join(unsafe)}): nothing more is allowed; the run "
                     "is a control that must find what a crash of the database loses")
    return Policy(picks, notes, strict_rule="strict: Tansu commits before it acknowledges")
