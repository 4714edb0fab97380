"""The options of one test, declared once: `TestOptions` and its spec.

Every option is a field of `TestOptions` whose metadata (`opt(...)`) gives its help text, its
command-line flag and how a text value (a flag's argument, a campaign file's value) becomes
the field's value. From this one table come:

- `wrack test` / `wrack demo`'s flags (`harness.cmd_test.add_test_options`, `from_args`);
- a campaign file's option keys (`from_mapping`: the field name, with `-` or `_`, or the
  flag's name);
- the workload's options (`workloads.base.WorkloadOptions` takes its shared defaults from
  `DEFAULTS` and its values from the test options of the same name);
- the options table in docs/harness.md (`markdown_table`; tests/test_options.py checks it).

test.json records `to_dict()` as `options`. Checks that need the registries (workload,
backend, nemesis and safeguard names) are the runner's (`harness.runner.validate`).
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping
from dataclasses import MISSING, Field, asdict, dataclass, field, fields
from typing import Any

from contracts.errors import InputError


def _csv(v: str | list[str]) -> list[str]:
    """`a,b` (or a list) -> ["a", "b"]; `none` (or nothing) -> []."""
    items = v.split(",") if isinstance(v, str) else [str(x) for x in v]
    return [x.strip() for x in items if x.strip() and x.strip() != "none"]


def _command(v: str | list[str]) -> list[str]:
    """A shell-quoted command line (or a list of words) -> its words."""
    return shlex.split(v) if isinstance(v, str) else [str(x) for x in v]


def acks_name(s: Any) -> str:
    """An acks setting as the harness names it: "-1" is "all", anything else its text."""
    return {"-1": "all"}.get(str(s), str(s))


def opt(default: Any = MISSING, help: str = "", *, factory: Callable[[], Any] | None = None,
        parse: Callable[[str], Any] | None = None, flag: str | None = None, metavar: str | None = None,
        choices: tuple[str, ...] = (), repeat: bool = False, invert: bool = False) -> Any:
    """A `TestOptions` field with its spec: `parse` turns a text value into the field's value
    (default: the field's type); `flag` is the command-line flag (default `--field-name`);
    `repeat`: the flag may be given more than once (a list); `invert`: a boolean field whose
    flag switches it off (`--no-data` for `collect_data`)."""
    meta = {"help": help, "parse": parse, "flag": flag, "metavar": metavar, "choices": choices,
            "repeat": repeat, "invert": invert}
    if factory is not None:
        return field(default_factory=factory, metadata=meta)
    return field(default=default, metadata=meta)


@dataclass
class TestOptions:
    """Every option of one test (recorded in test.json as `options`)."""

    name: str | None = opt(None, "test name (default: from workload, acks and faults)")
    backend: str = opt("local", "where nodes come from: local, docker or ssh")
    nodes: int = opt(5, "number of nodes")
    db: str = opt("wrack", "the system under test: wrack (the project's Kafka-compatible broker) or etcd",
                  choices=("wrack", "etcd"))
    workload: str | None = opt(None, "queue, log or noop for wrack (default queue); register for etcd (its "
                                     "default)")
    nemesis: list[str] = opt(
        factory=lambda: ["mix"], parse=_csv, metavar="LIST",
        help="comma list of fault packages: mix (the fault stories and generic faults in rotation with "
             "fault-free periods), partition, kill, pause, restart, rolling-restart, kill-leader, "
             "partition-leader, kill-controller, partition-controller, power-loss, lrs, hw-truncation, "
             "leso, leader-churn, wipe-follower, stale-alter-partition, ... or none")
    nemesis_interval: float = opt(10.0, "mean seconds between one fault package's actions (each keeps its own "
                                               "clock; the mix: each fault's hold time)", metavar="S")
    acks: str = opt("all", "all, 1 or mixed (per op)", parse=acks_name, choices=("all", "1", "mixed"))
    rf: int = opt(3, "replication factor")
    min_isr: int = opt(2, "min.insync.replicas")
    partitions: int = opt(2, "partitions per topic")
    topics: int = opt(2, "topics")
    flush_policy: str = opt("none", "none (the OS writes back), every (fsync each message) or N messages")
    safeguards_off: list[str] = opt(
        factory=list, flag="--safeguard-off", repeat=True, metavar="NAME", parse=_csv,
        help="switch a broker safeguard off (repeatable; see docs/broker-replication.md)")
    unclean_election: bool = opt(
        False, "unclean.leader.election.enable=true: a configuration that may lose acknowledged writes "
               "(allowed by the policy), unlike --safeguard-off clean-election-only")
    time_limit: float = opt(60.0, "seconds of workload and faults (the workload goes on while a fault begun before then plays out, at most as long again)", metavar="S")
    rate: float = opt(5000.0, "client ops per second at most, all threads")
    concurrency: str = opt("1n", "consuming client threads: a number, or Kn for K per node")
    in_flight: int = opt(64, "queue workload: send-only processes beside them, so up to N more sends are "
                             "in flight at once (0: none)", metavar="N")
    txn_p: float = opt(0.0, "queue workload: share of the consuming clients' ops that are `txn` ops (Kafka "
                            "transactions of sends and polls; read_committed consumers; --client confluent)",
                       metavar="P")
    test_count: int = opt(1, "run this many tests; stop at the first not valid")
    seed: int | None = opt(None, "seed for every random choice (default: random, recorded)")
    etcd_reads: str = opt("linearizable", "etcd register reads: linearizable (through the Raft log) or "
                                           "serializable (a member's local state: may be stale)",
                          choices=("linearizable", "serializable"))
    client: str = opt("confluent", "confluent (librdkafka) or kafka-python", choices=("confluent", "kafka-python"))
    request_timeout: float = opt(5.0, "seconds before a client request is indeterminate", metavar="S")
    final_time_limit: float = opt(15.0, "seconds the final read-back may take", metavar="S")
    recovery_time_limit: float = opt(
        30.0, "seconds after the final heal within which every key must take a write and a read, "
              "else the run is invalid with no-recovery", metavar="S")
    checker_time_limit: float | None = opt(120.0, "seconds a checker may take before the verdict is unknown",
                                           metavar="S")
    transport: str = opt("nsenter", "local backend: nsenter or ssh", choices=("nsenter", "ssh"))
    inventory: str | None = opt(None, "ssh backend: inventory YAML", metavar="FILE")
    controllers: int | None = opt(None, "controller quorum voters, on the first N nodes (combined mode; "
                                        "default 3 for 3 or more nodes, else 1)", metavar="N")
    broker_command: list[str] | None = opt(None, "command that runs the broker on a node (default wrack-broker)",
                                           parse=_command, metavar="CMD")
    collect_data: bool = opt(True, "collect node logs but not their data directories", flag="--no-data",
                             invert=True)
    results: str | None = opt(None, "results root (default ./results or $WRACK_RESULTS)", metavar="DIR")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


DEFAULTS = TestOptions()
DEFAULT_WORKLOAD = {"wrack": "queue", "etcd": "register"}  # --workload when not given, by --db


def workload_of(o: TestOptions) -> str:
    """The workload `o` runs: `--workload`, else its DB's default (`DEFAULT_WORKLOAD`)."""
    return o.workload or DEFAULT_WORKLOAD[o.db]
SPEC: tuple[Field, ...] = fields(TestOptions)
_BY_NAME = {f.name: f for f in SPEC}


def flag_of(f: Field) -> str:
    return f.metadata["flag"] or "--" + f.name.replace("_", "-")


def _scalar_type(f: Field) -> type:
    """The type a text value of `f` is read as (from the field's annotation)."""
    t = str(f.type)
    for name, typ in (("int", int), ("float", float), ("bool", bool)):
        if t.startswith(name):
            return typ
    return str


def parse_value(f: Field, value: Any) -> Any:
    """`value` (a text from a flag or a campaign file, or an already typed value) as `f`'s value."""
    if value is None:
        return None
    parse = f.metadata["parse"]
    if parse is not None:
        return parse(value)
    typ = _scalar_type(f)
    if typ is bool and isinstance(value, str):
        if value.lower() not in ("true", "false", "yes", "no", "1", "0"):
            raise ValueError(f"{value!r} is not true or false")
        return value.lower() in ("true", "yes", "1")
    return typ(value)


def reader(f: Field) -> Callable[[str], Any]:
    """`parse_value` for `f` as an argparse `type` (named after the type, for its errors)."""
    def read(text: str) -> Any:
        return parse_value(f, text)

    read.__name__ = _scalar_type(f).__name__ if f.metadata["parse"] is None else "value"
    return read


def field_for_key(key: str) -> Field | None:
    """The option a campaign key names: the field name (with `-` or `_`) or its flag's name."""
    name = str(key).replace("-", "_")
    if name in _BY_NAME:
        return _BY_NAME[name]
    return next((f for f in SPEC if flag_of(f) == "--" + str(key).replace("_", "-")), None)


def from_mapping(values: Mapping[str, Any], where: str) -> dict[str, Any]:
    """Field name -> value for a mapping keyed as in a campaign file; InputError (naming
    `where` and the key) for an unknown option or a value of the wrong type."""
    out: dict[str, Any] = {}
    for key, value in values.items():
        f = field_for_key(key)
        if f is None:
            raise InputError(f"{where}: unknown option {key!r}")
        try:
            out[f.name] = parse_value(f, value)
        except (TypeError, ValueError) as e:
            raise InputError(f"{where}: option {key!r}: {e}") from None
    return out


def check_choices(o: TestOptions) -> None:
    """InputError for an option outside its `choices` (the flag named)."""
    for f in SPEC:
        v = getattr(o, f.name)
        if f.metadata["choices"] and v not in f.metadata["choices"]:
            raise InputError(f"{flag_of(f)}: {v!r} is not one of {', '.join(f.metadata['choices'])}")


def markdown_table() -> str:
    """The options table of docs/harness.md: flag, default, meaning."""
    rows = ["| option | default | meaning |", "| --- | --- | --- |"]
    for f in SPEC:
        default = getattr(DEFAULTS, f.name)
        shown = ",".join(default) if isinstance(default, list) else default
        if f.metadata["invert"]:
            shown = "off"
        elif isinstance(default, bool):
            shown = "on" if default else "off"
        rows.append(f"| `{flag_of(f)}` | {'' if shown in (None, '') else f'`{shown}`'} "
                    f"| {f.metadata['help']} |")
    return "\n".join(rows)


if __name__ == "__main__":
    print(markdown_table())
