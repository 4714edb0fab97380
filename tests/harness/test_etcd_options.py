"""`--db etcd` without a cluster: bad input is one line and exit 254 before anything starts;
etcd's fault packages and its leader as a role target; run names."""

from __future__ import annotations

import random
import subprocess

import pytest
from harness_testlib import wrack_bin

import suites
from harness import options, runner
from harness.faults import fault_packages
from nemesis.targets import LeaderMetadata, resolve
from suites.etcd.faults import MIX as ETCD_MIX


@pytest.mark.parametrize("args, named", [
    (["--db", "bogus"], "--db"),
    (["--db", "etcd", "--etcd-reads", "stale"], "--etcd-reads"),
    (["--db", "etcd", "--nemesis", "lrs"], "lrs"),
    (["--db", "etcd", "--nemesis", "clock"], "clock"),
    (["--db", "etcd", "--workload", "queue"], "--workload"),
    (["--workload", "register"], "--workload"),
    (["--db", "etcd", "--safeguard-off", "elr"], "--safeguard-off"),
])
def test_bad_etcd_input_is_one_line_and_254(tmp_path, args, named):
    p = subprocess.run([wrack_bin(), "test", "--results", str(tmp_path), *args], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 254, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and named in p.stderr and "Traceback" not in p.stderr
    assert not any(tmp_path.iterdir())  # nothing was started or written


def test_etcd_defaults_to_the_register_workload_and_its_own_mix():
    o = options.TestOptions(db="etcd")
    runner.validate(o)
    assert o.workload == "register"
    assert [p.name for p in fault_packages(o.nemesis, suites.get("etcd"), {})] == list(ETCD_MIX)
    assert runner.test_name(options.TestOptions(db="etcd", etcd_reads="serializable", nemesis=["partition"])) == \
        "etcd-register-serializable-reads-partition"
    o = options.TestOptions()
    runner.validate(o)
    assert o.workload == "queue"


def test_etcd_leader_faults_aim_at_the_leader_the_db_reports():
    kill = next(p for p in fault_packages(["kill-leader"], suites.get("etcd"), {}))
    op = kill.start(random.Random(1))
    assert op.f == "kill" and op.value == {"role": "controller"}
    addresses = {"n1": "10.0.0.1", "n2": "10.0.0.2", "n3": "10.0.0.3"}
    leader = {"now": "10.0.0.2"}
    md = LeaderMetadata(list(addresses.values()), lambda: leader["now"])
    assert resolve(op.value, list(addresses), random.Random(1), addresses=addresses, metadata=md) == ["n2"]
    leader["now"] = None
    with pytest.raises(ValueError, match="no controller"):
        resolve(op.value, list(addresses), random.Random(1), addresses=addresses, metadata=md)
