"""Cases, the expected-failures file and the table.

A suite run yields `Case`s (one test: passed, failed or skipped, with the suite's own
message). `expected-failures.txt` lists the tests allowed to fail, one a line:

    # suite        nodes  test (fnmatch pattern)                               reason
    kafka-python   *      test_admin_integration.py::test_delete_records         not yet implemented: DeleteRecords
    librdkafka     1      0098_consumer_txn                                      creates topics with replication factor 3

`nodes` is `*` or a cluster size. `compare_with_expected` splits failures into expected (with the file's
reason) and unexpected (with the suite's message), and lists expected failures that now
pass (so the file can be pruned), except entries whose reason starts with "flaky" (they
may pass). Only unexpected failures fail the job.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from pathlib import Path

PASSED, FAILED, SKIPPED = "passed", "failed", "skipped"
EXPECTED_FILE = Path(__file__).with_name("expected-failures.txt")


@dataclass(frozen=True)
class Case:
    """One test's outcome; `message` is the suite's reason for a failure or a skip."""

    test: str
    outcome: str
    message: str = ""


@dataclass
class SuiteRun:
    """One suite against one cluster. `error` says why it did not run at all (it then
    counts as an unexpected failure)."""

    suite: str
    nodes: int
    cases: list[Case] = field(default_factory=list)
    seconds: float = 0.0
    error: str | None = None
    logs: str = ""

    def count(self, outcome: str) -> int:
        return sum(c.outcome == outcome for c in self.cases)


@dataclass(frozen=True)
class Expectation:
    suite: str
    nodes: str  # "*" or a cluster size
    pattern: str
    reason: str

    def covers(self, suite: str, nodes: int, test: str) -> bool:
        return (self.suite == suite and self.nodes in ("*", str(nodes))
                and fnmatch.fnmatchcase(test, self.pattern))


def parse_expected(text: str, source: str = "expected-failures.txt") -> list[Expectation]:
    """The file's entries; ValueError naming the line for one without a reason."""
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split(None, 3)
        if len(parts) < 4:
            raise ValueError(f"{source}:{n}: want 'suite nodes test reason', got {line!r}")
        out.append(Expectation(*parts))
    return out


def load_expected(path: Path = EXPECTED_FILE) -> list[Expectation]:
    return parse_expected(path.read_text(), str(path))


def reason_for(expected: list[Expectation], suite: str, nodes: int, test: str) -> str | None:
    """The first matching entry's reason, or None when the test may not fail."""
    return next((e.reason for e in expected if e.covers(suite, nodes, test)), None)


@dataclass(frozen=True)
class Failure:
    suite: str
    nodes: int
    test: str
    reason: str
    expected: bool


@dataclass
class Verdict:
    failures: list[Failure]
    now_passing: list[tuple[str, int, str]]

    @property
    def unexpected(self) -> list[Failure]:
        return [f for f in self.failures if not f.expected]

    @property
    def exit_code(self) -> int:
        return 1 if self.unexpected else 0


def compare_with_expected(runs: list[SuiteRun], expected: list[Expectation]) -> Verdict:
    failures, now_passing = [], []
    for r in runs:
        if r.error is not None:
            failures.append(Failure(r.suite, r.nodes, "(suite)", r.error, False))
        for c in r.cases:
            reason = reason_for(expected, r.suite, r.nodes, c.test)
            if c.outcome == FAILED:
                failures.append(Failure(r.suite, r.nodes, c.test, reason or c.message or "failed",
                                        reason is not None))
            elif c.outcome == PASSED and reason is not None and not reason.startswith("flaky"):
                now_passing.append((r.suite, r.nodes, c.test))
    return Verdict(failures, now_passing)


def table(runs: list[SuiteRun], verdict: Verdict) -> str:
    """The summary (a Markdown table) and every failure with its reason."""
    lines = ["| suite | nodes | passed | failed (expected) | skipped | time |", "| --- | --- | --- | --- | --- | --- |"]
    for r in runs:
        exp = sum(f.expected for f in verdict.failures if (f.suite, f.nodes) == (r.suite, r.nodes))
        failed = r.count(FAILED) + (r.error is not None)
        lines.append(f"| {r.suite} | {r.nodes} | {r.count(PASSED)} | {failed} ({exp}) | {r.count(SKIPPED)} "
                     f"| {r.seconds:.0f} s |")
    for title, expected in (("Unexpected failures (regressions)", False), ("Expected failures", True)):
        rows = [f for f in verdict.failures if f.expected == expected]
        if rows:
            lines += ["", f"{title}:"]
            lines += [f"  {f.suite} @{f.nodes}  {f.test}: {one_line(f.reason)}" for f in rows]
    if verdict.now_passing:
        lines += ["", "Listed as expected failures but passed (prune expected-failures.txt):"]
        lines += [f"  {s} @{n}  {t}" for s, n, t in verdict.now_passing]
    return "\n".join(lines)


def one_line(text: str, limit: int = 200) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
