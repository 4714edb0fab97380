"""Helpers: a TCP listener on every node and a reachability matrix measured from inside the nodes."""

from __future__ import annotations

import json
import socket
import time

from clusters.node import DaemonSpec

PORT = 7300

_PROBE = """
import json, socket, sys, threading
targets = json.loads(sys.argv[1]); res = {}
def probe(name, addr):
    try:
        s = socket.create_connection((addr, PORT), timeout=0.6); ok = s.recv(2) == b"hi"; s.close()
    except OSError:
        ok = False
    res[name] = ok
ts = [threading.Thread(target=probe, args=kv) for kv in targets.items()]
[t.start() for t in ts]; [t.join() for t in ts]
print(json.dumps(res))
""".replace("PORT", str(PORT))


def start_listeners(cluster) -> None:
    script = ("import socket;s=socket.socket();s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1);"
              "import sys;s.bind((sys.argv[1],int(sys.argv[2])));s.listen(64)\n"
              "while True:\n c,_=s.accept();c.sendall(b'hi');c.close()")
    for n in cluster.nodes:
        n.start_daemon(DaemonSpec("listener", ["python3", "-c", script, n.address, str(PORT)], n.path("listener.pid"),
                                  n.path("listener.log")))
    for n in cluster.nodes:
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection((n.address, PORT), timeout=0.5).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.02)


def reachability(cluster) -> set[tuple[str, str]]:
    """(src, dst) pairs where src could open a TCP connection to dst's listener."""
    from concurrent.futures import ThreadPoolExecutor

    def one(n):
        targets = {m.name: m.address for m in cluster.nodes if m.name != n.name}
        for _ in range(3):  # a loaded docker exec now and then returns no output at all: ask again
            r = n.exec(["python3", "-c", _PROBE, json.dumps(targets)], timeout=30)
            if r.stdout.strip():
                break
        assert r.stdout.strip(), f"{n.name}: the reachability probe printed nothing (stderr: {r.stderr[-500:]!r})"
        return {(n.name, dst) for dst, ok in json.loads(r.stdout).items() if ok}

    with ThreadPoolExecutor(len(cluster.nodes)) as ex:
        return set().union(*ex.map(one, cluster.nodes))


def all_pairs(cluster) -> set[tuple[str, str]]:
    names = [n.name for n in cluster.nodes]
    return {(a, b) for a in names for b in names if a != b}
