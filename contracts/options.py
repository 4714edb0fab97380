"""The options of one test, declared once, in groups: the spec machinery and the general group.

An option is a dataclass field whose metadata (`opt(...)`) gives its help text, its
command-line flag and how a text value (a flag's argument, a campaign file's value) becomes
the field's value. Options come in groups (dataclasses of such fields): `GeneralOptions` for
every test, and the groups each system under test brings (`SystemUnderTest.option_groups`:
workloads/options.py's Kafka-client options, suites/*/options.py). `OptionSpec(groups)` composes
them into one flat record class (`spec.cls`, harness/options.py's `TestOptions`), and from that
one spec come:

- `wrack test` / `wrack demo`'s flags (`harness.cmd_test.add_test_options`);
- a campaign file's option keys (`spec.from_mapping`: the field name, with `-` or `_`, or the
  flag's name);
- the workload's options (records of their own taking values from the options of the same name);
- the options table in docs/harness.md (`spec.markdown_table`; tests/test_options.py checks it);
- which options belong to which group (`spec.group_of`), so a system refuses another's options
  and a report shows only the options of the system it tested.

test.json records `to_dict()` as `options`. Checks that need the registries (system,
workload, backend, nemesis names) are the runner's (`harness.runner.validate`).
"""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import MISSING, Field, asdict, dataclass, field, fields, make_dataclass
from typing import Any

from contracts.errors import InputError


def csv(v: str | list[str]) -> list[str]:
    """`a,b` (or a list) -> ["a", "b"]; `none` (or nothing) -> []."""
    items = v.split(",") if isinstance(v, str) else [str(x) for x in v]
    return [x.strip() for x in items if x.strip() and x.strip() != "none"]


def _lull_numbers(v: str) -> tuple[float, float, float] | None:
    """`EVERY:SECONDS:RATE` as three numbers, None for `none`; ValueError naming what is wrong."""
    text = str(v).strip()
    if text in ("none", "", "0"):
        return None
    try:
        every, seconds, rate = (float(x) for x in text.split(":"))
    except ValueError:
        raise ValueError(f"lulls {text!r}: expected EVERY:SECONDS:RATE (three numbers, e.g. 20:5:4) or none") from None
    if not (every > 0 and 0 < seconds < every and rate > 0):
        raise ValueError(f"lulls {text!r}: needs 0 < SECONDS < EVERY and RATE > 0")
    return every, seconds, rate


def lulls(v: str) -> str:
    """`EVERY:SECONDS:RATE` (a lull of SECONDS at RATE ops/s once every EVERY s) or `none`,
    checked and written back; ValueError naming what is wrong."""
    spec = _lull_numbers(v)
    return "none" if spec is None else ":".join(f"{x:g}" for x in spec)


def lull_spec(v: str) -> tuple[float, float, float] | None:
    """A checked `lulls` value as (every, seconds, rate), or None for `none`."""
    return _lull_numbers(v)


def command(v: str | list[str]) -> list[str]:
    """A shell-quoted command line (or a list of words) -> its words."""
    return shlex.split(v) if isinstance(v, str) else [str(x) for x in v]


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
class GeneralOptions:
    """Every test, whatever the system under test.

    Each system adds groups of its own (`SystemUnderTest.option_groups`)."""

    name: str | None = opt(None, "test name (default: from the system, workload and faults)")
    backend: str = opt("local", "where nodes come from: local, docker or ssh")
    nodes: int = opt(5, "number of nodes")
    db: str = opt("wrack", "the system under test (`wrack test --help` lists them)")
    workload: str | None = opt(None, "the workload (default: the system's own; `--help` lists each system's)")
    nemesis: list[str] = opt(
        factory=lambda: ["mix"], parse=csv, metavar="LIST",
        help="comma list of fault packages: mix (the system's default rotation of faults with fault-free "
             "periods), partition, kill, pause, restart, rolling-restart, power-loss, and the system's own "
             "(e.g. kill-leader, partition-leader, the fault stories), or none")
    nemesis_interval: float = opt(10.0, "mean seconds between one fault package's actions (each keeps its own "
                                               "clock; the mix: each fault's hold time)", metavar="S")
    time_limit: float = opt(60.0, "seconds of workload and faults (the workload goes on while a fault begun "
                                  "before then plays out, and with the mix until each of its trigger "
                                  "faults has played once, at most as long again)", metavar="S")
    rate: float = opt(5000.0, "client ops per second at most, all threads")
    lulls: str = opt("none", "EVERY:SECONDS:RATE (e.g. 20:5:4): for SECONDS once every EVERY s the load drops to RATE ops per "
                               "second (faults then meet partitions with one record or none in flight), or none",
                     parse=lulls, metavar="SPEC")
    concurrency: str = opt("1n", "client threads: a number, or Kn for K per node")
    test_count: int = opt(1, "run this many tests; stop at the first not valid")
    seed: int | None = opt(None, "seed for every random choice (default: random, recorded)")
    request_timeout: float = opt(5.0, "seconds before a client request is indeterminate", metavar="S")
    final_time_limit: float = opt(15.0, "seconds the final read-back may take", metavar="S")
    recovery_time_limit: float = opt(
        30.0, "seconds after the final heal within which every key must take a write and a read, "
              "else the run is invalid with no-recovery", metavar="S")
    checker_time_limit: float | None = opt(120.0, "seconds a checker may take before the verdict is unknown",
                                           metavar="S")
    transport: str = opt("nsenter", "local backend: nsenter or ssh", choices=("nsenter", "ssh"))
    inventory: str | None = opt(None, "ssh backend: inventory YAML", metavar="FILE")
    collect_data: bool = opt(True, "collect node logs but not their data directories", flag="--no-data",
                             invert=True)
    results: str | None = opt(None, "results root (default ./results or $WRACK_RESULTS)", metavar="DIR")
    schedule: str | None = opt(None, "play the fault schedule in FILE (a run's schedule.json, or one `wrack shrink` "
                                     "wrote) instead of drawing one; its options and seed stand for those left at "
                                     "their defaults", metavar="FILE")


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
    """`parse_value` for `f` as an argparse `type` (named after the type, for its errors; a
    parser's own ValueError message is the error, as it names what is wrong)."""
    def read(text: str) -> Any:
        try:
            return parse_value(f, text)
        except ValueError as e:
            if f.metadata["parse"] is None:
                raise  # argparse names the type: "invalid int value"
            raise argparse.ArgumentTypeError(str(e)) from None

    read.__name__ = _scalar_type(f).__name__ if f.metadata["parse"] is None else "value"
    return read


