"""Jepsen's small protocols, declared once: DB, Client, Checker, Workload, FaultPackage and the
system under test that ties them together (docs/ARCHITECTURE.md "Protocols").

Each is a `typing.Protocol`: a class meets it by having the methods, not by inheriting. The
floors above implement them (clusters/db.py's `ServiceDB` is a DB; workloads/ hold Kafka-wire
workloads; nemesis/schedule.py's `FaultPackage` is a fault package; each folder of suites/ is a
system under test) and the generic harness (harness/runner.py, harness/analysis.py) reads them
only through these methods, never by a system's name.

- `DB` (Jepsen's jepsen.db/DB with its Process, Pause and LogFiles parts): a system's lifecycle
  on one node, plus the few cluster-wide questions a test asks of it.
- `Client` (jepsen.client/Client): runs one op, answers its completion.
- `Checker` (jepsen.checker/Checker): one run's inputs -> a result with at least `valid`.
- `Workload`: a generator of ops, a client per process, a final generator, and its checker.
- `FaultPackage` (jepsen.nemesis.combined's packages): a fault's generator (start/stop), its
  final ops and the colour of its windows in plots.
- `SystemUnderTest`: what `--db NAME` names (suites/__init__.py's registry).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol


class DB(Protocol):
    """A system under test on the nodes of one cluster. `start` returns once the process runs,
    `wait_ready` once it accepts clients; `kill`/`pause`/`resume` never wait for its
    cooperation; all are safe where it is not running."""

    def setup(self, node: Any) -> None: ...
    def start(self, node: Any) -> int: ...
    def stop(self, node: Any) -> None: ...
    def kill(self, node: Any) -> None: ...
    def pause(self, node: Any) -> None: ...
    def resume(self, node: Any) -> None: ...
    def running(self, node: Any) -> bool: ...
    def wipe(self, node: Any) -> None: ...
    def teardown(self, node: Any) -> None: ...
    def collect(self, node: Any, run_dir: Any, data: bool = True) -> Path: ...
    def wait_ready(self, node: Any, timeout: float = 30.0) -> None: ...
    def start_all(self, timeout: float = 60.0) -> None: ...
    def client_address(self, node: Any) -> str: ...
    def leader_address(self) -> str | None: ...


class Client(Protocol):
    """One client of one process: `invoke(op)` runs the op and returns its completion
    (`{"type": "ok" | "fail" | "info", "value": ..., "error": ...}`); `close()` frees it."""

    def invoke(self, op: Mapping[str, Any]) -> dict[str, Any]: ...
    def close(self) -> None: ...


class Checker(Protocol):
    """`check(run) -> result` (docs/ARCHITECTURE.md's checker result, at least `valid`); `run`
    is what harness/analysis.py hands every checker of a run (checkers/compose.py's `Run`)."""

    def check(self, run: Any) -> dict[str, Any]: ...


class Workload(Protocol):
    """What a test runs: `generator()` for the main phase, `final_generator()` after the heal
    (None: nothing), `client(thread, process, address)` per process, `observe(event)` for every
    event of the test, `summary()` for test.json, `send_lanes()` threads beyond the
    concurrency, `topics()` to create (empty for a system without topics), and `analyze`, its
    checker (raw verdict: the one verdict, checkers/verdict.py, applies the loss rules)."""

    name: str
    checker: str  # the checker's name (results.json's `checker`)
    checks_recovery: bool  # also checked for liveness (checkers/liveness.py)
    keys: list[str]

    def topics(self) -> dict[str, int]: ...
    def send_lanes(self) -> int: ...
    def client(self, thread: int, process: int, address: str) -> Client: ...
    def generator(self) -> Any: ...
    def final_generator(self) -> Any | None: ...
    def observe(self, event: Mapping[str, Any]) -> None: ...
    def summary(self) -> dict[str, Any]: ...
    def analyze(self, history_path: Path, time_limit: float | None = None) -> Any: ...


class FaultPackage(Protocol):
    """A fault as Jepsen's combined packages bring it: `start(rng)` a fault op, `stop` its undo
    (None for an instant), `final` the ops that end it for good, `color` its windows' colour in
    plots, `prepare(nemesis)` the node-side machinery it needs before the DB starts (or None)."""

    name: str
    start: Callable[[random.Random], Any]
    stop: Any
    final: list[Any]
    color: str
    prepare: Callable[[Any], Any] | None


class SystemUnderTest(Protocol):
    """One system the harness can test (`--db NAME`), a folder of suites/: its options, DB,
    workloads, faults, loss rules and report sections. The generic floors call only these."""

    name: str
    summary: str  # one line for --help
    option_groups: Sequence[Any]  # contracts.options fragments it takes (dataclasses of `opt` fields)
    workloads: Mapping[str, Callable[[Any], Workload]]  # name -> factory(WorkloadOptions)
    default_workload: str

    def validate(self, options: Any) -> None: ...  # InputError naming the flag
    def test_name(self, options: Any) -> str: ...
    def make_db(self, options: Any, cluster: Any) -> DB: ...
    def metadata(self, db: DB, cluster: Any, timeout: float = 5.0) -> Any: ...  # role targets' source
    def fault_packages(self, topics: Mapping[str, int]) -> tuple[dict[str, Callable[[], FaultPackage]], Sequence[str]]: ...
    def prepare_workload(self, db: DB, workload: Workload, options: Any) -> None: ...
    def observer(self, db: DB, cluster: Any, history: Any) -> Any | None: ...
    def loss_rules(self, options: Mapping[str, Any], facts: Any) -> Any: ...  # checkers.policy.Policy
    def explain(self, run_dir: Path, results: Mapping[str, Any], test: Mapping[str, Any]) -> dict[str, Any] | None: ...
