"""Cluster up/down times per backend (and what a fault costs on the local backend).

    .venv/bin/python bench/cluster.py [--rounds N] [--nodes N] [--backends local,docker] [--fuse-mb N]
                                      [--docker-from-nothing]

Prints, per backend and transport: median and max of `create` (nodes usable) and
`teardown`, plus, for the local backend, a partition start+heal and an exec round trip.
Target (issue 6): five local nodes up in at most 3 s. Backends that are not available
here (not root, no Docker, module missing) are reported as skipped. The docker backend's
figures come from its own `create`/`teardown` through the same registry, after a line for
its node image: the time to check (and, when the source changed, refresh) it, or with
`--docker-from-nothing` the time to build all three stages after removing every cached
`wrack-node*` image (debootstrap included; slow, and it empties the cache on purpose).

FUSE (`--fuse-mb`, 0 to skip): on one local node, the power-loss file system (LazyFS in
Python, mounted at the broker's data dir) against the bare file system of the same node:
sequential 1 MiB and 4 KiB writes of `--fuse-mb` MiB followed by one fsync (MB/s), 1 KiB
write+fsync pairs (ops/s), and how long dropping that much unsynced data takes. Best of
`--rounds`; the load average is printed with the figures.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
import uuid

from clusters.backends import backend
from clusters.node import ClusterSpec


def _fmt(xs: list[float]) -> str:
    return f"median {statistics.median(xs):6.3f} s   max {max(xs):6.3f} s"


def bench_docker_image(from_nothing: bool) -> bool:
    """Print the node image's build (or check) time; False when docker is not usable here."""
    try:
        from clusters import docker, docker_image
    except ValueError as e:
        print(f"docker   skipped: {e}")
        return False
    if not docker.available():
        print("docker   skipped: no Docker daemon answers")
        return False
    c = docker.client()
    if from_nothing:
        for kind in ("node", "deps", "base"):
            for img in c.images.list(filters={"label": f"wrack.image={kind}"}):
                c.images.remove(img.id, force=True)
    t = time.perf_counter()
    with docker_image.image_lock():
        tag = docker.node_image(c)
    with open("/proc/loadavg") as f:
        load = " ".join(f.read().split()[:3])
    what = "built from nothing" if from_nothing else "checked/refreshed"
    print(f"{'docker/api':14s} image {tag} {what} in {time.perf_counter() - t:.1f} s (load average {load})")
    return True


def bench_backend(name: str, transport: str, nodes: int, rounds: int, label: str | None = None) -> None:
    try:
        mod = backend(name)
    except ValueError as e:
        print(f"{name:8s} skipped: {e}")
        return
    ups, downs, parts, execs = [], [], [], []
    for _ in range(rounds):
        cname = f"bench{uuid.uuid4().hex[:6]}"
        t = time.perf_counter()
        try:
            c = mod.create(ClusterSpec(name=cname, nodes=nodes, transport=transport))
        except (PermissionError, OSError, ValueError) as e:
            print(f"{name:8s} skipped: {e}")
            mod.force_down(cname)
            return
        ups.append(time.perf_counter() - t)
        try:
            t = time.perf_counter()
            for _ in range(10):
                c.nodes[0].exec(["true"])
            execs.append((time.perf_counter() - t) / 10)
            from nemesis.core import FaultOp, Nemesis

            nem = Nemesis(c, rng=random.Random(1))
            t = time.perf_counter()
            nem.invoke(FaultOp("start-partition", "halves"))
            nem.invoke(FaultOp("stop-partition"))
            parts.append(time.perf_counter() - t)
        finally:
            t = time.perf_counter()
            c.teardown()
            downs.append(time.perf_counter() - t)
    label = label or f"{name}/{transport}"
    print(f"{label:14s} {nodes} nodes  up    {_fmt(ups)}")
    print(f"{label:14s} {nodes} nodes  down  {_fmt(downs)}")
    print(f"{label:14s} partition start+heal {_fmt(parts)}")
    print(f"{label:14s} exec round trip      {statistics.median(execs) * 1000:6.1f} ms")


