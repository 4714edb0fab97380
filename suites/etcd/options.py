"""etcd's option group (contracts/options.py groups)."""

from __future__ import annotations

from dataclasses import dataclass

from contracts.options import opt


@dataclass
class EtcdOptions:
    """etcd (--db etcd)."""

    etcd_reads: str = opt("linearizable", "etcd register reads: linearizable (through the Raft log) or "
                                           "serializable (a member's local state: may be stale)",
                          choices=("linearizable", "serializable"))


GROUPS = (EtcdOptions,)  # this system's option groups, in the order its help lists them
