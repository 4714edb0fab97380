"""The stand-in system: its DB (one server.py per node), its register workload (a client over
HTTP, a generator of reads, writes and compare-and-sets on a few keys at a time, and the
linearizability checker's cas-register model per key), the generic faults, and `SUITE`.
It uses only floors below suites/ and suites/base.py, as a system's folder must."""

from __future__ import annotations

import itertools
import sys
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from checkers.linearizable import check_events
from clusters.db import ServiceDB
from contracts.generator import PENDING, Context, Generator, Pending
from contracts.history import read_events
from nemesis.schedule import PACKAGES
from suites.base import Suite
from workloads.base import BaseWorkload, WorkloadAnalysis, WorkloadOptions

PORT = 7070
SERVER = Path(__file__).with_name("server.py")


class StandinDB(ServiceDB):
    service = "standin"
    port = PORT

    def config_path(self, node: Any) -> str:
        return node.path(self.service, "standin.conf")

    def configure(self, node: Any) -> None:
        node.exec(["mkdir", "-p", self.data_dir(node)])
        node.write_file(self.config_path(node), f"port={PORT}\n")

    def argv(self, node: Any) -> list[str]:
        return [sys.executable, str(SERVER), node.address, str(PORT)]

    def client_address(self, node: Any) -> str:
        return f"http://{node.address}:{PORT}"


class Client:
    """Register ops against one server; a read that fails did nothing (fail), a write or cas
    whose answer never came may have happened (info)."""

    def __init__(self, url: str, timeout: float):
        self.url, self.timeout = url, timeout

    def _call(self, method: str, path: str) -> tuple[int, str]:
        req = urllib.request.Request(self.url + path, method=method)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, ""

    def invoke(self, op: Mapping[str, Any]) -> dict[str, Any]:
        k, arg = op["value"]
        try:
            if op["f"] == "read":
                code, body = self._call("GET", f"/{k}")
                return {"type": "ok", "value": [k, int(body) if code == 200 else None]}
            if op["f"] == "write":
                self._call("PUT", f"/{k}/{arg}")
                return {"type": "ok", "value": [k, arg]}
            old, new = arg
            _, body = self._call("POST", f"/{k}/{'nil' if old is None else old}/{new}")
            return {"type": "ok" if body == "true" else "fail", "value": [k, arg]}
        except OSError as e:
            return {"type": "fail" if op["f"] == "read" else "info", "error": str(e)}

    def close(self) -> None:
        return


class Ops(Generator):
    """Reads, writes (0..4) and compare-and-sets on two keys at a time, a fresh key every 100 ops."""

    def __init__(self) -> None:
        self.fresh = itertools.count()
        self.active = [[next(self.fresh), 0], [next(self.fresh), 0]]

    def op(self, ctx: Context) -> dict[str, Any] | Pending | None:
        p = ctx.random_free_process()
        if p is None:
            return PENDING
        slot = self.active[ctx.rng.randrange(2)]
        slot[1] += 1
        if slot[1] >= 100:
            slot[:] = [next(self.fresh), 0]
        f = ("read", "write", "cas")[ctx.rng.randrange(3)]
        v = None if f == "read" else ctx.rng.randrange(5) if f == "write" else [ctx.rng.randrange(5), ctx.rng.randrange(5)]
        return {"process": p, "f": f, "value": [slot[0], v], "time": ctx.time}


class RegisterWorkload(BaseWorkload):
    name = "register"
    checker = "linearizable"

    def client(self, thread: int, process: int, address: str) -> Client:
        return Client(address.split(",")[0], self.opts.request_timeout)

    def generator(self) -> Generator:
        return Ops()

    def analyze(self, history_path: Path, time_limit: float | None = None) -> WorkloadAnalysis:
        return WorkloadAnalysis(dict(check_events(read_events(history_path), "cas-register", time_limit=time_limit)))


class StandinSuite(Suite):
    name = "standin"
    summary = "a stand-in key-value store with no replication (tests/suites/standin_kv)"
    workloads = {"register": lambda options: RegisterWorkload(WorkloadOptions.from_test(options))}
    default_workload = "register"

    def make_db(self, options: Any, cluster: Any) -> StandinDB:
        return StandinDB(cluster)

    def fault_packages(self, topics: Mapping[str, int]) -> tuple[dict[str, Any], tuple[str, ...]]:
        return {n: PACKAGES[n] for n in ("partition", "kill", "pause")}, ("pause",)


SUITE = StandinSuite()
