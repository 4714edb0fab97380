"""Command line of the LazyFS daemon and its control client (runs on a node).

    python -m nemesis.lazyfs mount BACKING MOUNTPOINT --control SOCK
        [--metadata posix|ordered|immediate] [--passthrough] [--cache-limit-mb N] [--direct-io]
    python -m nemesis.lazyfs ctl SOCK CMD [--args JSON] [--wait SECONDS]

`mount` serves BACKING/data at MOUNTPOINT in the foreground until it is unmounted
(`fusermount3 -u MOUNTPOINT`, or SIGTERM), answering control commands on SOCK once the
mount is up. `ctl` sends one command (control.py lists them) and prints the JSON answer.
Exit codes: 0 done, 1 the daemon answered with an error or was unreachable, 254 bad arguments.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import resource
import sys
from typing import NoReturn

from nemesis.lazyfs.control import ControlError, request, serve


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(254, f"{self.prog}: {message}\n")


def _mount(a: argparse.Namespace) -> int:
    # lazy: mfusepy loads libfuse at import (~40 ms; fails where it is missing); `ctl` needs neither
    from nemesis.lazyfs.fs import LazyFS
    from nemesis.lazyfs.mount import mount  # lazy: as above

    if not os.path.isdir(a.mountpoint):
        print(f"lazyfs: mountpoint {a.mountpoint} is not a directory", file=sys.stderr)
        return 254
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s lazyfs %(levelname)s %(message)s")
    fs = LazyFS(a.backing, metadata=a.metadata, lazy=not a.passthrough,
                cache_limit=a.cache_limit_mb << 20, direct_io=a.direct_io)
    control = os.path.abspath(a.control)
    fs.on_init = lambda: (serve(fs, control), print(f"lazyfs: serving {fs.data} at {a.mountpoint}", flush=True))
    mount(fs, os.path.abspath(a.mountpoint))
    print("lazyfs: unmounted", flush=True)
    return 0


def _ctl(a: argparse.Namespace) -> int:
    try:
        args = json.loads(a.args) if a.args else {}
        if not isinstance(args, dict):
            raise ValueError("not a JSON object")
    except ValueError as e:
        print(f"lazyfs ctl: --args: {e}", file=sys.stderr)
        return 254
    try:
        ans = request(a.socket, a.cmd, wait=a.wait, **args)
    except ControlError as e:
        print(str(e), file=sys.stderr)
        return 1
    print(json.dumps(ans))
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = _Parser(prog="python -m nemesis.lazyfs", description="LazyFS-like FUSE file system (power loss)")
    sub = ap.add_subparsers(dest="what", required=True)
    m = sub.add_parser("mount", help="serve BACKING/data at MOUNTPOINT (foreground)")
    m.add_argument("backing")
    m.add_argument("mountpoint")
    m.add_argument("--control", required=True, help="Unix socket for control commands")
    m.add_argument("--metadata", default="posix", choices=["posix", "ordered", "immediate"])
    m.add_argument("--passthrough", action="store_true", help="start in pass-through mode")
    m.add_argument("--cache-limit-mb", type=int, default=512)
    m.add_argument("--direct-io", action="store_true", help="bypass the kernel page cache")
    c = sub.add_parser("ctl", help="send one control command")
    c.add_argument("socket")
    c.add_argument("cmd")
    c.add_argument("--args", help="JSON object of arguments")
    c.add_argument("--wait", type=float, default=0.0, help="retry connecting for this long")
    for p in (m, c):
        p.error = _Parser.error.__get__(p)  # type: ignore[method-assign]
    a = ap.parse_args(argv)
    return _mount(a) if a.what == "mount" else _ctl(a)


if __name__ == "__main__":
    sys.exit(main())
