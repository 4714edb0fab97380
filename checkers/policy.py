"""The expected-anomaly policy: which of the checker's named policies a run gets.

`choose(options, events=...) -> Policy` is a pure function of the test options and the
history's nemesis events (fault events and `cluster-state` observations). It only picks
*names*; what each name allows is defined once, by the queue checker's
`checkers.queue.POLICIES` (docs/checkers-queue.md, "Policies"). Every pick carries the rule
that made it, the reason, and the fault events behind it; the report shows them, and
`allowed` (the union) is what the checker is given.

Loss is allowed only where the protocol makes no promise (reasoning in docs/harness.md,
"Expected-anomaly policy"):
- acks=1 (or a per-op mix) -> `acks1`: a leader acknowledges before any follower has the
  record, and a failover truncates acknowledged records nobody could read yet;
- min ISR < 2 (or RF 1) -> `min-isr1`: the ISR may shrink to the leader, which then
  acknowledges and commits alone; losing its copy loses records consumers read;
- unclean leader election on (`--unclean-election`) -> `unclean-election`: an out-of-sync
  replica may be elected, truncating committed records (as with min ISR 1);
- more lossy shutdowns of one partition's replicas at once than min.insync.replicas - 1
  (seed 002, 5.1-5.2: the ELR's bound; counted by `checkers.lossy` from the fault events and
  the observed ISRs) -> `power-loss-unflushed`, for those partitions only: the pick names
  the partitions (`keys`) and the events that exceeded the bound, and `Policy.outside`
  finds the anomalies of other partitions, which the run's verdict does not allow;
- the harness stopped before the final read-back (killed) -> `final-read-deadline`;
- otherwise `strict`: nothing. Power loss of at most min.insync.replicas - 1 replicas of
  each partition at a time, a flush per message, corruption or a wipe of one replica: strict.
Switching a broker safeguard off allows nothing more: finding the bug it guards against is
the point of such a run.

Other checkers have one loss verdict instead of the queue checker's types: for the log
workload (linearizability) every policy that admits lost writes (`LOSSY_POLICIES`) allows
`nonlinearizable`, the others nothing. etcd's register workload gets nothing: etcd promises
linearizable operations (its serializable reads excepted, which the checker must catch).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from checkers.lossy import Durability, Loss, durability
from checkers.queue.policy import LOSSY_POLICIES, POLICIES

LINEARIZABLE_LOSS = "nonlinearizable"
LOSSY_SHUTDOWNS = "power-loss-unflushed"  # the named policy for a partition over the ELR's bound
SHOWN = 10  # lossy shutdowns named in a note (all of them are in `durability`)


@dataclass
class Pick:
    """One named policy of the checker, the rule that picked it, why, and the fault events
    that made it so (as `Loss.to_dict`; empty for rules of the configuration alone)."""

    name: str
    reason: str
    allows: list[str]
    rule: str = "configuration"
    events: list[dict[str, Any]] = field(default_factory=list)
    keys: list[str] | None = None  # the partitions it covers (None: all)


@dataclass
class Policy:
    picks: list[Pick] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # reasons that allow nothing (strict, safeguards)
    durability: Durability | None = None  # the lossy-shutdown count, when the rule applied

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

    def outside(self, anomaly_keys: Mapping[str, Mapping[str, int]]) -> dict[str, list[str]]:
        """{type: partitions}: anomaly types the picks allow only for some partitions (a
        partition over the ELR's bound), found in others, where the protocol's promise held."""
        out = {}
        for kind, per_key in anomaly_keys.items():
            picks = [p for p in self.picks if kind in p.allows]
            if not picks or any(p.keys is None for p in picks):
                continue
            covered = {k for p in picks for k in p.keys or ()}
            if missed := sorted(k for k in per_key if k not in covered):
                out[kind] = missed
        return out

    @property
    def reasons(self) -> list[str]:
        return [f"{p.name}: {p.reason}" for p in self.picks] + self.notes

    @property
    def rule(self) -> str:
        """Which rules applied, in one line (`strict` when none allows anything, with the ELR's
        bound named when lossy shutdowns stayed within it)."""
        if self.picks:
            return "; ".join(f"{p.rule} -> {p.name}" for p in self.picks)
        if self.durability is not None and self.durability.losses:
            return "strict: lossy shutdowns within min ISR - 1 per partition"
        return "strict"

    def to_dict(self) -> dict[str, Any]:
        """results.json's `policy`: name, rule, allowed, reasons (one line per pick, then the
        notes), notes, `policies` (each pick with its rule, reason, what it allows and its fault
        events) and `durability` (`checkers.lossy.Durability.to_dict`, or null)."""
        return {"name": self.name, "rule": self.rule, "allowed": self.allowed, "reasons": self.reasons,
                "notes": self.notes,
                "policies": [{"name": p.name, "rule": p.rule, "reason": p.reason, "allows": p.allows,
                              "events": p.events, "keys": p.keys} for p in self.picks],
                "durability": None if self.durability is None else self.durability.to_dict()}


def _flush_per_message(flush_policy: Any) -> bool:
    return str(flush_policy) in ("every", "1", "always")


def _types(checker: str, name: str) -> list[str]:
    """What policy `name` allows in the terms of `checker`'s anomaly types."""
    if checker == "queue":
        return sorted(POLICIES[name])
    return [LINEARIZABLE_LOSS] if name in LOSSY_POLICIES else []


