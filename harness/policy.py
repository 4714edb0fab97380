"""The expected-anomaly policy: what a configuration is allowed to show (DESIGN.md).

`choose(options) -> Policy` is a pure function of the test options. The policy's `allowed`
anomaly types are passed to the checker (an anomaly outside them makes the run invalid),
and the report shows the policy with the reason for every allowance.

Rules (queue workload; the allowed types are the queue checker's named policy `acks1`:
lost writes, unseen writes, and the offset reuse and consumer resets that follow a
truncation):
- acks=1 (or a per-op mix): a leader acknowledges before any follower has the record, so a
  leader failover may lose acknowledged writes;
- acks=all with min ISR < 2: the ISR may shrink to the leader alone, which then
  acknowledges alone -> the same allowance;
- power loss without a flush per message: records acknowledged by every replica may sit
  only in page caches that a simultaneous power loss drops -> the same allowance;
- acks=all with min ISR >= 2 and no power loss: nothing is allowed.
Switching a broker safeguard off allows nothing more: finding the bug it guards against is
the point of such a run.

The log workload is checked for linearizability: with acks=1 or min ISR < 2 a read may miss
an acknowledged send (`nonlinearizable` allowed); otherwise nothing is.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

LOSSY = ("lost-write", "unseen")  # without the queue checker's policy table


def _queue_lossy() -> tuple[str, ...]:
    try:
        from checkers.queue.policy import POLICIES

        return tuple(sorted(POLICIES["acks1"]))
    except (ImportError, KeyError):
        return LOSSY


@dataclass
class Policy:
    name: str
    allowed: list[str] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _flush_per_message(flush_policy: Any) -> bool:
    return str(flush_policy) in ("every", "1", "always")


def _final_read_types() -> tuple[str, ...]:
    try:
        from checkers.queue.policy import POLICIES

        return tuple(sorted(POLICIES["final-read-deadline"]))
    except (ImportError, KeyError):
        return ("unseen",)


def choose(options: Mapping[str, Any], *, incomplete: bool = False) -> Policy:
    """The policy for a test's options (see the module docstring). `incomplete`: the harness
    stopped before the final read-back (killed), so acknowledged sends may never have been
    read: the queue checker's `final-read-deadline` allowance (unseen) is added."""
    workload = options.get("workload", "queue")
    acks = str(options.get("acks", "all"))
    min_isr = int(options.get("min_isr", 2) or 1)
    rf = int(options.get("rf", 3) or 1)
    nemesis = list(options.get("nemesis") or [])
    allowed: set[str] = set()
    reasons: list[str] = []
    names: list[str] = []
    if workload == "noop":
        return Policy("strict", [], ["the no-op workload has nothing to lose"])
    lossy = ("nonlinearizable",) if workload == "log" else _queue_lossy()
    if acks in ("1", "mixed"):
        allowed.update(lossy)
        names.append("acks1")
        reasons.append("acks=1: the leader acknowledges before followers have the record; a leader "
                       "failover may lose acknowledged writes")
    elif min(min_isr, rf) < 2:
        allowed.update(lossy)
        names.append("min-isr1")
        reasons.append(f"acks=all with min ISR {min(min_isr, rf)}: the ISR may shrink to the leader, which "
                       "then acknowledges alone; its failure loses the write")
    if "power-loss" in nemesis and not _flush_per_message(options.get("flush_policy")):
        allowed.update(lossy)
        names.append("power-loss-unflushed")
        reasons.append("power loss without a flush per message: acknowledged records may live only in "
                       "page caches that a simultaneous power loss of the replicas drops")
    if not names:
        reasons.append("acks=all with min ISR >= 2: no acknowledged write may be lost, no anomaly is allowed")
    if incomplete and workload == "queue":
        allowed.update(_final_read_types())
        names.append("final-read-deadline")
        reasons.append("the harness stopped before the final read-back: acknowledged sends may not have "
                       "been read yet (unseen is allowed; lost writes are not)")
    if options.get("safeguards_off"):
        reasons.append("safeguards switched off (" + ", ".join(options["safeguards_off"]) +
                       "): nothing more is allowed; the run is meant to find the bug they guard against")
    return Policy("+".join(names) or "strict", sorted(allowed), reasons)
