"""Owned local clusters (clusters/local.py, "owner"): tests that share a host clean up after
one another. A cluster made by a process with WRACK_CLUSTER_OWNER set records that process;
once it is gone (SIGKILLed, as a test whose Spark executor died), `sweep_orphans` removes the
cluster; a cluster whose owner lives, or that has no owner (`wrack cluster up`), stays. Two
clusters made at once get distinct subnets, bridges and namespaces, and a partition (the
nemesis's iptables chain) in one leaves the other's traffic alone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid

import pytest

from clusters import local
from clusters.testing import can_run_local, local_clusters
from nemesis.grudge import complete_grudge
from nemesis.net import IptablesNet

pytestmark = [pytest.mark.root, pytest.mark.skipif(not can_run_local(), reason="needs root and namespaces")]

MAKE = ("import sys; from clusters import local; from clusters.node import ClusterSpec; "
        "local.create(ClusterSpec(name=sys.argv[1], nodes=2)); print('up', flush=True); sys.stdin.read()")


def test_orphans_of_dead_owners_are_swept_and_the_rest_kept():
    tag = f"t-{uuid.uuid4().hex[:6]}"
    dead, alive = (f"o{uuid.uuid4().hex[:8]}" for _ in range(2))
    env = {**os.environ, local.OWNER_ENV: tag}
    procs = [subprocess.Popen([sys.executable, "-c", MAKE, n], env=env, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True) for n in (dead, alive)]
    try:
        for p in procs:
            assert p.stdout is not None and p.stdout.readline().strip() == "up"
        with local_clusters() as make:
            other = make(1)  # no owner: never swept
            os.kill(procs[0].pid, signal.SIGKILL)
            procs[0].wait(10)
            owned = {n: (pid, up) for n, pid, up in local.owned(tag)}
            assert owned == {dead: (procs[0].pid, False), alive: (procs[1].pid, True)}
            assert local.sweep_orphans(tag) == [dead]
            assert dead not in local.names() and not any(ns.startswith(f"wrack-{dead}-") for ns in local._netns_list())
            assert alive in local.names() and other.name in local.names()
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(10)
        local.force_down(dead)
        local.force_down(alive)


# exit 0: the address answered (a refused connection is an answer); 1: no answer in 2 s
REACH = ("import socket, sys\ns = socket.socket(); s.settimeout(2)\ntry:\n    s.connect((sys.argv[1], 9))\n"
         "except ConnectionRefusedError:\n    sys.exit(0)\nexcept OSError:\n    sys.exit(1)\n")


def test_two_clusters_at_once_are_apart():
    with local_clusters() as make:
        a, b = make(2), make(2)
        assert a.state.subnet != b.state.subnet and a.state.bridge != b.state.bridge
        assert not {n.netns for n in a.state.nodes} & {n.netns for n in b.state.nodes}
        net_a = IptablesNet(a.nodes)
        net_a.drop(complete_grudge([["n1"], ["n2"]]))
        try:
            assert net_a.rules("n1") and IptablesNet(b.nodes).rules("n1") == []
            assert a.nodes[0].exec(["python3", "-c", REACH, a.nodes[1].address], check=False).exit_code == 1
            assert b.nodes[0].exec(["python3", "-c", REACH, b.nodes[1].address], check=False).exit_code == 0
        finally:
            net_a.teardown()


MAKE_OWNED = ("import sys; from clusters import local; from clusters.node import ClusterSpec; "
              "local.create(ClusterSpec(name=sys.argv[1], nodes=2, options={'owner': 'wrack-test'})); "
              "print('up', flush=True); sys.stdin.read()")


def test_a_crashed_tests_cluster_goes_with_the_next_cluster_made():
    """`wrack test` owns its cluster (spec option `owner`, no environment needed): SIGKILLed,
    it leaves the cluster behind, `wrack cluster status` says its owner is gone, and the next
    local cluster made on the host removes it (namespaces, holders, state)."""
    name = f"o{uuid.uuid4().hex[:8]}"
    env = {k: v for k, v in os.environ.items() if k != local.OWNER_ENV}
    p = subprocess.Popen([sys.executable, "-c", MAKE_OWNED, name], env=env, stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout is not None and p.stdout.readline().strip() == "up"
        os.kill(p.pid, signal.SIGKILL)
        p.wait(10)
        desc = local.attach(name).describe()
        assert desc["owner"] == {"pid": p.pid, "tag": "wrack-test", "alive": False}
        holders = [n["holder_pid"] for n in desc["nodes"]]
        with local_clusters() as make:
            make(1)
            assert name not in local.names()
            assert not any(ns.startswith(f"wrack-{name}-") for ns in local._netns_list())
            assert not any(running(h) for h in holders)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(10)
        local.force_down(name)


def running(pid: int) -> bool:
    """The process is there and not a zombie (an orphan's zombie waits for PID 1 to reap it)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
