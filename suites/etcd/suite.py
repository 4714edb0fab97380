"""etcd as a system under test (`wrack test --db etcd`, docs/etcd.md).

Debian's etcd 3.4 on every node (db.py), Jepsen's register workload through its v3 API
(register.py, client.py), the generic faults that reach it plus its Raft leader as a role
target (faults.py), and its promise as the loss rule: linearizable reads, writes and
compare-and-set on every key, so no anomaly is allowed (its serializable reads excepted,
which the checker must catch).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from checkers.policy import Policy
from contracts import store
from suites.base import RunFacts, Suite
from suites.etcd import faults
from suites.etcd.db import EtcdDB
from suites.etcd.options import GROUPS
from suites.etcd.register import RegisterWorkload


class EtcdSuite(Suite):
    name = "etcd"
    summary = "etcd 3.4 (Debian's etcd-server): a Raft key-value store, checked for linearizability"
    option_groups = GROUPS
    workloads = {"register": RegisterWorkload.from_test}
    default_workload = "register"
    default_mix = faults.MIX

    def test_name(self, options: Any) -> str:
        faults_ = "+".join(options.nemesis) or "nofaults"
        return store.safe_name("-".join([self.name, options.workload or self.default_workload,
                                         f"{options.etcd_reads}-reads", faults_]))

    def make_db(self, options: Any, cluster: Any) -> EtcdDB:
        return EtcdDB(cluster)

    def fault_packages(self, topics: Mapping[str, int]) -> tuple[dict[str, Any], tuple[str, ...]]:
        return faults.packages(), faults.MIX

    def loss_rules(self, facts: RunFacts) -> Policy:
        return Policy(notes=["etcd promises linearizable reads, writes and compare-and-set on every key "
                             "(serializable reads are not: their stale reads are reported): no anomaly is allowed"])


SUITE = EtcdSuite()
