"""Single-node broker throughput with librdkafka (confluent-kafka) on loopback.

    .venv/bin/python bench/broker.py [--messages N] [--repeat R] [--profile FILE] [--json]

Starts `wrack-broker` (its own controller, default flush policy) in a temp dir, creates
one topic per run (1 partition, RF 1), produces N 100-byte values with batching on
(linger.ms=5, batch.num.messages=10000) with acks=1 and with acks=all, then consumes
the acks=1 topic from the beginning (with librdkafka's defaults, and again with
fetch.queue.backoff.ms=10: by default librdkafka stops fetching for 1 s whenever
100,000 messages wait in its queue, which caps a fast reader near 130,000 msgs/s
whatever the broker). Prints msgs/s and MB/s, the produce latency (p50,
p99 of a 1-in-100 sample: time from produce() to the delivery report, at full speed,
so it includes client-side queueing), a paced acks=all run's latency (p50/p99/p999 of
every message at --rate msgs/s: the broker's own latency), the broker's CPU seconds per phase (how close the
broker is to being the bound; the client shares the same 2 cores) and the load
average. Best of R runs. Targets (issue 4): produce >= 150,000 msgs/s, consume >=
300,000 msgs/s. `--profile FILE` runs the broker under cProfile and prints its top
functions.
"""

from __future__ import annotations

import importlib
import os
import sys

if __name__ == "broker":  # pragma: no cover
    # Imported as `broker` because bench/ is first on sys.path (a script in bench/ doing
    # `import broker`): hand the name over to the real package.
    _here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]
    del sys.modules[__name__]
    sys.modules[__name__] = importlib.import_module(__name__)

import argparse  # noqa: E402
import json  # noqa: E402
import shutil  # noqa: E402
import signal  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repo root, before bench/ (bench/harness.py)
from harness import netutil  # noqa: E402
from harness.netutil import free_port  # noqa: E402

VALUE = b"x" * 100
BROKER = str(Path(sys.executable).parent / "wrack-broker")


def wait_port(host: str, port: int, proc: subprocess.Popen, timeout: float = 60) -> None:
    try:
        netutil.wait_port(host, port, timeout, proc)
    except RuntimeError:
        raise SystemExit(f"broker exited with {proc.returncode}") from None
    except TimeoutError:
        raise SystemExit(f"broker not listening on {host}:{port}") from None


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process, in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def loadavg() -> list[str]:
    with open("/proc/loadavg") as f:
        return f.read().split()[:3]


def percentile(xs: list[float], q: float) -> float:
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def produce(bs: str, topic: str, n: int, acks: str, partition: int = 0, extra: dict | None = None) -> dict:
    from confluent_kafka import Producer

    lat: list[float] = []
    errors: list[str] = []
    pr = Producer({"bootstrap.servers": bs, "acks": acks, "linger.ms": 5, "batch.num.messages": 10000,
                   "queue.buffering.max.messages": 1000000, **(extra or {})})
    now = time.perf_counter

    def sampled(err, _msg, t=0.0):  # noqa: ANN001 - librdkafka callback
        if err is not None:
            errors.append(str(err))
        else:
            lat.append(now() - t)

    def report(err, _msg):  # noqa: ANN001
        if err is not None:
            errors.append(str(err))

    t0 = now()
    for i in range(n):
        while True:
            try:
                if i % 100 == 0:
                    t = now()
                    pr.produce(topic, VALUE, partition=partition, on_delivery=lambda e, m, t=t: sampled(e, m, t))
                else:
                    pr.produce(topic, VALUE, partition=partition)
                break
            except BufferError:
                pr.poll(0.005)
    left = pr.flush(300)
    t1 = now()
    if left or errors:
        raise SystemExit(f"{left} undelivered, {len(errors)} errors ({errors[:3]})")
    return {"msgs_per_s": n / (t1 - t0), "mb_per_s": n * len(VALUE) / (t1 - t0) / 1e6, "seconds": t1 - t0,
            "p50_ms": percentile(lat, 0.5) * 1000, "p99_ms": percentile(lat, 0.99) * 1000, "samples": len(lat)}


def paced_latency(bs: str, topic: str, rate: int, seconds: float, acks: str = "all", partition: int = 0) -> dict:
    """Produce `rate` msgs/s for `seconds` (bursts every millisecond), every message's
    latency from produce() to its delivery report: the broker's latency, not queueing."""
    from confluent_kafka import Producer

    lat: list[float] = []
    errors: list[str] = []
    pr = Producer({"bootstrap.servers": bs, "acks": acks, "linger.ms": 1})
    now = time.perf_counter

    def report(err, _msg, t=0.0):  # noqa: ANN001
        (errors.append(str(err)) if err is not None else lat.append(now() - t))

    t0 = now()
    sent = 0
    while now() - t0 < seconds:
        due = int((now() - t0) * rate)
        while sent < due:
            t = now()
            pr.produce(topic, VALUE, partition=partition, on_delivery=lambda e, m, t=t: report(e, m, t))
            sent += 1
        pr.poll(0)
        time.sleep(0.001)
    pr.flush(60)
    elapsed = now() - t0
    return {"rate": rate, "sent": sent, "achieved_per_s": len(lat) / elapsed, "errors": len(errors),
            "p50_ms": percentile(lat, 0.5) * 1000, "p99_ms": percentile(lat, 0.99) * 1000,
            "p999_ms": percentile(lat, 0.999) * 1000}


