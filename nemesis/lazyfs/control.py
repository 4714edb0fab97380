"""The control channel of a LazyFS daemon: a Unix stream socket, one JSON request per line,
one JSON answer per line, sent once the command is *done* (no FIFO race as with LazyFS's
named pipe: a caller that got the answer to `lose-unsynced` knows the data is gone).

Requests: {"cmd": C, ...args}; answers: {"ok": true, ...result} or {"ok": false, "error": E}.

| cmd | args | does |
| --- | --- | --- |
| `ping` | | answers {"pid": ...} once the mount is up |
| `status` | | mode, metadata mode, dirty files/bytes, journal length, counters |
| `report` | | every file with unsynced data (ranges, sizes) and the uncommitted directory ops |
| `lose-unsynced` | `torn`: false / true / N bytes, `seed` | power loss of the file system |
| `sync` | | fsync every cached file, commit every directory operation |
| `configure` | `mode`: lazy / passthrough, `metadata`: posix / ordered / immediate | syncs, then switches |
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from nemesis.lazyfs.fs import LazyFS


def _dispatch(fs: LazyFS, req: dict[str, Any]) -> dict[str, Any]:
    cmd = req.get("cmd")
    if cmd == "ping":
        return {"pid": os.getpid()}
    if cmd == "status":
        return fs.status()
    if cmd == "report":
        return fs.report()
    if cmd == "lose-unsynced":
        torn = req.get("torn", False)
        if not isinstance(torn, bool | int) or (not isinstance(torn, bool) and torn < 0):
            raise ValueError(f"torn must be false, true or a byte count, not {torn!r}")
        return fs.lose_unsynced(torn, req.get("seed"))
    if cmd == "sync":
        return fs.sync_all()
    if cmd == "configure":
        return fs.configure(req.get("mode"), req.get("metadata"))
    raise ValueError(f"unknown command {cmd!r} (ping, status, report, lose-unsynced, sync, configure)")


def serve(fs: LazyFS, path: str) -> threading.Thread:
    """Listen on `path` (replacing a stale socket) in a daemon thread; returns the thread."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    os.chmod(path, 0o600)
    srv.listen(8)

    def handle(conn: socket.socket) -> None:
        with conn, conn.makefile("rwb") as f:
            for line in f:
                try:
                    req = json.loads(line)
                    if not isinstance(req, dict):
                        raise ValueError("a request is a JSON object")
                    ans = {"ok": True, **_dispatch(fs, req)}
                except Exception as e:  # noqa: BLE001 - report every failure to the caller
                    ans = {"ok": False, "error": f"{type(e).__name__}: {e}"}
                f.write(json.dumps(ans).encode() + b"\n")
                f.flush()

    def loop() -> None:
        while True:
            conn, _ = srv.accept()
            threading.Thread(target=handle, args=(conn,), daemon=True).start()

    t = threading.Thread(target=loop, name="lazyfs-control", daemon=True)
    t.start()
    return t


class ControlError(RuntimeError):
    """The daemon answered with an error, or could not be reached."""


def request(path: str, cmd: str, *, timeout: float = 60.0, wait: float = 0.0, **args: Any) -> dict[str, Any]:
    """Send one command and return the answer; retries connecting for up to `wait` s (a
    daemon that is still mounting). Raises ControlError."""
    deadline = time.monotonic() + wait
    while True:
        try:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(timeout)
            s.connect(path)
            break
        except OSError as e:
            s.close()
            if time.monotonic() >= deadline:
                raise ControlError(f"lazyfs control socket {path}: {e.strerror or e}") from None
            time.sleep(0.02)
    with s, s.makefile("rwb") as f:
        f.write(json.dumps({"cmd": cmd, **args}).encode() + b"\n")
        f.flush()
        line = f.readline()
    if not line:
        raise ControlError(f"lazyfs control socket {path}: closed without an answer to {cmd}")
    ans = json.loads(line)
    if not ans.pop("ok", False):
        raise ControlError(f"lazyfs {cmd}: {ans.get('error')}")
    return ans
