"""A stand-in broker for clock tests: listens on its PLAINTEXT listener and answers each
connection with one JSON line: its wall clock (`time.time_ns()`, faked by libfaketime when
preloaded) and how long `time.sleep(0.05)` and `asyncio.sleep(0.05)` really took on the
monotonic clock (they must keep real durations under the preload)."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import sys
import time


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", required=True)
    a, _ = ap.parse_known_args()
    with open(a.config) as f:
        props = dict(line.split("=", 1) for line in f.read().splitlines() if "=" in line)
    t = time.monotonic()
    time.sleep(0.05)
    sleep_s = time.monotonic() - t
    t = time.monotonic()
    asyncio.run(asyncio.sleep(0.05))
    asleep_s = time.monotonic() - t
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    host, port = props["listeners"].split(",")[0].split("://", 1)[1].rsplit(":", 1)
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((host, int(port)))
    s.listen(16)
    while True:
        c, _ = s.accept()
        with c:
            c.sendall(json.dumps({"time_ns": time.time_ns(), "sleep_s": sleep_s, "asyncio_sleep_s": asleep_s,
                                  "preload": os.environ.get("LD_PRELOAD", "")}).encode() + b"\n")


if __name__ == "__main__":
    main()
