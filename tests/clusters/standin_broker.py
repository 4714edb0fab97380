"""A stand-in for `wrack-broker` in lifecycle tests: reads `--config FILE` (and `--override
k=v`), listens on the PLAINTEXT listener, answers each connection with its node.id and
writes a marker file into log.dirs; exits 0 on SIGTERM."""

from __future__ import annotations

import argparse
import os
import signal
import socket
import sys
import threading


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", required=True)
    ap.add_argument("--override", action="append", default=[])
    a = ap.parse_args()
    props = {}
    with open(a.config) as f:
        lines = f.read().splitlines()
    for line in lines:
        if "=" in line and not line.startswith("#"):
            k, v = line.strip().split("=", 1)
            props[k] = v
    for o in a.override:
        k, v = o.split("=", 1)
        props[k] = v
    listener = props["listeners"].split(",")[0].split("://", 1)[1]
    host, port = listener.rsplit(":", 1)
    os.makedirs(props["log.dirs"], exist_ok=True)
    with open(os.path.join(props["log.dirs"], "started"), "a") as f:
        f.write(f"{os.getpid()} {os.environ.get('WRACK_TEST_ENV', '')}\n")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((host, int(port)))
    s.listen(64)
    print(f"standin broker {props['node.id']} listening on {listener}", flush=True)

    def serve(c: socket.socket) -> None:
        with c:
            c.sendall(f"{props['node.id']}\n".encode())

    while True:
        c, _ = s.accept()
        threading.Thread(target=serve, args=(c,), daemon=True).start()


if __name__ == "__main__":
    main()
