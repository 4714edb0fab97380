"""A run's loss rules as the verdict reads them: which named allowances apply, why, and where.

A system under test decides what one run may lose (`SystemUnderTest.loss_rules`, e.g.
suites/wrack/rules.py from the run's configuration and fault history); it answers with a
`Policy`: the `Pick`s of named allowances (checkers/queue/policy.py's `ALLOWANCES`: one table
says what each allows and why), each with the rule that made it, its reason, the fault events
behind it and, when it covers only some partitions, which (`keys`), plus `notes` for rules that
allow nothing. The one verdict (checkers/verdict.py) applies it; the report and the
explanations show it (`to_dict`, results.json's `policy`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


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
    durability: Any = None  # the system's count of lossy shutdowns, when its rule applied (`to_dict()`)
    strict_rule: str = "strict"  # the rule in one line when no pick allows anything

    @property
    def name(self) -> str:
        """The picks' names joined with `+`, or `strict`."""
        return "+".join(p.name for p in self.picks) or "strict"

    @property
    def names(self) -> list[str]:
        """The named allowances picked (checkers/queue/policy.py's table)."""
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
        """Which rules applied, in one line (`strict_rule` when none allows anything)."""
        if self.picks:
            return "; ".join(f"{p.rule} -> {p.name}" for p in self.picks)
        return self.strict_rule

    def to_dict(self) -> dict[str, Any]:
        """results.json's `policy`: name, rule, allowed, reasons (one line per pick, then the
        notes), notes, `policies` (each pick with its rule, reason, what it allows and its fault
        events) and `durability` (the system's lossy-shutdown count, e.g. suites/wrack/lossy.py, or null)."""
        return {"name": self.name, "rule": self.rule, "allowed": self.allowed, "reasons": self.reasons,
                "notes": self.notes,
                "policies": [{"name": p.name, "rule": p.rule, "reason": p.reason, "allows": p.allows,
                              "events": p.events, "keys": p.keys} for p in self.picks],
                "durability": None if self.durability is None else self.durability.to_dict()}
