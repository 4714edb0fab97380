"""The register workload against a real single-member etcd on 127.0.0.1 (no namespaces):
EtcdIO's semantics in both read modes, its error classification (a stopped etcd, a member
that never answers, the gateway's 503), the generator's op shapes and per-key bound, a
short concurrent run checked valid, and a stale read checked invalid."""

from __future__ import annotations

import json
import random
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import requests
from hypothesis import given, settings
from hypothesis import strategies as st

from checkers.linearizable.models import CAS_REGISTER, NIL
from contracts import generator as g
from contracts.history import HistoryWriter, pair_ops, read_events, write_history
from harness import interpreter
from suites.etcd.client import EtcdError, EtcdIO
from suites.etcd.register import (
    OPS_PER_KEY,
    VALUES,
    RegisterClient,
    RegisterGenerator,
    RegisterOptions,
    RegisterWorkload,
    active_keys,
)

ETCD = "/usr/bin/etcd"
READY_S = 60.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LocalEtcd:
    """One etcd member on 127.0.0.1 in a temp dir; `stop()` kills it, `remove()` also deletes the dir."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="wrack-etcd-"))
        cport, pport = free_port(), free_port()
        self.url = f"http://127.0.0.1:{cport}"
        peer = f"http://127.0.0.1:{pport}"
        self.log = open(self.dir / "etcd.log", "wb")  # noqa: SIM115 - closed by remove()
        self.proc = subprocess.Popen(
            ["nice", "-n", "19", ETCD, "--name", "t", "--data-dir", str(self.dir / "data"),
             "--listen-client-urls", self.url, "--advertise-client-urls", self.url,
             "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer, "--initial-cluster", f"t={peer}"],
            stdout=self.log, stderr=subprocess.STDOUT)

    def wait_ready(self) -> None:
        deadline = time.monotonic() + READY_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"etcd exited {self.proc.returncode}: {self.tail()}")
            try:
                if requests.get(self.url + "/health", timeout=1).json().get("health") == "true":
                    return
            except (requests.RequestException, ValueError):
                pass
            time.sleep(0.1)
        raise RuntimeError(f"etcd not ready after {READY_S} s: {self.tail()}")

    def tail(self) -> str:
        return (self.dir / "etcd.log").read_text(errors="replace")[-2000:]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)

    def remove(self) -> None:
        try:
            self.stop()
        finally:
            self.log.close()
            shutil.rmtree(self.dir, ignore_errors=True)


def running_etcd() -> Iterator[LocalEtcd]:
    """A ready member, removed afterwards whatever happens (the fixtures' body)."""
    e = LocalEtcd()
    try:
        e.wait_ready()
        yield e
    finally:
        e.remove()


@pytest.fixture
def etcd() -> Iterator[LocalEtcd]:
    yield from running_etcd()


@pytest.fixture(scope="module")
def shared_etcd() -> Iterator[LocalEtcd]:
    """One member for the semantics tests (each uses its own keys)."""
    yield from running_etcd()


def client(url: str, reads: str = "linearizable", timeout: float = 5.0) -> RegisterClient:
    wl = RegisterWorkload(RegisterOptions(request_timeout=timeout, etcd_reads=reads))
    return wl.client(0, 0, f"{url},http://127.0.0.1:1")  # the first URL only


# --------------------------------------------------------------------------- EtcdIO


@pytest.mark.parametrize("reads", ["linearizable", "serializable"])
def test_read_write_cas_semantics(shared_etcd, reads):
    io = EtcdIO(shared_etcd.url, timeout=5, reads=reads)
    k = f"sem-{reads}"
    try:
        assert io.read(k) is None
        assert io.cas(k, 1, 2) is False and io.read(k) is None  # no key: no value equals 1
        io.write(k, 3)
        assert io.read(k) == 3
        assert io.cas(k, 3, 4) is True and io.read(k) == 4
        assert io.cas(k, 3, 1) is False and io.read(k) == 4
        assert io.cas(k + "-new", None, 2) is True and io.read(k + "-new") == 2
        assert io.cas(k + "-new", None, 0) is False and io.read(k + "-new") == 2
    finally:
        io.close()


def test_values_are_decimal_text_and_reads_use_the_mode(shared_etcd):
    io = EtcdIO(shared_etcd.url, timeout=5, reads="serializable")
    seen = []
    real_post = io.client.post
    io.client.post = lambda url, *a, **kw: seen.append((url, kw.get("json"))) or real_post(url, *a, **kw)
    io.write("dec", 7)
    assert requests.post(shared_etcd.url + "/v3/kv/range", json={"key": "ZGVj"}, timeout=5).json()[
        "kvs"][0]["value"] == "Nw=="  # base64 of "7"
    assert io.read("dec") == 7
    assert seen[-1][0].endswith("/v3/kv/range") and seen[-1][1]["serializable"] is True
    with pytest.raises(ValueError, match="bad etcd read mode"):
        EtcdIO(shared_etcd.url, timeout=5, reads="stale")


def test_a_failed_compare_is_fail_without_error(shared_etcd):
    c = client(shared_etcd.url)
    assert c.invoke({"f": "write", "value": [101, 2]}) == {"type": "ok", "value": [101, 2]}
    out = c.invoke({"f": "cas", "value": [101, [3, 4]]})
    assert out == {"type": "fail", "value": [101, [3, 4]]} and "error" not in out
    assert c.invoke({"f": "cas", "value": [101, [2, 4]]}) == {"type": "ok", "value": [101, [2, 4]]}
    assert c.invoke({"f": "read", "value": [101, None]}) == {"type": "ok", "value": [101, 4]}
    c.close()


def test_errors_against_a_stopped_etcd(etcd):
    c = client(etcd.url, timeout=2)
    assert c.invoke({"f": "write", "value": [1, 1]})["type"] == "ok"
    etcd.stop()
    read = c.invoke({"f": "read", "value": [1, None]})
    write = c.invoke({"f": "write", "value": [1, 2]})
    cas = c.invoke({"f": "cas", "value": [1, [1, 2]]})
    for out in (read, write, cas):
        assert out["type"] == "fail" and out["error"].startswith("connect-failed"), out
    io = EtcdIO(etcd.url, timeout=2, reads="linearizable")
    with pytest.raises(EtcdError) as e:
        io.write("x", 1)
    assert e.value.definite and "refused" in str(e.value).lower()
    c.close()


class _Server:
    """A fake member on 127.0.0.1: `mode` "hang" reads the request and never answers, "503"
    answers as the gateway does for "etcdserver: request timed out"."""

    def __init__(self, mode: str):
        stop = self.stop_event = threading.Event()

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if mode == "hang":
                    stop.wait(10)
                    return
                body = json.dumps({"error": "etcdserver: request timed out", "code": 14,
                                   "message": "etcdserver: request timed out"}).encode()
                self.send_response(503)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *a: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.stop_event.set()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.mark.parametrize("mode,kind", [("hang", "timeout"), ("503", "unavailable")])
def test_errors_after_sending_are_indeterminate_for_writes_and_fail_for_reads(mode, kind):
    srv = _Server(mode)
    try:
        c = client(srv.url, timeout=0.5)
        outs = {f: c.invoke({"f": f, "value": v})
                for f, v in (("read", [1, None]), ("write", [1, 2]), ("cas", [1, [2, 3]]))}
        assert outs["read"]["type"] == "fail"
        assert outs["write"]["type"] == "info" and outs["cas"]["type"] == "info"
        assert all(o["error"].startswith(kind) for o in outs.values()), outs
        if mode == "503":
            assert "etcdserver: request timed out" in outs["write"]["error"]
        c.close()
    finally:
        srv.close()


# --------------------------------------------------------------------------- generator


def _ops(seed: int, threads: int, n: int, ops_per_key: int) -> list[dict]:
    return g.simulate(g.limit(n, RegisterGenerator(ops_per_key=ops_per_key)), threads, seed=seed)


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 12), st.integers(1, 40))
def test_generator_ops_are_well_formed_and_bounded_per_key(seed, threads, ops_per_key):
    history = _ops(seed, threads, 400, ops_per_key)
    invokes = [e for e in history if e["type"] == "invoke"]
    assert len(invokes) == 400
    per_key: Counter[int] = Counter()
    for e in invokes:
        k, v = e["value"]
        assert isinstance(k, int) and k >= 0
        per_key[k] += 1
        if e["f"] == "read":
            assert v is None
        elif e["f"] == "write":
            assert v in range(VALUES)
        else:
            assert e["f"] == "cas" and len(v) == 2 and all(x in range(VALUES) for x in v)
    assert max(per_key.values()) <= ops_per_key
    # every key but the ones still active has had its full share; fresh keys are 0, 1, 2, ...
    # (a key drawn last may not have been used before the limit)
    assert sum(1 for c in per_key.values() if c < ops_per_key) <= active_keys(threads)
    assert len(set(range(max(per_key) + 1)) - set(per_key)) < active_keys(threads)
    # the ops go through the model's keyed (partitioned) register form
    for op in pair_ops(history):
        key, call, readonly = CAS_REGISTER.prepare(op)
        assert key == op.invoke["value"][0]
        assert call[0] == {"read": "r", "write": "w", "cas": "c"}[op.f] and readonly == (op.f == "read")


