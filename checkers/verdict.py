"""The verdict of a run, decided in one place.

`judge(parts, policy, *, run_error=None) -> Verdict` turns the raw results of a run's checkers
and the run's loss rules into valid / invalid / unknown, with the rules it applied. Every
caller that needs a verdict calls it: the analysis of a run (harness/analysis.py), the
pipeline's checks on Spark, `wrack check`; campaigns, reports and explanations read its result.

Raw results: each checker answers `valid` false for any anomaly it found, "unknown" when it
could not decide (and `complete: false` when it did not read everything, e.g. its time limit),
else true; a part that says `"checked": false` did not judge the run and does not vote.
The loss rules are a `checkers.policy.Policy` (picked by the system under test,
`SystemUnderTest.loss_rules`: one table, checkers/queue/policy.py's `ALLOWANCES`, says what
each pick allows and why).

1. An anomaly type is allowed when a pick allows it in every partition it was found in (a
   pick with `keys` covers those partitions only: elsewhere the protocol's promise held, and
   the same type is a bug there).
2. A part is invalid if it found a type not allowed, or answered false naming no type; else
   unknown if it answered unknown or was not complete; else valid.
3. The run's verdict merges its parts' (false > unknown > true, checkers/compose.py).
4. A run that ended in an error (the harness aborted it) proves nothing: valid becomes unknown.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from checkers.compose import UNKNOWN, anomaly_types, merge_valid
from checkers.policy import Policy
from checkers.queue.policy import type_order


@dataclass
class Verdict:
    """`valid`, the anomaly types allowed and those that were not, the types allowed only in
    other partitions than where they were found (`outside`), and the rules applied, in words."""

    valid: Any
    allowed: list[str]
    bad_anomaly_types: list[str]
    outside: dict[str, list[str]] = field(default_factory=dict)
    rules: list[str] = field(default_factory=list)

    def write_into(self, results: dict[str, Any], policy: Policy) -> dict[str, Any]:
        """`results` (results.json's top) with this verdict: valid, allowed, bad_anomaly_types,
        first_bad_anomaly_time (the earliest of `anomaly_times`, when each type was first
        witnessed, over the types not allowed; None if none has one), policy
        (`Policy.to_dict`, with `outside_allowed_partitions`) and verdict_rules."""
        results["valid"] = self.valid
        results["allowed"] = self.allowed
        results["bad_anomaly_types"] = self.bad_anomaly_types
        times = results.get("anomaly_times") or {}
        results["first_bad_anomaly_time"] = min((times[t] for t in self.bad_anomaly_types if t in times), default=None)
        results["policy"] = policy.to_dict()
        if self.outside:
            results["policy"]["outside_allowed_partitions"] = self.outside
            results["policy"]["reasons"].append(
                "found where the protocol's promise held: "
                + "; ".join(f"{t} in {', '.join(ks)}" for t, ks in sorted(self.outside.items())))
        results["verdict_rules"] = self.rules
        return results


def _part_valid(part: Mapping[str, Any], bad: set[str]) -> Any:
    """One part's verdict once the allowed types are set aside (rule 2)."""
    types = anomaly_types(part)
    raw = part.get("valid")
    if any(t in bad for t in types) or (raw is False and not types):
        return False
    if raw == UNKNOWN or part.get("complete") is False:
        return UNKNOWN
    return True


def judge(parts: Mapping[str, Mapping[str, Any]], policy: Policy | None = None, *,
          run_error: str | None = None) -> Verdict:
    """The verdict of a run's checker results `parts` (name -> raw result) under `policy`
    (None: nothing allowed); see the module docstring."""
    policy = policy or Policy()
    allowed = policy.allowed
    keys: dict[str, dict[str, Any]] = {}
    found: list[str] = []
    for part in parts.values():
        found += [t for t in anomaly_types(part) if t not in found]
        for t, per_key in (part.get("anomaly_keys") or {}).items():
            keys.setdefault(t, {}).update(per_key)
    outside = policy.outside(keys)
    bad = {t for t in found if t not in allowed or t in outside}
    rules = [policy.rule]
    valid = merge_valid(_part_valid(p, bad) for p in parts.values() if p.get("checked") is not False)
    if run_error and valid is True:
        valid = UNKNOWN
        rules.append(f"the run ended in an error ({run_error}): a run the harness aborted proves nothing")
    if outside:
        rules.append("allowed only where the rule's partitions are: " +
                     "; ".join(f"{t} also in {', '.join(ks)}" for t, ks in sorted(outside.items())))
    return Verdict(valid, [t for t in allowed if t not in outside], sorted(bad, key=type_order), outside, rules)
