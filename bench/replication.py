"""Replicated throughput, latency and failover: three `wrack-broker` processes on
loopback, each a broker and a voter of the controller quorum (combined mode), RF=3,
min.insync.replicas=2, librdkafka with acks=all, Kafka's default timeouts
(broker.session.timeout.ms 9000, heartbeat 2000, controller.quorum.election.timeout.ms
1000, controller.quorum.fetch.timeout.ms 2000).

    .venv/bin/python bench/replication.py [--messages N] [--rate R] [--repeat K] [--json]

1. Throughput: N 100-byte values as fast as librdkafka batches them (linger.ms=5) to
   one partition; msgs/s and MB/s, and the brokers' CPU seconds.
2. Latency: R msgs/s for 5 s, every message's time from produce() to its delivery
   report: p50 / p99 / p999.
3. Failover: a producer sends every 2 ms to a partition led by a node that is not the
   active controller; its leader is SIGKILLed; prints the time from the kill to the first
   successful delivery after it, and how long the restarted broker takes to rejoin the
   ISR. Targets (issue 5): >= 50,000 msgs/s, failover under 12 s.
4. Restart: a broker (not the active controller) SIGKILLed and started again at once, while its old session is still
   alive at the controller: time from the new process's start to its client port and to
   its being back in every ISR (target: serving within 2 s).
5. Controller failover: the active controller (the quorum leader, read from the voters'
   quorum-state files) is SIGKILLed while a producer sends to a partition it does not
   lead: seconds until another voter is active, until a CreateTopics succeeds, and the
   longest gap between acknowledged sends (the killed node was in that partition's ISR:
   acks=all waits until the new controller fences it, a session timeout after it took
   over).
0. Start-up (measured first): the three processes spawned at once, the time until every
   client port accepts connections (a broker opens it once registered, caught up and
   unfenced), then until CreateTopics (sent without a metadata request first) returns.
   Real KRaft serves in about 1-2 s; `wrack test` counts this time against its budget.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

_spec = importlib.util.spec_from_file_location("wrack_bench_broker", os.path.join(os.path.dirname(__file__), "broker.py"))
assert _spec is not None and _spec.loader is not None
bb = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bb)


class Cluster:
    """Three nodes, each broker + controller (a three-voter quorum); everything removed
    on close()."""

    def __init__(self) -> None:
        self.base = tempfile.mkdtemp(prefix="wrack-bench-repl-")
        self.ports = [bb.free_port() for _ in range(3)]
        self.cports = [bb.free_port() for _ in range(3)]
        self.procs: dict[int, subprocess.Popen] = {}

    def start(self, i: int, wait: bool = True) -> None:
        listeners = f"PLAINTEXT://127.0.0.1:{self.ports[i]},CONTROLLER://127.0.0.1:{self.cports[i]}"
        voters = ",".join(f"{j}@127.0.0.1:{p}" for j, p in enumerate(self.cports))
        args = [bb.BROKER, "--override", f"node.id={i}", "--override", "process.roles=broker,controller",
                "--override", f"listeners={listeners}", "--override", f"log.dirs={self.base}/n{i}",
                "--override", f"controller.quorum.voters={voters}",
                "--override", "min.insync.replicas=2", "--override", "default.replication.factor=3",
                "--override", "wrack.log.level=WARNING"]
        with open(f"{self.base}/n{i}.out", "ab") as out:
            self.procs[i] = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=out)
        if wait:
            bb.wait_port("127.0.0.1", self.ports[i], self.procs[i])

    def active_controller(self) -> int | None:
        """The running voter named leader in the highest epoch of the quorum-state files."""
        best = (-1, -1)
        for i in self.procs:
            try:
                with open(f"{self.base}/n{i}/quorum-state") as fh:
                    st = json.load(fh)
            except (OSError, ValueError):
                continue
            if st["epoch"] > best[0] and st["leader_id"] in self.procs:
                best = (st["epoch"], st["leader_id"])
        p = self.procs.get(best[1])
        return best[1] if p is not None and p.poll() is None else None

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{p}" for p in self.ports)

    def cpu(self) -> float:
        return sum(bb.cpu_seconds(p.pid) for p in self.procs.values() if p.poll() is None)

    def close(self) -> None:
        for p in self.procs.values():
            if p.poll() is None:
                p.kill()
                p.wait(10)
        shutil.rmtree(self.base, ignore_errors=True)


def partitions(admin, topic: str):  # noqa: ANN001
    return admin.list_topics(topic, timeout=10).topics[topic].partitions


def wait_until(pred, timeout: float):  # noqa: ANN001
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.1)
    return None


def failover(c: Cluster, admin) -> dict:  # noqa: ANN001
    from confluent_kafka import Producer
    from confluent_kafka.admin import NewTopic

    topic = "bench-failover"
    for f in admin.create_topics([NewTopic(topic, 3, 3)]).values():
        f.result(30)
    parts = wait_until(lambda: (lambda ps: ps if all(len(p.isrs) == 3 for p in ps.values()) else None)(partitions(admin, topic)), 30)
    ctl = wait_until(c.active_controller, 30)
    part = next(p for p in parts.values() if p.leader != ctl)
    victim = part.leader
    acks: list[tuple[float, float]] = []  # (sent, acknowledged)
    errors: list[str] = []
    stop = threading.Event()
    pr = Producer({"bootstrap.servers": c.bootstrap, "acks": "all", "linger.ms": 1, "message.timeout.ms": 60000,
                   "retries": 1000000, "retry.backoff.ms": 50})

    def cb(err, _msg, sent=0.0):  # noqa: ANN001
        (errors.append(str(err)) if err is not None else acks.append((sent, time.monotonic())))

    def run() -> None:
        while not stop.is_set():
            try:
                sent = time.monotonic()
                pr.produce(topic, b"x" * 100, partition=part.id, on_delivery=lambda e, m, s=sent: cb(e, m, s))
            except BufferError:
                pass
            pr.poll(0.002)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    try:
        time.sleep(3)
        killed = time.monotonic()
        c.procs[victim].send_signal(signal.SIGKILL)
        c.procs[victim].wait(10)
        # the first message produced after the kill that is acknowledged
        first = wait_until(lambda: min((a for s, a in acks if s > killed), default=None), 60)
        new_leader = partitions(admin, topic)[part.id].leader
        restarted = time.monotonic()
        c.start(victim)
        rejoined = wait_until(lambda: len(partitions(admin, topic)[part.id].isrs) == 3, 90)
        rejoin_s = time.monotonic() - restarted if rejoined else None
    finally:
        stop.set()
        t.join(10)
        pr.flush(60)
    return {"victim": victim, "new_leader": new_leader, "failover_s": (first - killed) if first else None,
            "rejoin_isr_s": rejoin_s, "errors": len(errors)}


def restart_at_once(c: Cluster, admin) -> dict:  # noqa: ANN001
    """Section 4: SIGKILL a broker that is not the active controller and start it again at
    once (its old session still alive at the controller): seconds from the new process's
    start to its client port (registered, caught up, unfenced) and to its being back in
    every ISR of a 3-partition topic."""
    from confluent_kafka.admin import NewTopic

    ctl = wait_until(c.active_controller, 30)
    victim = next(i for i in sorted(c.procs) if i != ctl)

    topic = "bench-restart"
    for f in admin.create_topics([NewTopic(topic, 3, 3)]).values():
        f.result(30)
    full = lambda: all(len(p.isrs) == 3 for p in partitions(admin, topic).values())  # noqa: E731
    wait_until(full, 30)
    c.procs[victim].send_signal(signal.SIGKILL)
    c.procs[victim].wait(10)
    t0 = time.monotonic()
    c.start(victim)
    serving = time.monotonic() - t0
    back = wait_until(full, 60)
    return {"victim": victim, "serving_s": round(serving, 3),
            "in_every_isr_s": round(time.monotonic() - t0, 3) if back else None}


def controller_failover(c: Cluster, admin) -> dict:  # noqa: ANN001
    """Section 5: SIGKILL the active controller while sending to a partition it does not lead."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import NewTopic

    topic = "bench-ctl-failover"
    for f in admin.create_topics([NewTopic(topic, 3, 3)]).values():
        f.result(30)
    wait_until(lambda: all(len(p.isrs) == 3 for p in partitions(admin, topic).values()), 30)
    victim = wait_until(c.active_controller, 30)
    part = next(p for p in partitions(admin, topic).values() if p.leader != victim)
    acks: list[float] = []
    stop = threading.Event()
    pr = Producer({"bootstrap.servers": c.bootstrap, "acks": "all", "linger.ms": 1, "message.timeout.ms": 60000,
                   "retries": 1000000, "retry.backoff.ms": 50})

    def run() -> None:
        while not stop.is_set():
            try:
                pr.produce(topic, b"x" * 100, partition=part.id,
                           on_delivery=lambda e, m: e is None and acks.append(time.monotonic()))
            except BufferError:
                pass
            pr.poll(0.002)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    try:
        time.sleep(3)
        killed = time.monotonic()
        c.procs[victim].send_signal(signal.SIGKILL)
        c.procs[victim].wait(10)
        new = wait_until(lambda: (lambda a: a if a not in (None, victim) else None)(c.active_controller()), 60)
        active_s = time.monotonic() - killed if new is not None else None
        created = None
        deadline = time.monotonic() + 60
        while created is None and time.monotonic() < deadline:
            try:
                for f in admin.create_topics([NewTopic(f"after-{int(time.monotonic() * 1000)}", 1, 2)],
                                             request_timeout=5).values():
                    f.result(10)
                created = time.monotonic() - killed
            except Exception:  # noqa: BLE001 - the controller is moving: try again
                time.sleep(0.1)
        time.sleep(12)  # past a session timeout after the new controller took over
    finally:
        stop.set()
        t.join(10)
        pr.flush(60)
        c.start(victim, wait=False)
    around = [a for a in acks if a > killed - 1]
    gaps = [b - a for a, b in zip(around, around[1:], strict=False)]
    return {"victim": victim, "new_controller": new, "active_s": active_s, "create_topic_s": created,
            "max_ack_gap_s": max(gaps) if gaps else None}