def test_generator_mix_is_even_and_keys_are_contended():
    invokes = [e for e in _ops(7, 6, 3000, OPS_PER_KEY) if e["type"] == "invoke"]
    shares = Counter(e["f"] for e in invokes)
    assert all(900 < shares[f] < 1100 for f in ("read", "write", "cas")), shares
    procs_per_key: dict[int, set] = {}
    for e in invokes:
        procs_per_key.setdefault(e["value"][0], set()).add(e["process"])
    assert len(procs_per_key) >= 10 and all(len(ps) > 1 for ps in procs_per_key.values())
    assert active_keys(6) == 2 and active_keys(1) == 2 and active_keys(15) == 5


# --------------------------------------------------------------------------- checking


def test_prepared_forms_of_client_outcomes():
    """A failed compare is an observation ("cf"), a cas failed with an error none."""
    events = [
        {"process": 0, "type": "invoke", "f": "cas", "value": [5, [1, 2]]},
        {"process": 0, "type": "fail", "f": "cas", "value": [5, [1, 2]]},
        {"process": 1, "type": "invoke", "f": "cas", "value": [5, [1, 2]]},
        {"process": 1, "type": "fail", "f": "cas", "value": [5, [1, 2]], "error": "connect-failed: x"},
        {"process": 2, "type": "invoke", "f": "read", "value": [5, None]},
        {"process": 2, "type": "ok", "f": "read", "value": [5, None]},
    ]
    for i, e in enumerate(events):
        e["index"] = e["time"] = i
    prepared = [CAS_REGISTER.prepare(op) for op in pair_ops(events)]
    assert prepared == [(5, ("cf", 1), True), None, (5, ("r", NIL), True)]