def consume(bs: str, topic: str, n: int, partition: int = 0, extra: dict | None = None) -> dict:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bs, "group.id": "bench", "enable.auto.commit": False,
                  "fetch.max.bytes": 52428800, **(extra or {})})
    c.assign([TopicPartition(topic, partition, 0)])
    got = 0
    t0 = time.perf_counter()
    while got < n and time.perf_counter() - t0 < 300:
        got += sum(1 for m in c.consume(10000, 1.0) if m.error() is None)
    t1 = time.perf_counter()
    c.close()
    if got < n:
        raise SystemExit(f"consumed only {got}/{n}")
    return {"msgs_per_s": n / (t1 - t0), "mb_per_s": n * len(VALUE) / (t1 - t0) / 1e6, "seconds": t1 - t0}


def run_once(n: int, profile: str | None, rate: int = 20000) -> dict:
    from confluent_kafka.admin import AdminClient, NewTopic

    base = tempfile.mkdtemp(prefix="wrack-bench-broker-")
    port = free_port()
    env = dict(os.environ)
    if profile:
        env["WRACK_BROKER_PROFILE"] = profile
    with open(f"{base}/broker.out", "wb") as out_file:
        proc = subprocess.Popen(
            [BROKER, "--override", "node.id=0", "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
             "--override", f"log.dirs={base}/data", "--override", "wrack.log.level=WARNING"],
            stdout=subprocess.DEVNULL, stderr=out_file, env=env)
    try:
        wait_port("127.0.0.1", port, proc)
        bs = f"127.0.0.1:{port}"
        admin = AdminClient({"bootstrap.servers": bs})
        for f in admin.create_topics([NewTopic("bench-acks1", 1, 1), NewTopic("bench-acksall", 1, 1)]).values():
            f.result(30)
        out: dict = {}
        for name, topic, acks in (("produce_acks1", "bench-acks1", "1"), ("produce_acksall", "bench-acksall", "all")):
            c0 = cpu_seconds(proc.pid)
            out[name] = produce(bs, topic, n, acks)
            out[name]["broker_cpu_s"] = cpu_seconds(proc.pid) - c0
        c0 = cpu_seconds(proc.pid)
        out["consume"] = consume(bs, "bench-acks1", n)
        out["consume"]["broker_cpu_s"] = cpu_seconds(proc.pid) - c0
        # librdkafka stops fetching for fetch.queue.backoff.ms (1 s) once queued.min.messages
        # (100,000) wait in its queue: the same read with a 10 ms backoff shows the pipeline
        c0 = cpu_seconds(proc.pid)
        out["consume_backoff10"] = consume(bs, "bench-acks1", n, extra={"fetch.queue.backoff.ms": 10})
        out["consume_backoff10"]["broker_cpu_s"] = cpu_seconds(proc.pid) - c0
        out["paced"] = paced_latency(bs, "bench-acksall", rate, 3.0)
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
        return out
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        shutil.rmtree(base, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=1, help="runs; the best of each figure is printed")
    ap.add_argument("--rate", type=int, default=20000, help="msgs/s of the paced latency run (acks=all)")
    ap.add_argument("--profile", metavar="FILE", help="cProfile the broker into FILE and print its top functions")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    runs = [run_once(args.messages, args.profile, args.rate) for _ in range(args.repeat)]
    best = {k: max((r[k] for r in runs), key=lambda x: x["msgs_per_s"]) for k in runs[0] if k != "paced"}
    best["paced"] = min((r["paced"] for r in runs), key=lambda x: x["p99_ms"])
    load = loadavg()
    if args.json:
        print(json.dumps({"messages": args.messages, "runs": runs, "best": best, "loadavg": load}))
    else:
        print(f"wrack-broker, 1 partition, {args.messages:,} x 100-byte values, librdkafka batching, best of {len(runs)}"
              f" (load average {' '.join(load)})")
        for k in ("produce_acks1", "produce_acksall"):
            r = best[k]
            print(f"  {k:16s} {r['msgs_per_s']:>10,.0f} msgs/s {r['mb_per_s']:7.1f} MB/s   latency p50 {r['p50_ms']:7.1f} ms"
                  f" p99 {r['p99_ms']:7.1f} ms   broker CPU {r['broker_cpu_s']:.1f} s of {r['seconds']:.1f} s")
        for key, label in (("consume", "consume"), ("consume_backoff10", "consume (*)")):
            r = best[key]
            print(f"  {label:16s} {r['msgs_per_s']:>10,.0f} msgs/s {r['mb_per_s']:7.1f} MB/s"
                  f"   broker CPU {r['broker_cpu_s']:.1f} s of {r['seconds']:.1f} s")
        r = best["paced"]
        print(f"  {'paced acks=all':16s} {r['achieved_per_s']:>10,.0f} msgs/s (asked {r['rate']:,})   latency p50 {r['p50_ms']:.1f} ms"
              f" p99 {r['p99_ms']:.1f} ms p999 {r['p999_ms']:.1f} ms")
        print("  (*) fetch.queue.backoff.ms=10: librdkafka's default (1000) pauses fetching for 1 s whenever"
              " 100,000 messages are queued")
        print("  targets: produce >= 150,000 msgs/s (acks=1 and acks=all), consume >= 300,000 msgs/s")
    if args.profile:
        import pstats

        pstats.Stats(args.profile).sort_stats("tottime").print_stats(20)
    return 0


if __name__ == "__main__":
    sys.exit(main())
