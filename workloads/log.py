"""The log workload: per-key sends that return their offset, and reads at an offset, checked
for linearizability with the `log` model (checkers/linearizable).

Keys are topic-partitions ("log0-1"). Ops:

- `send` `[key, v]` -> ok `[key, [offset, v]]` (v unique per test);
- `read` `[key, offset]` -> ok `[key, [offset, v]]`, or `[key, [offset, null]]` when the
  offset is at or beyond the partition's high watermark (not written yet, as far as a
  consumer can tell).

A read asks the leader for the high watermark, then fetches the record at the offset; a
read that cannot tell (errors, nothing arrived in time) is `fail` (reads change nothing).
Send errors are classified by `workloads.errors`. Offsets to read are drawn around the
highest offset acknowledged so far for the key, so reads race with sends.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from checkers.linearizable import check_events
from contracts.generator import PENDING, Context, Generator, Pending
from contracts.history import read_events
from workloads.base import BaseWorkload, WorkloadAnalysis, WorkloadOptions, split_key
from workloads.errors import ClientError
from workloads.kafka_io import KafkaIO


class LogGenerator(Generator):
    def __init__(self, keys: Sequence[str], opts: WorkloadOptions):
        self.keys = list(keys)
        self.opts = opts
        self.values = itertools.count(1)
        self.known: dict[str, int] = {}

    def op(self, ctx: Context) -> dict[str, Any] | Pending | None:
        p = ctx.random_free_process()
        if p is None:
            return PENDING
        rng = ctx.rng
        k = self.keys[rng.randrange(len(self.keys))]
        if rng.random() < self.opts.send_p:
            return {"process": p, "f": "send", "value": [k, next(self.values)], "time": ctx.time}
        top = self.known.get(k, -1)
        off = max(0, top + 1 - rng.randint(0, 4))
        return {"process": p, "f": "read", "value": [k, off], "time": ctx.time}

    def update(self, ctx: Context, event: Mapping[str, Any]) -> None:
        if event.get("f") == "send" and event.get("type") == "ok":
            k, (off, _v) = event["value"]
            if off > self.known.get(k, -1):
                self.known[k] = off


class LogClient:
    def __init__(self, make_io: Callable[[], KafkaIO], opts: WorkloadOptions):
        self.io = make_io()
        self.opts = opts

    def invoke(self, op: Mapping[str, Any]) -> dict[str, Any]:
        f = op["f"]
        if f == "send":
            k, v = op["value"]
            topic, part = split_key(k)
            try:
                off = self.io.send(topic, part, v)
            except ClientError as e:
                return {"type": e.send_outcome().type, "error": str(e)}
            return {"type": "ok", "value": [k, [off, v]]}
        if f == "read":
            k, off = op["value"]
            topic, part = split_key(k)
            try:
                if off >= self.io.high_watermark(topic, part):
                    return {"type": "ok", "value": [k, [off, None]]}
                self.io.assign({(topic, part): off})
                deadline = time.monotonic() + self.opts.request_timeout
                while time.monotonic() < deadline:
                    for t, p, o, v in self.io.poll(0.2, 16):
                        if (t, p, o) == (topic, part, off):
                            return {"type": "ok", "value": [k, [off, v]]}
            except ClientError as e:
                return {"type": "fail", "error": str(e)}
            return {"type": "fail", "error": "no record arrived in time"}
        return {"type": "fail", "error": f"unknown f {f!r}"}

    def close(self) -> None:
        self.io.close()


class LogWorkload(BaseWorkload):
    name = "log"
    checker = "linearizable"
    topic_prefix = "log"

    def client(self, thread: int, process: int, bootstrap: str) -> LogClient:
        acks = "all" if self.opts.acks == "mixed" else self.opts.acks
        make_io = self.io_factory(process, bootstrap)
        return LogClient(lambda: make_io(acks), self.opts)

    def generator(self) -> Generator:
        return LogGenerator(self.keys, self.opts)

    def analyze(self, history_path: Path, time_limit: float | None = None) -> WorkloadAnalysis:
        """Linearizability with the `log` model (raw: a lossy configuration's allowance is the verdict's)."""
        return WorkloadAnalysis(dict(check_events(read_events(history_path), "log", time_limit=time_limit)))
