"""Tansu's option group and its checks (contracts/options.py groups).

What Tansu 0.6.0 cannot serve under this harness is refused before anything starts, one line
and exit 254 (`validate`): transactions (`--txn-p` > 0: the queue workload's transactions
are not run against Tansu, docs/tansu.md), fewer than 2 nodes (PostgreSQL has a node of its
own), a backend other than `local` (PostgreSQL and the Tansu build come from this machine),
a `--postgres-setting` that is not KEY=VALUE, a `--tansu-binary` that does not exist.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from contracts.errors import InputError
from contracts.options import opt
from workloads.options import KafkaClientOptions

SETTING = re.compile(r"([a-z_][a-z0-9_.]*)=(.*)")


def setting_list(v: str | list[str]) -> list[str]:
    """One `--postgres-setting` (its value may hold commas) or a list of them (test.json, campaigns)."""
    return [v] if isinstance(v, str) else [str(x) for x in v]


@dataclass
class TansuOptions:
    """Tansu on PostgreSQL (--db tansu)."""

    tansu_binary: str | None = opt(None, "the tansu binary the brokers run (default: Tansu 0.6.0 built from its "
                                         "cargo package on first use, cached under ~/.cache/wrack/tansu/0.6.0)",
                                   metavar="PATH")
    postgres_settings: list[str] = opt(
        factory=list, flag="--postgres-setting", repeat=True, metavar="KEY=VALUE", parse=setting_list,
        help="a postgresql.conf setting of the database node (repeatable; e.g. synchronous_commit=off)")
    tansu_log: str = opt("warn", "the brokers' RUST_LOG filter")


GROUPS = (KafkaClientOptions, TansuOptions)  # this system's option groups, in the order its help lists them


def postgres_settings(o: Any) -> dict[str, str]:
    """`--postgres-setting` lines as a dict (ValueError naming a bad one)."""
    out = {}
    for s in o.postgres_settings:
        m = SETTING.fullmatch(s.strip())
        if not m:
            raise ValueError(f"{s!r} is not KEY=VALUE (a postgresql.conf setting)")
        out[m.group(1)] = m.group(2)
    return out


def validate(o: Any) -> None:
    """InputError naming the first option Tansu cannot serve (module docstring)."""
    def bad(opt_: str, msg: str) -> None:
        raise InputError(f"--{opt_}: {msg}")

    if o.nodes < 2:
        bad("nodes", f"{o.nodes}: Tansu needs 2 at least (PostgreSQL on the first node, brokers on the others)")
    if o.backend != "local":
        bad("backend", f"{o.backend}: Tansu runs on the local backend only (PostgreSQL and the Tansu build "
                       "come from this machine)")
    if o.txn_p != 0:
        bad("txn-p", f"{o.txn_p}: Tansu is tested without transactions (0 only)")
    if getattr(o, "idempotence", False):
        bad("idempotence", "Tansu is tested without the idempotent producer")
    if o.in_flight < 0:
        bad("in-flight", f"{o.in_flight} must not be negative")
    if o.partitions < 1 or o.topics < 1:
        bad("partitions" if o.partitions < 1 else "topics", "at least 1")
    try:
        postgres_settings(o)
    except ValueError as e:
        bad("postgres-setting", str(e))
    if o.tansu_binary and not os.access(o.tansu_binary, os.X_OK):
        bad("tansu-binary", f"{o.tansu_binary} is not an executable file")
    check_log_filter(o.tansu_log, bad)


def check_log_filter(value: str, bad: Callable[[str, str], None]) -> None:
    if not re.fullmatch(r"[A-Za-z0-9_=,:.\-]+", value or ""):
        bad("tansu-log", f"{value!r} is not a RUST_LOG filter (e.g. warn or warn,tansu_storage=info)")
