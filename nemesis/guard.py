"""Always heal: the runner's safety net around a test on a cluster.

`always_heal(cluster, nemesis=..., db=..., run_dir=...)` is a context manager that, on the
way out (normal exit, exception, Ctrl-C, SIGTERM, or interpreter exit), runs once:
`nemesis.teardown()` (heal network, resume/start processes, registered heals such as
clocks), `db.collect` + `db.teardown` on every node, then `cluster.teardown()`.

Signals: the first SIGINT/SIGTERM raises KeyboardInterrupt in the main thread, so the
`finally` path heals and tears down; a second one while that runs skips the graceful path:
it tears the cluster down at once (`cluster.teardown()`, which removes everything by name)
and exits 130. An atexit hook covers paths that never reach `finally`.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator
from typing import Any

from clusters.node import Cluster


class Guard:
    """The cleanup state of one `always_heal` block (see the module docstring)."""

    def __init__(self, cluster: Cluster, nemesis: Any = None, db: Any = None, run_dir: str | None = None,
                 teardown: bool = True):
        self.cluster = cluster
        self.nemesis = nemesis
        self.db = db
        self.run_dir = run_dir
        self.teardown_cluster = teardown
        self.errors: list[str] = []
        self._done = False
        self._running = False
        self._signals = 0
        self._lock = threading.Lock()

    def cleanup(self) -> list[str]:
        """Heal, collect, tear down; runs once (later calls return the first run's errors)."""
        with self._lock:
            if self._done or self._running:
                return self.errors
            self._running = True
        try:
            if self.nemesis is not None:
                try:
                    self.errors += self.nemesis.teardown()
                except Exception as e:  # noqa: BLE001
                    self.errors.append(f"heal: {e}")
            if self.db is not None:
                for node in self.cluster.nodes:
                    try:
                        if self.run_dir is not None:
                            self.db.collect(node, self.run_dir)
                        self.db.teardown(node)
                    except Exception as e:  # noqa: BLE001
                        self.errors.append(f"{node.name}: {e}")
            if self.teardown_cluster:
                try:
                    self.cluster.teardown()
                except Exception as e:  # noqa: BLE001
                    self.errors.append(f"cluster teardown: {e}")
        finally:
            self._done = True
            self._running = False
        return self.errors

    def on_signal(self, signum: int, _frame: Any) -> None:
        self._signals += 1
        if self._signals == 1 and not self._running:
            raise KeyboardInterrupt(f"signal {signum}")
        # second signal (or one during cleanup): force it
        sys.stderr.write("wrack: forced teardown\n")
        with contextlib.suppress(Exception):
            self.cluster.teardown()
        os._exit(130)


@contextlib.contextmanager
def always_heal(cluster: Cluster, *, nemesis: Any = None, db: Any = None, run_dir: str | None = None,
                teardown: bool = True, handle_signals: bool = True) -> Iterator[Guard]:
    """Yield a `Guard`; heal and tear down on the way out (see the module docstring)."""
    g = Guard(cluster, nemesis, db, run_dir, teardown)
    old: dict[int, Any] = {}
    main = threading.current_thread() is threading.main_thread()
    if handle_signals and main:
        for s in (signal.SIGINT, signal.SIGTERM):
            old[s] = signal.signal(s, g.on_signal)
    atexit.register(g.cleanup)
    try:
        yield g
    finally:
        try:
            g.cleanup()
        finally:
            atexit.unregister(g.cleanup)
            for s, h in old.items():
                signal.signal(s, h)
