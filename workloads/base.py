"""What a workload is: topics to create, a client per process, generators, and a checker.

A `Workload` (contracts/protocols.py: queue, log and noop here, for every Kafka-wire system;
a system's own in its folder, e.g. suites/etcd/register.py) gives the runner:

- `topics() -> {name: partitions}` to create before the test;
- `send_lanes()`: client threads beyond `opts.concurrency_threads` (0 but for the queue workload, whose
  send-only processes keep `opts.in_flight` sends in flight);
- `client(thread, process, bootstrap) -> Client` (one per process; `harness.interpreter`
  opens a new one under a new process id after an `info`);
- `generator()` (the main phase, wrapped by the runner with rate and time limit) and
  `final_generator()` (after the heal: read everything back; None if nothing to do);
- `observe(event)`: every event of the whole test, whatever phase is current (the runner
  wraps the complete generator with it; phases only update the current phase);
- `summary()`: what the workload itself saw, for test.json's `workload_summary` (the queue
  workload: whether its final read-back read everything; {} for the others);
- `analyze(history_path, time_limit) -> WorkloadAnalysis`: its checker's raw result,
  `.result` (docs/ARCHITECTURE.md's checker result, `valid` false for any anomaly: what a run
  may lose is applied once, by checkers/verdict.py), and `.plots`, what the plots draw from
  (None: the history); `check(...)` is `analyze(...).result`;
- `checks_recovery`: whether its runs are also checked for liveness (`checkers.liveness`),
  composed with its checker by `harness.analysis` (`checkers.compose`).

`WorkloadOptions` holds every option a workload reads, recorded in test.json (the general
options and workloads/options.py's Kafka client options of the same names);
`BaseWorkload` gives a workload its options, its topics and keys, and the defaults above
(a workload writes `analyze`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from contracts.generator import Generator
from contracts.options import GeneralOptions
from contracts.protocols import Client
from workloads.kafka_clients import open_io
from workloads.kafka_io import MAX_IN_FLIGHT, KafkaIO
from workloads.options import KAFKA_DEFAULTS

GENERAL = GeneralOptions()


@dataclass
class WorkloadOptions:
    """Workload knobs (all recorded with the run). Those that are test options have the
    test option's name and default (contracts/options.py, workloads/options.py); the rest are
    the workload's own."""

    acks: str = KAFKA_DEFAULTS.acks  # "all" | "1" | "mixed" (per op, at random)
    client: str = KAFKA_DEFAULTS.client  # "confluent" | "kafka-python"
    topics: int = KAFKA_DEFAULTS.topics
    partitions: int = KAFKA_DEFAULTS.partitions
    request_timeout: float = GENERAL.request_timeout  # s a send/poll waits before it is indeterminate
    final_time_limit: float = GENERAL.final_time_limit  # s the final read-back may take at most
    recovery_time_limit: float = GENERAL.recovery_time_limit  # s after the final heal for a write and a read per key
    concurrency_threads: int = 5  # processes that assign, poll, send and crash (`--concurrency`, resolved)
    in_flight: int = KAFKA_DEFAULTS.in_flight  # send-only processes beside them, sharing producers (`--in-flight`)
    poll_ms: int = 200
    max_poll_records: int = 500
    assign_p: float = 1 / 32  # probability that an op re-assigns the consumer
    crash_p: float = 1 / 256  # probability that an op crashes the client (a new process follows)
    send_p: float = 0.5  # share of sends among sends and polls (of the consuming clients)
    txn_p: float = KAFKA_DEFAULTS.txn_p  # share of `txn` ops among the consuming clients' ops (> 0: transactional)
    idempotent: bool = True  # acks=all producers are idempotent; a system without it sets False (its factories)
    idempotence: bool = KAFKA_DEFAULTS.idempotence  # `--idempotence`: up to 5 requests in flight (kafka_io)

    @classmethod
    def from_test(cls, options: Mapping[str, Any]) -> WorkloadOptions:
        """The workload options of a test (test.json's `options`: fields of the same name;
        others ignored, missing ones default)."""
        wo = cls()
        for f in fields(cls):
            if options.get(f.name) is not None:
                setattr(wo, f.name, type(getattr(wo, f.name))(options[f.name]))
        return wo

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class WorkloadAnalysis:
    """A workload checker's answer: `result` (docs/ARCHITECTURE.md's checker result) and `plots`,
    the analysis the plots draw from (`checkers.queue.QueueAnalysis`), None to read the history."""

    result: dict[str, Any]
    plots: Any = None


class BaseWorkload:
    """What the workloads share: `opts`, `topics()` (`opts.topics` topics named
    `topic_prefix` + i, `opts.partitions` each; none without a prefix), `keys` (one per
    topic-partition), no final phase, no observer, an empty summary, no liveness check, and
    `check` from the workload's `analyze`."""

    name: str
    checker: str
    checks_recovery = False
    topic_prefix = ""

    def __init__(self, opts: WorkloadOptions | None = None):
        self.opts = opts or WorkloadOptions()
        self.keys = [key_of(t, p) for t in self.topics() for p in range(self.opts.partitions)]

    def topics(self) -> dict[str, int]:
        if not self.topic_prefix:
            return {}
        return {f"{self.topic_prefix}{i}": self.opts.partitions for i in range(self.opts.topics)}

    def send_lanes(self) -> int:
        """Client threads the workload wants beyond `opts.concurrency_threads` (threads from there on run
        only sends); the runner starts `concurrency_threads + send_lanes()` threads."""
        return 0

    def final_generator(self) -> Generator | None:
        return None

    def observe(self, event: Mapping[str, Any]) -> None:
        return None

    def summary(self) -> dict[str, Any]:
        return {}

    def analyze(self, history_path: Path, time_limit: float | None = None) -> WorkloadAnalysis:
        raise NotImplementedError(f"workload {self.name} has no checker")

    def check(self, history_path: Path, time_limit: float | None = None) -> dict[str, Any]:
        """The checker's raw result (`analyze(...).result`)."""
        return self.analyze(history_path, time_limit).result

    def client(self, thread: int, process: int, address: str) -> Client:
        raise NotImplementedError(f"workload {self.name} has no client")

    def io_factory(self, process: int, bootstrap: str, transactional_id: str | None = None,
                   group: str | None = None) -> Callable[[str], KafkaIO]:
        """`acks -> KafkaIO` for the client of `process`: the test's client library and timeout
        (a transactional producer and read_committed consumer with `transactional_id`; the
        consumer in `group` when given)."""
        o = self.opts
        extra: dict[str, Any] = {} if transactional_id is None else {"transactional_id": transactional_id}
        if group is not None:
            extra["group"] = group
        return lambda acks: open_io(o.client, bootstrap, acks=acks, timeout=o.request_timeout,
                                    client_id=f"p{process}", idempotent=o.idempotent,
                                    in_flight=in_flight(o), **extra)


def in_flight(o: WorkloadOptions) -> int:
    """Requests a producer keeps in flight per connection: 5 with `--idempotence` (as
    applications run idempotent producers: the broker must order and deduplicate retried
    batches, KIP-98), else 1."""
    return MAX_IN_FLIGHT if o.idempotence and o.idempotent else 1


def key_of(topic: str, partition: int) -> str:
    """The history key naming one topic-partition: "topic-partition" (as Kafka prints it)."""
    return f"{topic}-{partition}"


def split_key(key: str) -> tuple[str, int]:
    """(topic, partition) of a key made by `key_of`."""
    topic, _, p = key.rpartition("-")
    if not topic or not p.isdigit():
        raise ValueError(f"bad key {key!r} (expected topic-partition)")
    return topic, int(p)
