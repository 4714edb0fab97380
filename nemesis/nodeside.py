"""Running the project's own tools on a node (the LazyFS daemon, the clock strober and
probe, file corruption): which Python has the project there.

`node_python(node)`: the node's `python` attribute when a backend sets one; otherwise the
first of `ROOT/venv/bin/python` (the ssh backend's install), this process's interpreter
(the local backend shares the host's files) and `python3` that can import `nemesis`.
The answer is cached per node.
"""

from __future__ import annotations

import shlex
import sys
import threading
from typing import Any

_cache: dict[tuple[str, str, str], str] = {}
_lock = threading.Lock()


def node_python(node: Any) -> str:
    p = getattr(node, "python", None)
    if isinstance(p, str) and p:
        return p
    key = (type(node).__name__, node.name, node.address)
    with _lock:
        if key in _cache:
            return _cache[key]
    cands = [node.path("venv", "bin", "python"), sys.executable, "python3"]
    script = ("for p in " + " ".join(shlex.quote(c) for c in cands) + "; do "
              "command -v \"$p\" >/dev/null 2>&1 && \"$p\" -c 'import nemesis' 2>/dev/null && echo \"$p\" && exit 0; "
              "done; exit 1")
    res = node.sh(script, check=False, timeout=60)
    if not res.ok:
        raise RuntimeError(f"{node.name}: no Python that can import the project's `nemesis` package "
                           f"(tried {', '.join(cands)})")
    found = res.stdout.strip().splitlines()[-1]
    with _lock:
        _cache[key] = found
    return found