def run_once(n: int, rate: int) -> dict:
    from confluent_kafka.admin import AdminClient, NewTopic

    c = Cluster()
    try:
        t0 = time.monotonic()
        for i in range(3):
            c.start(i, wait=False)
        for i in range(3):
            bb.wait_port("127.0.0.1", c.ports[i], c.procs[i])
        ports_open = time.monotonic() - t0
        admin = AdminClient({"bootstrap.servers": c.bootstrap})
        for f in admin.create_topics([NewTopic("bench-repl", 1, 3), NewTopic("bench-lat", 1, 3)]).values():
            f.result(30)
        topics = time.monotonic() - t0
        wait_until(lambda: all(len(partitions(admin, t)[0].isrs) == 3 for t in ("bench-repl", "bench-lat")), 30)
        out: dict = {"startup": {"ports_open_s": round(ports_open, 3), "topics_created_s": round(topics, 3)}}
        c0 = c.cpu()
        out["throughput"] = bb.produce(c.bootstrap, "bench-repl", n, "all")
        out["throughput"]["brokers_cpu_s"] = c.cpu() - c0
        out["latency"] = bb.paced_latency(c.bootstrap, "bench-lat", rate, 5.0)
        out["failover"] = failover(c, admin)
        out["restart"] = restart_at_once(c, admin)
        out["controller_failover"] = controller_failover(c, admin)
        return out
    finally:
        c.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--messages", type=int, default=500_000)
    ap.add_argument("--rate", type=int, default=10_000, help="msgs/s of the latency run")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    runs = [run_once(args.messages, args.rate) for _ in range(args.repeat)]
    best = {
        "throughput": max((r["throughput"] for r in runs), key=lambda x: x["msgs_per_s"]),
        "latency": min((r["latency"] for r in runs), key=lambda x: x["p99_ms"]),
        "failover": min((r["failover"] for r in runs), key=lambda x: x["failover_s"] or 1e9),
        "startup": min((r["startup"] for r in runs), key=lambda x: x["ports_open_s"]),
        "restart": min((r["restart"] for r in runs), key=lambda x: x["in_every_isr_s"] or 1e9),
        "controller_failover": min((r["controller_failover"] for r in runs), key=lambda x: x["active_s"] or 1e9),
    }
    load = bb.loadavg()
    if args.json:
        print(json.dumps({"messages": args.messages, "runs": runs, "best": best, "loadavg": load}))
        return 0
    t, lat, f, st = best["throughput"], best["latency"], best["failover"], best["startup"]
    print(f"wrack-broker x3 (each also a controller quorum voter), RF=3, min.insync.replicas=2, acks=all, best of {len(runs)}"
          f" (load average {' '.join(load)})")
    print(f"  start-up    3 processes spawned -> every client port open {st['ports_open_s']:.2f} s,"
          f" CreateTopics done {st['topics_created_s']:.2f} s")
    print(f"  throughput  {t['msgs_per_s']:>10,.0f} msgs/s {t['mb_per_s']:6.1f} MB/s  ({args.messages:,} x 100 B,"
          f" brokers' CPU {t['brokers_cpu_s']:.1f} s of {t['seconds']:.1f} s)")
    print(f"  latency     at {lat['rate']:,} msgs/s: p50 {lat['p50_ms']:.1f} ms  p99 {lat['p99_ms']:.1f} ms"
          f"  p999 {lat['p999_ms']:.1f} ms")
    fs = f"{f['failover_s']:.1f} s" if f["failover_s"] is not None else "no delivery within 60 s"
    rj = f"{f['rejoin_isr_s']:.1f} s" if f["rejoin_isr_s"] is not None else "not within 90 s"
    print(f"  failover    leader {f['victim']} SIGKILLed -> first acked produce after {fs} (new leader {f['new_leader']});"
          f" restarted broker back in the ISR after {rj}")
    r = best["restart"]
    print(f"  restart     broker {r['victim']} SIGKILLed and started again at once -> serving (registered, unfenced)"
          f" after {r['serving_s']:.2f} s, back in every ISR after "
          + (f"{r['in_every_isr_s']:.2f} s" if r["in_every_isr_s"] is not None else "not within 60 s"))
    cf = best["controller_failover"]
    fmt = lambda v: f"{v:.2f} s" if v is not None else "never"  # noqa: E731
    print(f"  controller  active controller {cf['victim']} SIGKILLed -> node {cf['new_controller']} active after"
          f" {fmt(cf['active_s'])}, CreateTopics done after {fmt(cf['create_topic_s'])}, longest gap between acked"
          f" sends {fmt(cf['max_ack_gap_s'])}")
    print("  targets: >= 50,000 msgs/s, failover < 12 s with default timeouts, a restarted broker serving within 2 s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
