"""The expected-anomaly policy: which of the checker's named policies a configuration gets.

`choose(options) -> Policy` is a pure function of the test options. It only picks *names*;
what each name allows is defined once, by the queue checker's `checkers.queue.POLICIES`
(docs/checkers-queue.md, "Policies"). Every pick carries the reason this configuration needs
it; the report shows them, and `allowed` (the union) is what the checker is given.

Rules (reasoning in docs/harness.md, "Expected-anomaly policy"):
- acks=1 (or a per-op mix) -> `acks1`: a leader acknowledges before any follower has the
  record, and a failover truncates acknowledged records nobody could read yet;
- acks=all with min ISR < 2 -> `min-isr1`: the ISR may shrink to the leader, which then
  acknowledges and commits alone; losing its copy loses records consumers read;
- unclean leader election on (`--unclean-election`) -> `unclean-election`: an out-of-sync
  replica may be elected, truncating committed records (as with min ISR 1);
- power loss without a flush per message -> `power-loss-unflushed`: replicas that lose
  power together drop committed records that were only in their page caches;
- the harness stopped before the final read-back (killed) -> `final-read-deadline`;
- otherwise (acks=all, min ISR >= 2, no unflushed power loss) `strict`: nothing.
Switching a broker safeguard off allows nothing more: finding the bug it guards against is
the point of such a run.

Other checkers have one loss verdict instead of the queue checker's types: for the log
workload (linearizability) every policy that admits lost writes (`LOSSY_POLICIES`) allows
`nonlinearizable`, the others nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from checkers.queue.policy import LOSSY_POLICIES, POLICIES

LINEARIZABLE_LOSS = "nonlinearizable"


@dataclass
class Pick:
    """One named policy of the checker and why this configuration needs it."""

    name: str
    reason: str
    allows: list[str]


@dataclass
class Policy:
    picks: list[Pick] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # reasons that allow nothing (strict, safeguards)

    @property
    def name(self) -> str:
        """The picks' names joined with `+`, or `strict`."""
        return "+".join(p.name for p in self.picks) or "strict"

    @property
    def names(self) -> list[str]:
        """The checker's named policies (what `checkers.queue.check(policies=)` takes)."""
        return [p.name for p in self.picks]

    @property
    def allowed(self) -> list[str]:
        return sorted({t for p in self.picks for t in p.allows})

    @property
    def reasons(self) -> list[str]:
        return [f"{p.name}: {p.reason}" for p in self.picks] + self.notes

    def to_dict(self) -> dict[str, Any]:
        """results.json's `policy`: name, allowed, reasons (one line per pick, then the notes),
        notes, and `policies`: each pick with its reason and what it allows."""
        return {"name": self.name, "allowed": self.allowed, "reasons": self.reasons, "notes": self.notes,
                "policies": [{"name": p.name, "reason": p.reason, "allows": p.allows} for p in self.picks]}


def _flush_per_message(flush_policy: Any) -> bool:
    return str(flush_policy) in ("every", "1", "always")


def _types(checker: str, name: str) -> list[str]:
    """What policy `name` allows in the terms of `checker`'s anomaly types."""
    if checker == "queue":
        return sorted(POLICIES[name])
    return [LINEARIZABLE_LOSS] if name in LOSSY_POLICIES else []


def choose(options: Mapping[str, Any], *, incomplete: bool = False) -> Policy:
    """The policy for a test's options (see the module docstring). `incomplete`: the harness
    stopped before the final read-back (killed), so acknowledged sends may never have been
    read."""
    workload = options.get("workload", "queue")
    if workload == "noop":
        return Policy(notes=["the no-op workload has nothing to lose"])
    checker = "linearizable" if workload == "log" else "queue"
    acks = str(options.get("acks", "all"))
    isr = min(int(options.get("min_isr", 2) or 1), int(options.get("rf", 3) or 1))
    nemesis = list(options.get("nemesis") or [])
    wanted: list[tuple[str, str]] = []
    if acks in ("1", "mixed"):
        wanted.append(("acks1", f"acks={acks}: the leader acknowledges a record before any follower has "
                                "it, so a leader failover truncates acknowledged records that no consumer "
                                "could read yet (they were above the high watermark)"))
    elif isr < 2:
        wanted.append(("min-isr1", f"acks=all with min ISR {isr}: the ISR may shrink to the leader, which then "
                                   "acknowledges and commits records alone; losing its copy loses records "
                                   "consumers have read"))
    if options.get("unclean_election"):
        wanted.append(("unclean-election", "unclean leader election on (--unclean-election): an out-of-sync "
                                           "replica may be elected and the others truncate to it, losing "
                                           "records consumers have read"))
    if "power-loss" in nemesis and not _flush_per_message(options.get("flush_policy")):
        wanted.append(("power-loss-unflushed", "power loss without a flush per message: replicas that lose "
                                               "power together drop records, committed or not, that were "
                                               "only in their page caches"))
    if incomplete and checker == "queue":
        wanted.append(("final-read-deadline", "the harness stopped before the final read-back: acknowledged "
                                              "sends may not have been read yet"))
    picks = [Pick(n, why, _types(checker, n)) for n, why in wanted]
    notes = []
    if not picks:
        notes.append("acks=all with min ISR >= 2 and no power loss that can drop unflushed data: no "
                     "acknowledged write may be lost, no anomaly is allowed")
    if options.get("safeguards_off"):
        notes.append("safeguards switched off (" + ", ".join(options["safeguards_off"]) +
                     "): nothing more is allowed; the run is meant to find the bug they guard against")
    return Policy(picks, notes)