FS_BENCH = r"""
import json, os, sys, time
d, mb = sys.argv[1], int(sys.argv[2])
os.makedirs(d, exist_ok=True)
out = {}
for bs in (1 << 20, 4096):
    data = os.urandom(bs)
    p = os.path.join(d, "seq%d" % bs)
    fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
    t = time.perf_counter()
    for _ in range((mb << 20) // bs):
        os.write(fd, data)
    w = time.perf_counter() - t
    os.fsync(fd)
    total = time.perf_counter() - t
    os.close(fd)
    os.unlink(p)
    out["write_%d" % bs] = mb / w
    out["write_fsync_%d" % bs] = mb / total
p = os.path.join(d, "small")
fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
data = os.urandom(1024)
t = time.perf_counter()
for _ in range(1000):
    os.write(fd, data)
    os.fsync(fd)
out["write_fsync_ops"] = 1000 / (time.perf_counter() - t)
os.close(fd)
os.unlink(p)
print(json.dumps(out))
"""


FILL_UNSYNCED = r"""
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
data = os.urandom(1 << 20)
for _ in range(int(sys.argv[2])):
    os.write(fd, data)
os.close(fd)
"""


def bench_fuse(rounds: int, mb: int) -> None:
    """LazyFS against the bare file system on one local node (see the module docstring)."""
    import json

    from clusters import local
    from nemesis.lazyfs.hook import LazyFSHook
    from nemesis.nodeside import node_python

    try:
        c = local.create(ClusterSpec(name=f"benchfs{uuid.uuid4().hex[:6]}", nodes=1))
    except (PermissionError, OSError, ValueError) as e:
        print(f"fuse     skipped: {e}")
        return
    try:
        node = c.nodes[0]
        hook = LazyFSHook()
        hook.mount(node)
        py = node_python(node)
        res: dict[str, list[dict[str, float]]] = {"bare": [], "lazyfs": []}
        losses = []
        for _ in range(rounds):
            for label, d in (("bare", node.path("bench-bare")), ("lazyfs", hook.mountpoint(node) + "/bench")):
                r = node.exec([py, "-c", FS_BENCH, d, str(mb)], timeout=600)
                res[label].append(json.loads(r.stdout))
            node.exec([py, "-c", FILL_UNSYNCED, hook.mountpoint(node) + "/lose", str(mb)], timeout=600)
            t = time.perf_counter()
            hook.lose(node)
            losses.append(time.perf_counter() - t)
        hook.unmount(node)
        with open("/proc/loadavg") as f:
            load = " ".join(f.read().split()[:3])
        print(f"fuse     {mb} MiB per run, best of {rounds}, load average {load}")
        rows = [("1 MiB writes, MB/s", "write_1048576"), ("1 MiB writes + fsync, MB/s", "write_fsync_1048576"),
                ("4 KiB writes, MB/s", "write_4096"), ("4 KiB writes + fsync, MB/s", "write_fsync_4096"),
                ("1 KiB write+fsync, ops/s", "write_fsync_ops")]
        print(f"{'':30s} {'bare':>10s} {'lazyfs':>10s} {'ratio':>7s}")
        for label, key in rows:
            b = max(r[key] for r in res["bare"])
            z = max(r[key] for r in res["lazyfs"])
            print(f"{label:30s} {b:10.0f} {z:10.0f} {z / b:7.2f}")
        print(f"{'drop ' + str(mb) + ' MiB unsynced, s':30s} {'':10s} {min(losses):10.3f}")
    finally:
        c.teardown()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--nodes", type=int, default=5)
    ap.add_argument("--backends", default="local,docker")
    ap.add_argument("--fuse-mb", type=int, default=64, help="MiB per FUSE throughput run (0: skip)")
    ap.add_argument("--docker-from-nothing", action="store_true",
                    help="remove the cached docker node images first and time the full build")
    a = ap.parse_args()
    for b in filter(None, a.backends.split(",")):
        if b == "local":
            bench_backend("local", "nsenter", a.nodes, a.rounds)
            bench_backend("local", "ssh", a.nodes, a.rounds)
        elif b == "docker":
            if bench_docker_image(a.docker_from_nothing):
                bench_backend("docker", "nsenter", a.nodes, a.rounds, label="docker/api")
        else:
            bench_backend(b, "nsenter", a.nodes, a.rounds)
    if a.fuse_mb > 0:
        bench_fuse(a.rounds, a.fuse_mb)


if __name__ == "__main__":
    main()