def test_a_concurrent_run_against_etcd_is_linearizable(etcd, tmp_path):
    wl = RegisterWorkload(RegisterOptions(request_timeout=5))
    gen = g.time_limit(30, g.limit(600, RegisterGenerator(ops_per_key=50)))
    path = tmp_path / "history.jsonl"
    with HistoryWriter(path) as h:
        stats = interpreter.run(gen, threads=6, clients=lambda t, p: wl.client(t, p, etcd.url), history=h,
                                rng=random.Random(3))
    assert stats.invoked == 600 and stats.open_at_end == 0
    oks = Counter(f for (f, t), n in stats.counts.items() if t == "ok" for _ in range(n))
    assert oks["read"] > 100 and oks["write"] > 100 and oks["cas"] > 10, stats.counts
    assert stats.counts[("cas", "fail")] > 0  # compares that lost a race or met another value
    result = wl.analyze(path, time_limit=60).result
    assert result["valid"] is True, result
    keys = {e["value"][0] for e in read_events(path)}
    assert result["partitions"] == len(keys) >= 12 and result["model"] == "cas-register"


def _history(tmp_path: Path, ops: list[tuple]) -> Path:
    """Events from (process, type, f, value[, error]) tuples, in order."""
    events = []
    for p, t, f, v, *err in ops:
        events.append({"process": p, "type": t, "f": f, "value": v, **({"error": err[0]} if err else {})})
    path = tmp_path / "h.jsonl"
    write_history(path, events)
    return path


def test_a_stale_read_is_not_linearizable(tmp_path):
    wl = RegisterWorkload()
    base = [(0, "invoke", "write", [0, 1]), (0, "ok", "write", [0, 1]),
            (1, "invoke", "write", [9, 4]), (1, "ok", "write", [9, 4]),
            (0, "invoke", "write", [0, 2]), (0, "ok", "write", [0, 2])]
    stale = _history(tmp_path, base + [(2, "invoke", "read", [0, None]), (2, "ok", "read", [0, 1])])
    result = wl.analyze(stale).result
    assert result["valid"] is False and result["anomaly_types"] == ["nonlinearizable"]
    assert result["partitions"] == 2
    fresh = _history(tmp_path, base + [(2, "invoke", "read", [0, None]), (2, "ok", "read", [0, 2])])
    assert wl.analyze(fresh).result["valid"] is True


def test_a_failed_compare_must_be_explained(tmp_path):
    """A cas that failed its compare while the value was `old` is invalid; the same cas
    failed with an error (it never ran) is fine."""
    wl = RegisterWorkload()
    base = [(0, "invoke", "write", [0, 2]), (0, "ok", "write", [0, 2]), (1, "invoke", "cas", [0, [2, 3]])]
    assert wl.analyze(_history(tmp_path, base + [(1, "fail", "cas", [0, [2, 3]])])).result["valid"] is False
    assert wl.analyze(_history(tmp_path, base + [(1, "fail", "cas", [0, [2, 3]], "connect-failed: refused")])
                      ).result["valid"] is True
    assert wl.analyze(_history(tmp_path, base + [(1, "info", "cas", [0, [2, 3]], "timeout")])
                      ).result["valid"] is True
