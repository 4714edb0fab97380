"""Where a campaign's Spark tasks run: the `--master` URL, checked before anything starts.

- `parse(url)`: `local`, `local[N]`, `local[*]`, `local[N,F]` (F attempts per task) or
  `spark://HOST:PORT` (a standalone master; `spark://H1:P1,H2:P2` for standby masters).
  Anything else is bad input (InputError: one line, exit 254).
- `probe(url, timeout)`: a `spark://` master must accept a TCP connection within `timeout`
  seconds, else InputError ("does not answer within N s"). Without it, Spark's client would
  retry its registration for about a minute before giving up.
- `wait_for_executors(sc, url, timeout)`: a master that answers but gives the application
  no executor within `timeout` seconds (no worker, or no worker with the cores and memory
  asked for) is bad input too: Spark would wait for resources forever.
- `is_local_host(url)`: whether the tasks may run on this host (local mode, or a master on
  loopback): then the driver may sweep this host's leftovers after the campaign.
"""

from __future__ import annotations

import re
import socket
import time
from typing import Any

from contracts.errors import InputError

DEFAULT_TIMEOUT = 30.0

_LOCAL = re.compile(r"local(?:\[(\*|[1-9]\d*)(?:,([1-9]\d*))?\])?")
_HOST_PORT = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?):(\d{1,5})")


def parse(url: str) -> str:
    """The master URL, checked (InputError naming it and what is expected)."""
    url = (url or "").strip()
    if _LOCAL.fullmatch(url):
        return url
    if url.startswith("spark://"):
        hosts = url[len("spark://"):].split(",")
        for hp in hosts:
            m = _HOST_PORT.fullmatch(hp)
            if not m or not 0 < int(m.group(2)) < 65536:
                raise InputError(f"bad --master {url!r}: {hp!r} is not HOST:PORT (a port from 1 to 65535)")
        return url
    raise InputError(f"bad --master {url!r} (expected spark://HOST:PORT, local[N] or local[*])")


def endpoints(url: str) -> list[tuple[str, int]]:
    """(host, port) of each master of a `spark://` URL; [] for local mode."""
    if not url.startswith("spark://"):
        return []
    out = []
    for hp in url[len("spark://"):].split(","):
        host, _, port = hp.rpartition(":")
        out.append((host.strip("[]"), int(port)))
    return out


def probe(url: str, timeout: float = DEFAULT_TIMEOUT) -> None:
    """Return once one of the masters accepts a TCP connection; InputError after `timeout` s."""
    eps = endpoints(url)
    if not eps:
        return
    deadline = time.monotonic() + timeout
    last = ""
    while True:
        for host, port in eps:
            try:
                socket.create_connection((host, port), timeout=min(2.0, max(0.1, deadline - time.monotonic()))).close()
                return
            except OSError as e:
                last = e.strerror or str(e)
        if time.monotonic() >= deadline:
            raise InputError(f"spark master {url} does not answer within {timeout:g} s ({last})")
        time.sleep(0.5)


def wait_for_executors(sc: Any, url: str, timeout: float = DEFAULT_TIMEOUT) -> int:
    """How many executors registered (local mode: 1 at once); InputError after `timeout` s
    without any on a cluster."""
    if url.startswith("local"):
        return 1
    deadline = time.monotonic() + timeout
    while True:
        n = sc._jsc.sc().getExecutorMemoryStatus().size() - 1  # the driver's block manager is listed too
        if n > 0:
            return n
        if time.monotonic() >= deadline:
            raise InputError(f"spark master {url} gave no executor within {timeout:g} s "
                             "(no worker registered, or none with the cores and memory asked for)")
        time.sleep(0.5)


def is_local_host(url: str) -> bool:
    """Whether this host runs the tasks: local mode, or every master on a loopback address."""
    if url.startswith("local"):
        return True
    return all(h in ("localhost", "::1") or h.startswith("127.") for h, _ in endpoints(url))