def _configuration(options: Mapping[str, Any], isr: int) -> list[tuple[str, str, str]]:
    """(name, rule, reason) of the picks the configuration alone makes."""
    acks = str(options.get("acks", "all"))
    out = []
    if acks in ("1", "mixed"):
        out.append(("acks1", f"acks={acks}", f"acks={acks}: the leader acknowledges a record before any "
                    "follower has it, so a leader failover truncates acknowledged records that no consumer "
                    "could read yet (they were above the high watermark)"))
    if isr < 2:
        out.append(("min-isr1", f"min ISR {isr}", f"min ISR {isr}: the ISR may shrink to the leader, which then "
                    "acknowledges and commits records alone; losing its copy loses records consumers have read"))
    if float(options.get("txn_p") or 0) > 0:
        out.append(("txn", "txn ops", "txn ops (--txn-p): Kafka transactions do not isolate writes, so sends of "
                    "concurrent transactions interleave within one (int-send-skip) and their write order can "
                    "form cycles (G0)"))
    if options.get("unclean_election"):
        out.append(("unclean-election", "unclean election on", "unclean leader election on "
                    "(--unclean-election): an out-of-sync replica may be elected and the others truncate to "
                    "it, losing records consumers have read"))
    return out


def _describe(x: Loss) -> str:
    return f"{x.node} by {x.f} (event {x.index} at {x.time / 1e9:.2f} s)"


def _exceeded_reason(d: Durability) -> str:
    groups: dict[tuple[tuple[int, str], ...], list[str]] = {}  # partitions over the bound by the same events
    for k, v in sorted(d.exceeded.items()):
        groups.setdefault(tuple((x.index, x.node) for x in v), []).append(k)
    parts = []
    for keys in groups.values():
        v = d.exceeded[keys[0]]
        parts.append(f"{', '.join(keys)}: {len(v)} replicas lost data at once ({'; '.join(map(_describe, v))})")
    how = ("per the observed ISRs" if d.observed else
           "no ISR observations: counted only while the earlier ones could not have rejoined")
    return (f"more lossy unclean shutdowns of one partition's replicas at once than min.insync.replicas-1 = "
            f"{d.bound}, so the protocol promises nothing for them (seed 002, 5.1.2) ({how}): "
            + " | ".join(parts) + ". The allowance covers those partitions only: the same anomaly in "
            "another partition is not allowed")


def _within_note(d: Durability) -> str:
    hit = ", ".join(f"{k}: {n}" for k, n in sorted(d.peak.items())) or "none"
    how = "" if d.observed else (" (no ISR observations: a replica counts as back once it could have "
                                 "rejoined, which never hides a bug)")
    listed = "; ".join(map(_describe, d.losses[:SHOWN]))
    if len(d.losses) > SHOWN:
        listed += f"; and {len(d.losses) - SHOWN} more"
    return (f"{len(d.losses)} lossy unclean shutdown(s) ({listed}); at most "
            f"{max(d.peak.values(), default=0)} replica(s) of a partition lost data at once (per partition: "
            f"{hit}), within min.insync.replicas-1 = {d.bound}{how}: with acks=all the ELR promises no "
            "acknowledged write is lost")


def choose(options: Mapping[str, Any], *, incomplete: bool = False,
           events: Sequence[Mapping[str, Any]] | None = None, keys: Sequence[str] = (),
           isr_changes: Sequence[Mapping[str, Any]] = ()) -> Policy:
    """The policy of a run (see the module docstring). `events`: the history's nemesis events in
    order (None: unknown, so no fault event allows anything); `keys`: the workload's partitions;
    `isr_changes`: the controller's ISR changes from the nodes' logs (`checkers.lossy.durability`);
    `incomplete`: the harness stopped before the final read-back (killed), so acknowledged sends
    may never have been read."""
    workload = options.get("workload", "queue")
    if workload == "noop":
        return Policy(notes=["the no-op workload has nothing to lose"])
    if workload == "register":
        return Policy(notes=["etcd promises linearizable reads, writes and compare-and-set on every key "
                             "(serializable reads are not: their stale reads are reported): no anomaly is allowed"])
    checker = "linearizable" if workload == "log" else "queue"
    isr = min(int(options.get("min_isr", 2) or 1), int(options.get("rf", 3) or 1))
    picks = [Pick(n, why, _types(checker, n), rule) for n, rule, why in _configuration(options, isr)]
    notes = []
    d = None
    if events is not None:
        d = durability(events, min_isr=isr, nemesis=list(options.get("nemesis") or []),
                       flush_every=_flush_per_message(options.get("flush_policy")), keys=keys,
                       all_hold_all=int(options.get("rf", 3) or 1) >= int(options.get("nodes", 5) or 1),
                       isr_changes=isr_changes)
        if d.exceeded and isr >= 2:
            evs = sorted({x.index: x for v in d.exceeded.values() for x in v}.values(), key=lambda x: x.index)
            picks.append(Pick(LOSSY_SHUTDOWNS, _exceeded_reason(d), _types(checker, LOSSY_SHUTDOWNS),
                              "more concurrent lossy shutdowns than min ISR - 1 in " + ", ".join(sorted(d.exceeded)),
                              [x.to_dict() for x in evs], keys=sorted(d.exceeded)))
        elif d.losses and isr >= 2:
            notes.append(_within_note(d))
    if incomplete and checker == "queue":
        picks.append(Pick("final-read-deadline", "the harness stopped before the final read-back: acknowledged "
                          "sends may not have been read yet", _types(checker, "final-read-deadline"),
                          "final read not done"))
    if not picks:
        notes.append("acks=all with min ISR >= 2, no unclean election, no partition over the ELR's bound of "
                     "lossy shutdowns: no acknowledged write may be lost, no anomaly is allowed")
    if options.get("safeguards_off"):
        notes.append("safeguards switched off (" + ", ".join(options["safeguards_off"]) +
                     "): nothing more is allowed; the run is meant to find the bug they guard against")
    return Policy(picks, notes, d)
