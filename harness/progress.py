"""Progress of a running test on the terminal (rich), or plain phase lines when not a tty.

`Progress(enabled)` is fed by the runner: `phase(name, limit_s)` when a phase starts,
`event(ev)` for every history event (counts ok/fail/info and faults), `close()` at the end.
All output goes to stderr so stdout stays machine-readable (`--json`).
"""

from __future__ import annotations

import sys
import threading
import time
from collections import Counter
from collections.abc import Mapping
from typing import Any


class Progress:
    def __init__(self, enabled: bool = True, live: bool | None = None):
        self.enabled = enabled
        self.live_wanted = sys.stderr.isatty() if live is None else live
        self.counts: Counter[str] = Counter()
        self.faults: list[str] = []
        self.phase_name = ""
        self.phase_start = time.monotonic()
        self.phase_limit: float | None = None
        self._live: Any = None
        self._lock = threading.Lock()

    def _render(self) -> Any:
        # lazy: rich (harness extra) takes ~30 ms; `wrack` imports this module at every start
        from rich.text import Text

        el = time.monotonic() - self.phase_start
        lim = f"/{self.phase_limit:.0f}" if self.phase_limit else ""
        t = Text()
        t.append(f"{self.phase_name:<10}", style="bold cyan")
        t.append(f" {el:5.1f}{lim} s  ")
        t.append(f"ok {self.counts['ok']}", style="green")
        t.append(f"  fail {self.counts['fail']}", style="yellow")
        t.append(f"  info {self.counts['info']}", style="red")
        if self.faults:
            t.append("  last fault: " + self.faults[-1], style="magenta")
        return t

    def phase(self, name: str, limit: float | None = None) -> None:
        if not self.enabled:
            return
        with self._lock:
            self.phase_name, self.phase_start, self.phase_limit = name, time.monotonic(), limit
            if self.live_wanted:
                if self._live is None:
                    # lazy: rich: see _render()
                    from rich.console import Console
                    from rich.live import Live

                    self._live = Live(self._render(), console=Console(stderr=True), refresh_per_second=4,
                                      get_renderable=self._render, transient=False)
                    self._live.start()
            else:
                sys.stderr.write(f"wrack: {name}" + (f" ({limit:g} s)" if limit else "") + "\n")
                sys.stderr.flush()

    def event(self, ev: Mapping[str, Any]) -> None:
        if not self.enabled:
            return
        if ev.get("process") == "nemesis":
            self.faults.append(str(ev.get("f")))
        elif ev.get("type") != "invoke":
            self.counts[ev.get("type", "?")] += 1

    def message(self, text: str) -> None:
        if not self.enabled:
            return
        if self._live is not None:
            self._live.console.print(text)
        else:
            sys.stderr.write(text + "\n")

    def close(self) -> None:
        with self._lock:
            if self._live is not None:
                self._live.stop()
                self._live = None
