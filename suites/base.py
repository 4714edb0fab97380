"""What every system under test shares: `Suite`, the defaults of contracts/protocols.py's
`SystemUnderTest`, and `RunFacts`, what a run's loss rules read.

A system's folder (suites/NAME/) makes one `Suite` subclass and an instance `SUITE`, listed by
name in suites/__init__.py. It sets `name`, `summary`, `option_groups`, `workloads` and
`default_workload`, and writes `make_db` and `fault_packages`; the rest has defaults here:
no options of its own to check, a name from the system, workload and faults, the DB's leader
as the only role target (`nemesis.targets.LeaderMetadata`), nothing to prepare before the
workload, no cluster observer, the loss rules that allow nothing, no explanation, no report section,
cause line or coverage note of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from checkers.policy import Policy
from contracts import store
from contracts.protocols import DB, FaultPackage, Workload
from nemesis.targets import LeaderMetadata


@dataclass
class RunFacts:
    """What happened in one run, as its loss rules read it: `options` (test.json's), the
    history's nemesis events in order (None: unknown, so no fault may allow anything), the
    workload's keys, whether the harness stopped before the final read-back (`incomplete`),
    and the run folder with its test.json record (for a system's own node logs)."""

    options: Mapping[str, Any]
    events: Sequence[Mapping[str, Any]] | None = None
    keys: Sequence[str] = ()
    incomplete: bool = False
    run_dir: Path | None = None
    test: Mapping[str, Any] = field(default_factory=dict)


class Suite:
    """Defaults for a system under test (module docstring); subclasses fill in the rest."""

    name = ""
    summary = ""
    option_groups: Sequence[type] = ()
    workloads: Mapping[str, Callable[[Mapping[str, Any]], Workload]] = {}
    default_workload = ""
    default_mix: Sequence[str] = ()

    def validate(self, options: Any) -> None:
        """Raise contracts.errors.InputError naming the first bad option of this system's own."""

    def test_name(self, options: Any) -> str:
        faults = "+".join(options.nemesis) or "nofaults"
        return store.safe_name("-".join([self.name, options.workload or self.default_workload, faults]))

    def make_db(self, options: Any, cluster: Any) -> DB:
        raise NotImplementedError

    def metadata(self, db: DB, cluster: Any, timeout: float = 5.0) -> Any:
        """Where role targets and the observer read the cluster's state: the DB's leader."""
        return LeaderMetadata([n.address for n in cluster.nodes], db.leader_address)

    def fault_packages(self, topics: Mapping[str, int]) -> tuple[dict[str, Callable[[], FaultPackage]], Sequence[str]]:
        """The packages `--nemesis` may name (name -> a fresh package), and what `mix` stands for."""
        raise NotImplementedError

    def prepare_workload(self, db: DB, workload: Workload, options: Any) -> None:
        """After the DB serves, before the workload starts (e.g. create its topics)."""

    def observer(self, db: DB, cluster: Any, history: Any) -> Any | None:
        """A cluster-state observer to run beside the workload (nemesis/observer.py), or None."""
        return None

    def loss_rules(self, facts: RunFacts) -> Policy:
        """What this run may lose, with the rules and reasons (checkers/policy.py); strict here."""
        return Policy(notes=[f"{self.name}: no rule allows an anomaly"])

    def explain(self, run_dir: Path, results: Mapping[str, Any], test: Mapping[str, Any]) -> dict[str, Any] | None:
        """Why each anomaly happened, from the system's own logs (results.json `explanations`), or None."""
        return None

    def report_sections(self, results: Mapping[str, Any], test: Mapping[str, Any]) -> list[str]:
        """The system's own sections of report.html, as trusted HTML (rendered with autoescape)."""
        return []

    def cause(self, results: Mapping[str, Any], test: Mapping[str, Any]) -> str | None:
        """The one-line cause of an invalid run the report leads with (e.g. the rule or
        safeguard its explanations match), or None (the report words one from the anomalies)."""
        return None

    def coverage_notes(self, results: Mapping[str, Any], test: Mapping[str, Any],
                       played: Mapping[str, int]) -> list[tuple[str, bool]]:
        """What the report's coverage must say beyond the generic counts, as (text, missed)
        pairs, e.g. that the fault meant to trigger a switched-off safeguard's bug never played
        (`played`: package -> actions played, from schedule.json); `missed` true makes a valid
        verdict say that it may have missed its bug."""
        return []

    def make_workload(self, name: str, options: Mapping[str, Any]) -> Workload:
        """The workload `name` of this system, built from test.json-style `options` (ValueError if unknown)."""
        if name not in self.workloads:
            raise ValueError(f"{name} does not run on --db {self.name} (its workloads: {', '.join(self.workloads)})")
        return self.workloads[name](options)