def _copy(f: Field) -> tuple[str, Any, Any]:
    """`f` as a `make_dataclass` field spec (its default, factory and metadata kept)."""
    if f.default_factory is not MISSING:
        return f.name, f.type, field(default_factory=f.default_factory, metadata=f.metadata)
    return f.name, f.type, field(default=f.default, metadata=f.metadata)


class OptionSpec:
    """Option groups composed into one flat record class, `cls` (named `name`, with `to_dict`).

    A field of the same name in two groups is one option (a group may share another's field,
    e.g. two Kafka-wire systems both take the Kafka client's options); the first group that
    names it owns it. Groups are kept in order: the docs' table and the help list them so."""

    def __init__(self, name: str, groups: Sequence[type]):
        self.groups = list(dict.fromkeys(groups))
        self.owner: dict[str, type] = {}
        specs = []
        for g in self.groups:
            for f in fields(g):
                if f.name not in self.owner:
                    self.owner[f.name] = g
                    specs.append(_copy(f))
        self.cls = make_dataclass(name, specs, namespace={"to_dict": lambda self: asdict(self)})
        self.fields: tuple[Field, ...] = fields(self.cls)
        self.by_name = {f.name: f for f in self.fields}
        self.defaults = self.cls()

    def __iter__(self) -> Iterator[Field]:
        return iter(self.fields)

    def group_of(self, name: str) -> type:
        return self.owner[name]

    def field_for_key(self, key: str) -> Field | None:
        """The option a campaign key names: the field name (with `-` or `_`) or its flag's name."""
        name = str(key).replace("-", "_")
        if name in self.by_name:
            return self.by_name[name]
        return next((f for f in self.fields if flag_of(f) == "--" + str(key).replace("_", "-")), None)

    def from_mapping(self, values: Mapping[str, Any], where: str) -> dict[str, Any]:
        """Field name -> value for a mapping keyed as in a campaign file; InputError (naming
        `where` and the key) for an unknown option or a value of the wrong type."""
        out: dict[str, Any] = {}
        for key, value in values.items():
            f = self.field_for_key(key)
            if f is None:
                raise InputError(f"{where}: unknown option {key!r}")
            try:
                out[f.name] = parse_value(f, value)
            except (TypeError, ValueError) as e:
                raise InputError(f"{where}: option {key!r}: {e}") from None
        return out

    def normalize(self, o: Any) -> None:
        """Read every option of `o` given as text the way its flag would (e.g. acks "-1" is "all")."""
        for f in self.fields:
            v = getattr(o, f.name)
            if f.metadata["parse"] is not None and isinstance(v, str):
                setattr(o, f.name, f.metadata["parse"](v))

    def check_choices(self, o: Any) -> None:
        """InputError for an option outside its `choices` (the flag named)."""
        for f in self.fields:
            v = getattr(o, f.name)
            if f.metadata["choices"] and v not in f.metadata["choices"]:
                raise InputError(f"{flag_of(f)}: {v!r} is not one of {', '.join(f.metadata['choices'])}")

    def set_outside(self, o: Any, groups: Sequence[type]) -> list[Field]:
        """The options of `o` set away from their defaults that belong to none of `groups`."""
        keep = set(groups)
        return [f for f in self.fields if self.owner[f.name] not in keep
                and getattr(o, f.name) != getattr(self.defaults, f.name)]

    def markdown_table(self) -> str:
        """The options table of docs/harness.md: flag, default, meaning, with a row naming each
        group (its docstring's first line) before its options."""
        rows = ["| option | default | meaning |", "| --- | --- | --- |"]
        for g in self.groups:
            title = (g.__doc__ or g.__name__).strip().split("\n")[0].rstrip(".")
            rows.append(f"| **{title}** | | |")
            rows += [self._row(f) for f in self.fields if self.owner[f.name] is g]
        return "\n".join(rows)

    def _row(self, f: Field) -> str:
        default = getattr(self.defaults, f.name)
        shown = ",".join(default) if isinstance(default, list) else default
        if f.metadata["invert"]:
            shown = "off"
        elif isinstance(default, bool):
            shown = "on" if default else "off"
        return f"| `{flag_of(f)}` | {'' if shown in (None, '') else f'`{shown}`'} | {f.metadata['help']} |"
