"""The options of one test (`wrack test`, `wrack demo`, campaign cells): `TestOptions`.

Apart from `harness.runner` (which runs a test with them) so that the command line can read
their defaults for its parsers without importing the runner and everything it drives: every
`wrack` start builds those parsers (harness/cli.py).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class TestOptions:
    """Every option of `wrack test` (recorded in test.json as `options`)."""

    name: str | None = None
    backend: str = "local"
    nodes: int = 5
    workload: str = "queue"
    nemesis: list[str] = field(default_factory=lambda: ["mix"])  # harness.faults.DEFAULT_MIX, rotated
    nemesis_interval: float = 10.0
    acks: str = "all"
    rf: int = 3
    min_isr: int = 2
    partitions: int = 2
    topics: int = 2
    flush_policy: str = "none"  # "none" (the OS writes back), "every" (fsync each message), or N messages
    safeguards_off: list[str] = field(default_factory=list)
    unclean_election: bool = False  # unclean.leader.election.enable=true: a configuration, policy-allowed loss
    time_limit: float = 60.0
    rate: float = 5000.0
    concurrency: str = "1n"
    in_flight: int = 64  # queue workload: send-only processes beside the --concurrency clients
    test_count: int = 1
    seed: int | None = None
    client: str = "confluent"
    request_timeout: float = 5.0
    final_time_limit: float = 15.0
    recovery_time_limit: float = 30.0  # s after the final heal for every key to take a write and a read
    checker_time_limit: float | None = 120.0
    transport: str = "nsenter"
    inventory: str | None = None
    controllers: int | None = None  # controller quorum voters (None: default_controllers(nodes))
    broker_command: list[str] | None = None
    collect_data: bool = True
    results: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
