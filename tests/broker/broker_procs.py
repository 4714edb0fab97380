"""Real `wrack-broker` processes for the tests: start, wait until they serve, signal,
collect their logs; every process killed and every directory removed, even on failure
(use `BrokerFleet` as a context manager or pytest fixture)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.netutil import free_port, wait_port

if TYPE_CHECKING:
    from confluent_kafka.admin import AdminClient

BROKER = str(Path(sys.executable).parent / "wrack-broker")


@dataclass
class BrokerProc:
    """One broker (or controller) process and its properties."""

    name: str
    props: dict[str, str]
    data_dir: str
    log_path: str
    host: str = "127.0.0.1"
    port: int = 0  # its PLAINTEXT port (0: none)
    proc: subprocess.Popen | None = None
    starts: int = 0
    env: dict[str, str] = field(default_factory=dict)

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self, wait: float = 30.0) -> BrokerProc:
        args = [BROKER]
        for k, v in self.props.items():
            args += ["--override", f"{k}={v}"]
        self.starts += 1
        with open(self.log_path, "ab") as log:
            log.write(f"---- start {self.starts}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **self.env},
                                         start_new_session=True)
        if wait and self.port:
            wait_port(self.host, self.port, wait, self.proc)
        return self

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig: int) -> None:
        if self.running:
            assert self.proc is not None
            self.proc.send_signal(sig)

    def terminate(self, timeout: float = 30.0) -> int:
        """SIGTERM and wait; returns the exit code."""
        assert self.proc is not None
        self.signal(signal.SIGTERM)
        return self.proc.wait(timeout)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def log_text(self) -> str:
        try:
            return Path(self.log_path).read_text(errors="replace")
        except OSError:
            return ""


class BrokerFleet:
    """Processes and temp dirs of one test; `close()` kills and removes everything."""

    def __init__(self, prefix: str = "wrack-test-broker-") -> None:
        self.base = tempfile.mkdtemp(prefix=prefix)
        self.procs: dict[str, BrokerProc] = {}

    def __enter__(self) -> BrokerFleet:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def add(self, name: str, props: dict[str, str], host: str = "127.0.0.1", port: int = 0,
            env: dict[str, str] | None = None) -> BrokerProc:
        data = os.path.join(self.base, name)
        os.makedirs(data, exist_ok=True)
        props = {"log.dirs": data, **props}
        p = BrokerProc(name, props, data, os.path.join(self.base, f"{name}.out"), host, port, env=env or {})
        self.procs[name] = p
        return p

    def single(self, name: str = "b0", extra: dict[str, str] | None = None, host: str = "127.0.0.1") -> BrokerProc:
        """A single node that is its own controller (the issue's minimal command line)."""
        port = free_port(host)
        props = {"node.id": "0", "listeners": f"PLAINTEXT://{host}:{port}", **(extra or {})}
        return self.add(name, props, host, port)

    def logs(self) -> str:
        return "\n".join(f"==== {p.name}\n{p.log_text()[-6000:]}" for p in self.procs.values())

    def close(self) -> None:
        for p in self.procs.values():
            if p.proc is not None and p.proc.poll() is None:
                try:
                    os.killpg(p.proc.pid, signal.SIGKILL)
                except OSError:
                    p.proc.kill()
                p.proc.wait(10)
        shutil.rmtree(self.base, ignore_errors=True)


def cluster(fleet: BrokerFleet, brokers: int = 3, separate_controller: bool = True, hosts: list[str] | None = None,
            extra: dict[str, str] | None = None) -> tuple[BrokerProc | None, list[BrokerProc]]:
    """A controller (its own process, node id 100, unless `separate_controller` is False:
    then broker 0 is also the controller) and `brokers` brokers (ids 0..n-1), each on its
    own loopback address from `hosts` (default 127.0.0.1)."""
    hosts = hosts or ["127.0.0.1"] * (brokers + 1)
    ctl_host = hosts[-1] if separate_controller else hosts[0]
    ctl_port = free_port(ctl_host)
    ctl_id = 100 if separate_controller else 0
    voters = f"{ctl_id}@{ctl_host}:{ctl_port}"
    common = {"controller.quorum.voters": voters, **(extra or {})}
    ctl = None
    if separate_controller:
        ctl = fleet.add("ctl", {"node.id": str(ctl_id), "process.roles": "controller",
                                "listeners": f"CONTROLLER://{ctl_host}:{ctl_port}", **common}, ctl_host, ctl_port)
    out = []
    for i in range(brokers):
        host = hosts[i]
        port = free_port(host)
        listeners = f"PLAINTEXT://{host}:{port}"
        roles = "broker"
        if not separate_controller and i == 0:
            listeners += f",CONTROLLER://{ctl_host}:{ctl_port}"
            roles = "broker,controller"
        out.append(fleet.add(f"b{i}", {"node.id": str(i), "process.roles": roles, "listeners": listeners, **common},
                             host, port))
    return ctl, out


def quorum_cluster(fleet: BrokerFleet, brokers: int = 3, voters: int = 3, dedicated: bool = False,
                   hosts: list[str] | None = None, extra: dict[str, str] | None = None
                   ) -> tuple[list[BrokerProc], list[BrokerProc]]:
    """A controller quorum of `voters` and `brokers` brokers on loopback addresses:
    combined mode (the first `voters` brokers are also controllers, node ids 0..) or, with
    `dedicated`, controller-only processes (node ids 100..). Returns (controller
    processes, broker processes); in combined mode the controllers are brokers too."""
    n_hosts = brokers + (voters if dedicated else 0)
    hosts = hosts or loopback_hosts(n_hosts)
    ctl_hosts = hosts[brokers:] if dedicated else hosts[:voters]
    ctl_ids = [100 + i for i in range(voters)] if dedicated else list(range(voters))
    ctl_ports = [free_port(h) for h in ctl_hosts]
    common = {"controller.quorum.voters": ",".join(f"{i}@{h}:{p}" for i, h, p in zip(ctl_ids, ctl_hosts, ctl_ports,
                                                                                     strict=True)),
              **(extra or {})}
    ctls, out = [], []
    for i in range(brokers):
        port = free_port(hosts[i])
        listeners, roles = f"PLAINTEXT://{hosts[i]}:{port}", "broker"
        if not dedicated and i < voters:
            listeners += f",CONTROLLER://{ctl_hosts[i]}:{ctl_ports[i]}"
            roles = "broker,controller"
        out.append(fleet.add(f"b{i}", {"node.id": str(i), "process.roles": roles, "listeners": listeners, **common},
                             hosts[i], port))
    if dedicated:
        for cid, h, p in zip(ctl_ids, ctl_hosts, ctl_ports, strict=True):
            ctls.append(fleet.add(f"c{cid}", {"node.id": str(cid), "process.roles": "controller",
                                              "listeners": f"CONTROLLER://{h}:{p}", **common}, h, 0))
    else:
        ctls = out[:voters]
    return ctls, out


def active_controller(controllers: list[BrokerProc]) -> BrokerProc | None:
    """The running controller that its quorum-state file names leader in the highest
    epoch among them (what clusters/db.py's BrokerDB.active_controller reads too)."""
    import json

    by_id = {int(c.props["node.id"]): c for c in controllers}
    best = (-1, -1)
    for c in controllers:
        try:
            st = json.loads((Path(c.data_dir) / "quorum-state").read_text())
        except (OSError, ValueError):
            continue
        if st["leader_id"] in by_id and st["epoch"] > best[0]:
            best = (st["epoch"], st["leader_id"])
    c = by_id.get(best[1])
    return c if c is not None and c.running else None


def loopback_hosts(n: int, first: int = 2) -> list[str]:
    """n distinct 127.0.0.x addresses (Linux routes all of 127/8 to lo)."""
    return [f"127.0.0.{first + i}" for i in range(n)]


# ---------------------------------------------------------------- replicated clusters (librdkafka)
# Session timeouts shortened to keep the suites fast; bench/replication.py measures failover
# with Kafka's defaults.
FAST = {"broker.session.timeout.ms": "4000", "broker.heartbeat.interval.ms": "500", "replica.lag.time.max.ms": "4000",
        "min.insync.replicas": "2", "default.replication.factor": "3"}


def start_cluster(fleet: BrokerFleet, **extra: str) -> tuple[BrokerProc, list[BrokerProc], str, AdminClient]:
    """A controller process and three brokers on 127.0.0.2-5 (FAST settings, then `extra`),
    started and serving: (controller, brokers, bootstrap servers, an AdminClient)."""
    from confluent_kafka.admin import AdminClient

    ctl, brokers = cluster(fleet, 3, separate_controller=True, hosts=loopback_hosts(4, first=2),
                           extra={**FAST, **extra})
    assert ctl is not None
    ctl.start()
    for b in brokers:
        b.start()
    bs = ",".join(b.bootstrap for b in brokers)
    return ctl, brokers, bs, AdminClient({"bootstrap.servers": bs})


def metadata(admin: AdminClient, topic: str) -> dict[int, Any]:
    """The topic's partitions (id -> PartitionMetadata: leader, replicas, isrs)."""
    return admin.list_topics(topic, timeout=10).topics[topic].partitions


def wait_until(pred, timeout: float, what: str, step: float = 0.2):
    """`pred()`'s first truthy value, polled every `step` s; AssertionError after `timeout` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(step)
    raise AssertionError(f"timed out after {timeout} s: {what}")


def create_replicated(admin: AdminClient, topic: str, partitions: int = 1, rf: int = 3) -> None:
    """Create the topic and wait until every partition's ISR is full."""
    from confluent_kafka.admin import NewTopic

    for f in admin.create_topics([NewTopic(topic, partitions, rf)], operation_timeout=10).values():
        f.result(20)
    wait_until(lambda: all(len(p.isrs) == rf for p in metadata(admin, topic).values()), 20, "full ISRs")


def read_back(bs: str, topic: str, partition: int, want: set[bytes], timeout: float = 60) -> dict[int, bytes]:
    """offset -> value of the partition from the start, read until every value of `want`
    is seen (or `timeout`)."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bs, "group.id": "read-back", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, partition, 0)])
    got: dict[int, bytes] = {}
    deadline = time.monotonic() + timeout
    while not want <= set(got.values()) and time.monotonic() < deadline:
        for m in c.consume(1000, 0.5):
            if m.error() is None:
                got[m.offset()] = m.value()
    c.close()
    return got
