"""The no-op workload: clients that answer `ok` at once, without any broker.

It measures the harness itself (bench/harness.py: ops/s the interpreter records, time
spent outside the workload window) and exercises the runner's lifecycle on clusters whose
broker speaks no Kafka. Its checker only checks the history's shape: every op completed
`ok` and every invoke was completed.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from contracts import generator as gen
from contracts.generator import Generator
from contracts.history import read_ops
from workloads.base import BaseWorkload, WorkloadAnalysis


class NoopClient:
    def invoke(self, op: Mapping[str, Any]) -> dict[str, Any]:
        return {"type": "ok", "value": op.get("value")}

    def close(self) -> None:
        pass


class NoopWorkload(BaseWorkload):
    """No topics, no final phase, no summary (BaseWorkload's defaults)."""

    name = "noop"
    checker = "shape"

    def client(self, thread: int, process: int, bootstrap: str) -> NoopClient:
        return NoopClient()

    def generator(self) -> Generator:
        return gen.repeat({"f": "noop"})

    def analyze(self, history_path: Path, time_limit: float | None = None) -> WorkloadAnalysis:
        """The history's shape: every op `ok` (a `fail` is a `not-ok` anomaly)."""
        counts: dict[str, int] = {}
        bad = []
        for op in read_ops(history_path):
            counts[op.type] = counts.get(op.type, 0) + 1
            if op.type == "fail" and len(bad) < 10:
                bad.append({"explanation": f"no-op {op.index} of process {op.process} failed",
                            "ops": [op.index]})
        anomalies = {"not-ok": bad} if bad else {}
        return WorkloadAnalysis({"valid": not bad, "anomaly_types": sorted(anomalies), "anomalies": anomalies,
                                 "anomaly_counts": {"not-ok": counts.get("fail", 0)} if bad else {},
                                 "stats": {"ops": counts}})
