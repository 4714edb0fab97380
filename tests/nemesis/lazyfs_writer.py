"""A stand-in broker for power-loss tests: on its first start it writes a Kafka-layout
segment `<log.dirs>/seg-0/00000000000000000000.log` - `--synced` bytes fsynced (file and
directories), then `--unsynced` bytes in one write, not fsynced - and reports
"synced=N unsynced=M" in `written` next to its config (outside the FUSE mount). On later
starts it leaves the data alone. It listens on its PLAINTEXT listener so wait_ready works."""

from __future__ import annotations

import argparse
import os
import signal
import socket
import sys


def pattern(n: int, salt: int) -> bytes:
    return bytes((i * 7 + salt) % 251 for i in range(n))


def fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", required=True)
    ap.add_argument("--synced", type=int, default=30000)
    ap.add_argument("--unsynced", type=int, default=5000)
    a, _ = ap.parse_known_args()
    with open(a.config) as f:
        props = dict(line.split("=", 1) for line in f.read().splitlines() if "=" in line)
    log_dir = props["log.dirs"]
    part = os.path.join(log_dir, "seg-0")
    seg = os.path.join(part, "00000000000000000000.log")
    if not os.path.exists(seg):
        os.makedirs(part, exist_ok=True)
        fsync_dir(log_dir)
        fd = os.open(seg, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        fsync_dir(part)
        os.write(fd, pattern(a.synced, 1))
        os.fsync(fd)
        os.write(fd, pattern(a.unsynced, 2))
        os.close(fd)
        status = os.path.join(os.path.dirname(a.config), "written")
        with open(status + ".tmp", "w") as f:
            f.write(f"synced={a.synced} unsynced={a.unsynced}\n")
        os.replace(status + ".tmp", status)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    host, port = props["listeners"].split(",")[0].split("://", 1)[1].rsplit(":", 1)
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((host, int(port)))
    s.listen(16)
    while True:
        c, _ = s.accept()
        c.close()


if __name__ == "__main__":
    main()
