"""The queue workload: Jepsen's Kafka workload on real clients (docs/harness.md "Workloads").

Keys are topic-partitions ("queue0-1"): `topics` topics of `partitions` partitions. Two
kinds of process (threads 0..`clients`-1, and `in_flight` threads after them):

- consuming clients: each a producer and a consumer of its own; they assign, poll, send and
  crash, as in Jepsen's workload;
- send-only processes: they only send, through producers they share (`SenderPool`, one
  per acks setting: asynchronous produce, each send waiting for its own delivery report), so
  that many sends are in flight at once, each under its own process, and polls never hold
  sends back. A send that ends `info` ends its process, as any op does.

Ops (docs/ARCHITECTURE.md's history vocabulary):

- `send` `[["send", key, v]]` -> ok `[["send", key, [offset, v]]]`; `v` is unique (one
  counter for the whole test). With `acks="mixed"` each send carries `"acks": "all"|"1"`.
- `poll` `[["poll"]]` -> ok `[["poll", {key: [[offset, v], ...]}]]`; a poll that read
  records commits the positions of those keys to the thread's consumer group
  (`wrack-t<thread>`, OffsetCommit), and its completion says so: "group", "commit":
  {"offsets": {key: next offset}, "ok": bool} (ok false: the outcome is unknown);
- `assign` `[key, ...]` (optionally `"seek_to_beginning": true`) -> ok: consume exactly
  these keys, each from where this process last read it (the beginning if never); a
  process's first assign (not seek_to_beginning) resumes from its thread's group's committed
  offsets (OffsetFetch), as a restarted consumer does, and its completion carries "group"
  and "resumed": {key: offset or null}. `checkers.commits` checks that a resume reads the
  group's last acknowledged commit (or a later one whose outcome was unknown): else
  `lost-commit`;
- `crash` -> always `info`: the client is dropped, a new process (new producer and
  consumer) takes the thread over;
- `txn` (with `txn_p` > 0, Jepsen's transactions) `[["send", key, v], ["poll"], ...]` ->
  ok with each micro-op's result as above, all in one Kafka transaction that committed;
  `fail` when it was aborted (nothing of it happened); `info` when the commit's outcome is
  unknown. When a send gets no delivery report in time (or a micro-op fails and so does
  the abort), the client gives its producer up as applications do with a stuck one: it
  fences it (`KafkaIO.fence`: a new producer of the same transactional id, whose
  InitProducerId aborts the transaction; the old one is abandoned, not closed, and keeps
  retrying its send: a zombie) and the op is `fail`, as the commit was never asked for. Transactional clients'
  producers take the transactional id of their thread (`wrack-txn-t<thread>`) in every
  other process of the thread, the first included, so a process that replaces one fences
  the one before it that had the id (KIP-98: its InitProducerId aborts what that one left
  open); the others take one of their own (`wrack-txn-t<thread>-p<process>`), as an
  application instance that never comes back, whose open transaction only the coordinator's
  timeout aborts (KAFKA-5132's path; one never aborted holds the partition's LSO: the
  `hanging-txn` check). Their consumers read committed records only (every poll, txn or not).

The first op of every process is an assign. Failed polls roll the consumer back to where
it was, so a failed poll never makes the next one look like it skipped. Send errors are
classified by `workloads.errors` (definite `fail` vs indeterminate `info`).

The final phase (`final_generator`), after the final heal: first a recovery probe (one
acks=all send to every key, retried until it succeeds or `recovery_time_limit` passes: checkers.liveness
requires each key to take a write and a read again); then what was polled before no
longer counts, and every
consuming process assigns all keys from the beginning and polls until every key has been
read again, in this phase, up to the highest acknowledged offset (by anyone), or
the final time limit passes; a process that crashes meanwhile is replaced by one that
assigns again (`each_process`).
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from checkers import commits, producers
from checkers import queue as qc
from contracts import generator as gen
from contracts.generator import PENDING, Context, Generator, Pending
from workloads.base import BaseWorkload, WorkloadAnalysis, WorkloadOptions, in_flight, key_of, split_key
from workloads.errors import ClientError
from workloads.kafka_clients import open_sender
from workloads.kafka_io import KafkaIO, Sender, transaction_timeout


class OffsetTracker:
    """Highest acknowledged and highest polled offset per key, from the history's events."""

    def __init__(self) -> None:
        self.acked: dict[str, int] = {}
        self.polled: dict[str, int] = {}
        self.lock = threading.Lock()

    def update(self, event: Mapping[str, Any]) -> None:
        if event.get("type") != "ok" or not isinstance(event.get("value"), list):
            return
        f = event.get("f")
        with self.lock:
            for mop in event["value"]:
                if f == "send" and len(mop) == 3 and isinstance(mop[2], list) and mop[2][0] is not None:
                    k, off = mop[1], mop[2][0]
                    if off > self.acked.get(k, -1):
                        self.acked[k] = off
                elif f == "poll" and len(mop) == 2 and isinstance(mop[1], dict):
                    for k, pairs in mop[1].items():
                        if pairs:
                            off = max(p[0] for p in pairs)
                            if off > self.polled.get(k, -1):
                                self.polled[k] = off

    def unread(self) -> dict[str, int]:
        """Keys whose highest acknowledged offset no poll has reached: key -> offsets missing."""
        with self.lock:
            return {k: a - self.polled.get(k, -1) for k, a in self.acked.items() if self.polled.get(k, -1) < a}

    def all_read(self) -> bool:
        return not self.unread()

    def restart_reads(self) -> None:
        """Forget what was polled: from now on only new polls count as read (the final
        read-back must read everything again, after the faults)."""
        with self.lock:
            self.polled.clear()


class QueueGenerator(Generator):
    """The main phase's ops (see the module docstring); all choices use `ctx.rng`."""

    def __init__(self, keys: Sequence[str], opts: WorkloadOptions, values: Iterator[int] | None = None):
        self.keys = list(keys)
        self.opts = opts
        self.values = values if values is not None else itertools.count(1)
        self.assigned: set[Any] = set()

    def op(self, ctx: Context) -> dict[str, Any] | Pending | None:
        t = ctx.random_free_thread()
        if t is None:
            return PENDING
        p = ctx.workers[t]
        rng = ctx.rng
        o = self.opts
        if is_send_lane(t, o):
            return self._send(ctx, p)
        if p not in self.assigned:
            return self._assign(ctx, p)
        r = rng.random()
        if r < o.crash_p:
            return {"process": p, "f": "crash", "value": None, "time": ctx.time}
        if r < o.crash_p + o.assign_p:
            return self._assign(ctx, p)
        if o.txn_p and rng.random() < o.txn_p:
            return self._txn(ctx, p)
        if rng.random() < o.send_p:
            return self._send(ctx, p)
        return {"process": p, "f": "poll", "value": [["poll"]], "time": ctx.time}

    def _txn(self, ctx: Context, p: Any) -> dict[str, Any]:
        """1 to 4 micro-ops, each a send (share `send_p`) to a random key or a poll."""
        rng = ctx.rng
        mops: list[list[Any]] = []
        for _ in range(rng.randint(1, 4)):
            if rng.random() < self.opts.send_p:
                mops.append(["send", self.keys[rng.randrange(len(self.keys))], next(self.values)])
            else:
                mops.append(["poll"])
        return {"process": p, "f": "txn", "value": mops, "time": ctx.time}

    def _send(self, ctx: Context, p: Any) -> dict[str, Any]:
        rng = ctx.rng
        op = {"process": p, "f": "send", "value": [["send", self.keys[rng.randrange(len(self.keys))],
                                                     next(self.values)]], "time": ctx.time}
        if self.opts.acks == "mixed":
            op["acks"] = "all" if rng.random() < 0.5 else "1"
        return op

    def _assign(self, ctx: Context, p: Any) -> dict[str, Any]:
        n = ctx.rng.randint(1, len(self.keys))
        keys = sorted(ctx.rng.sample(self.keys, n))
        return {"process": p, "f": "assign", "value": keys, "time": ctx.time}

    def update(self, ctx: Context, event: Mapping[str, Any]) -> None:
        if event.get("f") == "assign" and event.get("type") == "ok":
            self.assigned.add(event["process"])


def is_send_lane(thread: Any, opts: WorkloadOptions) -> bool:
    """Threads `opts.concurrency_threads`.. only send (the consuming clients are the threads before)."""
    return isinstance(thread, int) and thread >= opts.concurrency_threads


def op_acks(acks: str | None, opts: WorkloadOptions) -> str:
    """The acks a send uses: its own (`acks="mixed"` ops carry one), else the workload's
    ("all" for a mixed workload's ops that carry none)."""
    return acks or ("all" if opts.acks == "mixed" else opts.acks)


def send_mops(mops: Sequence[Sequence[Any]], send: Callable[[str, int, int], int]) -> dict[str, Any]:
    """Run a send op's micro-ops in order with `send(topic, partition, value) -> offset`: ok
    with every offset; `fail` only when the first one definitely did not happen; else `info`."""
    out = []
    for i, (_, k, v) in enumerate(mops):
        topic, part = split_key(k)
        try:
            off = send(topic, part, v)
        except ClientError as e:
            if e.send_outcome().definite and i == 0:
                return {"type": "fail", "error": str(e)}
            return {"type": "info", "error": str(e)}
        out.append(["send", k, [off, v]])
    return {"type": "ok", "value": out}


class SenderPool:
    """The send-only processes' shared producers, one per acks setting, opened by the first
    process that needs one and closed when the last one holding it lets go."""

    def __init__(self, open_sender: Callable[[str], Sender]):
        self.open_sender = open_sender
        self.senders: dict[str, tuple[Sender, int]] = {}
        self.lock = threading.Lock()

    def acquire(self, acks: str) -> Sender:
        with self.lock:
            sender, n = self.senders.get(acks) or (None, 0)
            if sender is None:
                sender = self.open_sender(acks)
            self.senders[acks] = (sender, n + 1)
            return sender

    def release(self, acks: str) -> None:
        with self.lock:
            sender, n = self.senders[acks]
            if n > 1:
                self.senders[acks] = (sender, n - 1)
                return
            del self.senders[acks]
        sender.close()


class SendLane:
    """A send-only process: its sends go through the pool's shared producers, so many are in
    flight at once (one per process) without a producer and consumer per process. With an
    idempotent producer, the completion names, per micro-op, which producer instance was
    handed the value and as its how-manieth record: `"producer": [[tag, n] or null, ...]`
    (the order checkers/producers.py holds the log to)."""

    def __init__(self, pool: SenderPool, opts: WorkloadOptions):
        self.pool = pool
        self.opts = opts
        self.held: dict[str, Sender] = {}

    def invoke(self, op: Mapping[str, Any]) -> dict[str, Any]:
        if op["f"] != "send":
            return {"type": "fail", "error": f"a send-only process does not {op['f']!r}"}
        acks = op_acks(op.get("acks"), self.opts)
        if acks not in self.held:
            self.held[acks] = self.pool.acquire(acks)
        sender = self.held[acks]
        answer = send_mops(op["value"], sender.send)
        handed = [sender.given(v) for _, _, v in op["value"]]
        if any(h is not None for h in handed):
            answer["producer"] = handed
        return answer

    def close(self) -> None:
        for acks in list(self.held):
            del self.held[acks]
            self.pool.release(acks)


class RecoveryProbe(Generator):
    """After the final heal: a send to every key, each key tried again `retry_s` after a
    failed attempt, until every key has had one `ok` send (then exhausted). What liveness
    requires of the system (checkers.liveness): each key takes a write again. The probe
    sends with acks=all whatever the workload's acks: with acks=1 a leader that the heal
    has just deposed may acknowledge it before it learns, and truncate it then (seen: the
    probe lost on every key, and `no-recovery` where the cluster had recovered)."""

    def __init__(self, keys: Sequence[str], values: Iterator[int], retry_s: float = 0.25):
        self.pending = list(keys)
        self.values = values
        self.retry_ns = int(retry_s * 1e9)
        self.inflight: dict[Any, str] = {}  # process -> key
        self.retry_at: dict[str, int] = {}

    def op(self, ctx: Context) -> dict[str, Any] | Pending | None:
        if not self.pending:
            return None
        waiting = [k for k in self.pending if k not in self.inflight.values()]
        t = ctx.random_free_thread() if waiting else None
        if t is None:
            return PENDING
        k = min(waiting, key=lambda key: self.retry_at.get(key, 0))
        return {"process": ctx.workers[t], "f": "send", "value": [["send", k, next(self.values)]], "acks": "all",
                "time": max(ctx.time, self.retry_at.get(k, 0))}

    def update(self, ctx: Context, event: Mapping[str, Any]) -> None:
        if event.get("f") != "send":
            return
        if event["type"] == "invoke":
            self.inflight[event["process"]] = event["value"][0][1]
            return
        k = self.inflight.pop(event["process"], None)
        if k is None:
            return
        if event["type"] == "ok":
            if k in self.pending:
                self.pending.remove(k)
        else:
            self.retry_at[k] = event["time"] + self.retry_ns


class QueueClient:
    """One process's producer + consumer (see the module docstring); with `group`, its
    consumer commits what it polled to that group and resumes from it (`_commit`, `_resume`)."""

    def __init__(self, make_io: Callable[[str], KafkaIO], opts: WorkloadOptions, group: str | None = None):
        self.make_io = make_io
        self.opts = opts
        self.group = group
        self.ios: dict[str, KafkaIO] = {}
        self.positions: dict[tuple[str, int], int] = {}  # next offset to read, per assigned tp
        self.assigned: list[tuple[str, int]] = []
        self.started = False  # the first assign (the process's resume) happened

    def io(self, acks: str | None = None) -> KafkaIO:
        a = op_acks(acks, self.opts)
        if a not in self.ios:
            self.ios[a] = self.make_io(a)
        return self.ios[a]

    def invoke(self, op: Mapping[str, Any]) -> dict[str, Any]:
        f = op["f"]
        if f == "send":
            return self._send(op)
        if f == "poll":
            return self._poll(op)
        if f == "assign":
            return self._assign(op)
        if f == "txn":
            return self._txn(op)
        if f == "crash":
            return {"type": "info", "error": "crash"}
        return {"type": "fail", "error": f"unknown f {f!r}"}

    def _send(self, op: Mapping[str, Any]) -> dict[str, Any]:
        return send_mops(op["value"], self.io(op.get("acks")).send)

    def _poll(self, op: Mapping[str, Any]) -> dict[str, Any]:
        if not self.assigned:
            return {"type": "ok", "value": [["poll", {}]]}
        before = dict(self.positions)
        try:
            msgs = self._read(op.get("poll_ms", self.opts.poll_ms) / 1000)
        except ClientError as e:
            self._rollback(before)
            return {"type": "fail", "error": str(e)}
        return {"type": "ok", "value": [["poll", msgs]], **self._commit(msgs)}

    def _commit(self, msgs: Mapping[str, Any]) -> dict[str, Any]:
        """After a poll that read records: commit the positions of the keys it read to the
        group; the completion's extra fields ({} without a group or records): "group",
        "commit": {"offsets": {key: next offset}, "ok": bool} (ok false: its outcome is not
        known, it may have happened)."""
        io: Any = self.io()
        if self.group is None or not msgs or not hasattr(io, "commit_offsets"):
            return {}
        offsets = {k: self.positions[split_key(k)] for k in msgs}
        try:
            io.commit_offsets({split_key(k): o for k, o in offsets.items()})
        except ClientError as e:
            return {"group": self.group, "commit": {"offsets": offsets, "ok": False, "error": str(e)}}
        return {"group": self.group, "commit": {"offsets": offsets, "ok": True}}

    def _resume(self, tps: Sequence[tuple[str, int]]) -> dict[str, Any]:
        """The first assign of a process with a group: positions from the group's committed
        offsets (OffsetFetch), as a restarted consumer resumes; the completion's extra fields
        "group", "resumed": {key: offset or None}. ClientError if they cannot be read."""
        io: Any = self.io()
        if self.group is None or not hasattr(io, "committed_offsets"):
            return {}
        got = io.committed_offsets(list(tps))
        for tp, o in got.items():
            if o is not None:
                self.positions[tp] = o
        return {"group": self.group, "resumed": {key_of(*tp): o for tp, o in sorted(got.items())}}

    def _read(self, timeout: float) -> dict[str, list[list[Any]]]:
        """One poll of the consumer: key -> [[offset, value], ...]; positions advance."""
        msgs: dict[str, list[list[Any]]] = {}
        for topic, part, off, v in self.io().poll(timeout, self.opts.max_poll_records):
            msgs.setdefault(key_of(topic, part), []).append([off, v])
            self.positions[(topic, part)] = off + 1
        return msgs

    def _txn(self, op: Mapping[str, Any]) -> dict[str, Any]:
        """One Kafka transaction: begin, the micro-ops in order, commit (module docstring)."""
        io: Any = self.io()
        if not hasattr(io, "begin"):
            return {"type": "fail", "error": "this client library has no transactions"}
        before = dict(self.positions)
        try:
            io.begin()
        except ClientError as e:
            return {"type": "fail", "error": str(e)}
        out: list[list[Any]] = []
        try:
            for mop in op["value"]:
                if mop[0] == "send":
                    topic, part = split_key(mop[1])
                    out.append(["send", mop[1], [io.send(topic, part, mop[2]), mop[2]]])
                else:
                    out.append(["poll", self._read(self.opts.poll_ms / 1000) if self.assigned else {}])
        except ClientError as e:
            if mop[0] == "send" and e.code is None:  # no delivery report in time: give the producer up
                return self._txn_fenced(io, before, str(e))
            return self._txn_failed(io, before, str(e), fence=True)
        try:
            committed = io.commit()
        except ClientError as e:
            return self._txn_failed(io, before, str(e))
        if not committed:
            self._rollback(before)
            return {"type": "fail", "error": "the transaction was aborted"}
        return {"type": "ok", "value": out}

    def _txn_failed(self, io: Any, before: Mapping[tuple[str, int], int], error: str,
                    fence: bool = False) -> dict[str, Any]:
        """A micro-op or the commit failed: abort (then nothing happened: `fail`), or `info`.
        With `fence` (the commit was never asked for) an abort that fails is settled by
        `_txn_fenced`."""
        try:
            io.abort()
        except ClientError as e:
            if not fence:
                return {"type": "info", "error": f"{error}; abort: {e}"}
            return self._txn_fenced(io, before, f"{error}; abort: {e}")
        self._rollback(before)
        return {"type": "fail", "error": error}

    def _txn_fenced(self, io: Any, before: Mapping[tuple[str, int], int], error: str) -> dict[str, Any]:
        """Settle a transaction whose commit was never asked for as applications do when
        their producer is stuck (KIP-98): a new producer of the same transactional id aborts
        it, so nothing of it may ever be committed (`fail`); the old producer is abandoned,
        still retrying its last send (a zombie, `KafkaIO.fence`). `info` if that fails."""
        try:
            io.fence()
        except ClientError as e:
            return {"type": "info", "error": f"{error}; fencing: {e}"}
        self._rollback(before)
        return {"type": "fail", "error": f"{error}; aborted by a new producer of the transactional id"}

    def _rollback(self, before: Mapping[tuple[str, int], int]) -> None:
        self.positions = dict(before)
        try:
            self.io().assign({tp: self.positions.get(tp) for tp in self.assigned})
        except Exception:  # noqa: BLE001 - the next assign/poll reports the problem
            pass

    def _assign(self, op: Mapping[str, Any]) -> dict[str, Any]:
        tps = [split_key(k) for k in op["value"]]
        if op.get("seek_to_beginning"):
            for tp in tps:
                self.positions.pop(tp, None)
        extra: dict[str, Any] = {}
        try:
            if not self.started and not op.get("seek_to_beginning"):
                extra = self._resume(tps)
            self.io().assign({tp: self.positions.get(tp) for tp in tps})
        except ClientError as e:
            return {"type": "fail", "error": str(e)}
        self.started = True
        self.assigned = tps
        return {"type": "ok", **extra}

    def close(self) -> None:
        for io in self.ios.values():
            io.close()
        self.ios.clear()


class QueueWorkload(BaseWorkload):
    """The queue workload (see the module docstring)."""

    name = "queue"
    checker = "queue"
    checks_recovery = True  # every key takes a write and a read again after the final heal
    topic_prefix = "queue"

    def __init__(self, opts: WorkloadOptions | None = None):
        super().__init__(opts)
        self.tracker = OffsetTracker()
        self.sender_pool: SenderPool | None = None
        self.values = itertools.count(1)  # every send's value, main phase and final phase
        self.ordinal: dict[int, tuple[int, int]] = {}  # thread -> (its latest process, how many it has had)

    def send_lanes(self) -> int:
        return self.opts.in_flight

    def client(self, thread: int, process: int, bootstrap: str) -> QueueClient | SendLane:
        if is_send_lane(thread, self.opts):
            if self.sender_pool is None:
                o = self.opts
                self.sender_pool = SenderPool(lambda acks: open_sender(
                    o.client, bootstrap, acks=acks, timeout=o.request_timeout, client_id=f"lanes-acks{acks}",
                    idempotent=o.idempotent, in_flight=in_flight(o)))
            return SendLane(self.sender_pool, self.opts)
        txn_id = self.transactional_id(thread, process) if self.opts.txn_p > 0 else None
        group = f"wrack-t{thread}"
        return QueueClient(self.io_factory(process, bootstrap, txn_id, group), self.opts, group)

    def transactional_id(self, thread: int, process: int) -> str:
        """The thread's id in its 1st, 3rd, ... process; one of the process's own in the others
        (module docstring)."""
        last, n = self.ordinal.get(thread, (None, 0))
        if last != process:
            last, n = process, n + 1
            self.ordinal[thread] = (last, n)
        return f"wrack-txn-t{thread}" if n % 2 == 1 else f"wrack-txn-t{thread}-p{process}"

    def observe(self, event: Mapping[str, Any]) -> None:
        """Every event of the test, whatever phase it completes in (the runner wraps the whole
        generator with it): an op in flight at the end of the main phase completes during
        the next one, and its offset still counts for the final read-back."""
        self.tracker.update(event)

    def generator(self) -> Generator:
        return QueueGenerator(self.keys, self.opts, self.values)

    def summary(self) -> dict[str, Any]:
        """What the final read-back achieved: complete, or the offsets still unread per key."""
        unread = self.tracker.unread()
        return {"final_read_complete": not unread, "unread_offsets": unread,
                "highest_acked": dict(self.tracker.acked), "highest_polled": dict(self.tracker.polled)}

    def final_generator(self) -> Generator:
        tracker = self.tracker
        poll_ms = max(self.opts.poll_ms, 500)

        def poll_until_read(_ctx: Context) -> dict[str, Any] | None:
            return None if tracker.all_read() else {"f": "poll", "value": [["poll"]], "poll_ms": poll_ms}

        per_thread = gen.concat({"f": "assign", "value": list(self.keys), "seek_to_beginning": True},
                                gen.Fn(poll_until_read))

        def consuming(g: Any) -> Generator:
            return gen.on_threads(lambda t: not is_send_lane(t, self.opts), g)

        def forget_reads(_ctx: Context) -> None:
            tracker.restart_reads()
            return None

        # every client thread probes (send lanes too): each key is tried at once, not in turn
        probe = gen.time_limit(self.opts.recovery_time_limit, RecoveryProbe(self.keys, self.values))
        reads = gen.time_limit(self.final_read_limit(), consuming(gen.each_process(per_thread)))
        return gen.concat(gen.Fn(forget_reads), probe, reads)

    def final_read_limit(self) -> float:
        """`--final-time-limit`, and with transactions the transaction timeout more: a
        transaction a crashed process left open holds read_committed consumers until its
        coordinator aborts it, that long after the coordinator (re)started (KIP-98)."""
        extra = transaction_timeout(self.opts.request_timeout) if self.opts.txn_p > 0 else 0.0
        return self.opts.final_time_limit + extra

    def analyze(self, history_path: Path, time_limit: float | None = None) -> WorkloadAnalysis:
        """The queue checker's raw result with the offset commits' (`checkers.commits`: a
        `lost-commit` is one more anomaly of the result) and the idempotent producers' order
        (`checkers.producers`), and its `QueueAnalysis` for the plots (they reuse it)."""
        grouped: list[dict[str, Any]] = []  # the commit check's input, from the queue checker's pass
        order = producers.ProducerOrder()  # fed from the same pass

        def keep(ev: dict[str, Any]) -> None:
            if "group" in ev:
                grouped.append(ev)
            order.feed(ev)

        an = qc.analyze_file(str(history_path), time_limit=time_limit, tap=keep)
        result = dict(an.result)
        found = commits.check(grouped)
        merge_check(result, found, "commits", {"commits": found["commits"], "resumes": found["resumes"]})
        found = order.result()
        merge_check(result, found, "producers", found["producers"])
        return WorkloadAnalysis(result, plots=an)


def merge_check(result: dict[str, Any], found: Mapping[str, Any], name: str, counts: Any) -> None:
    """Fold another check's result into the queue checker's: its anomalies join the others
    (the verdict false), its counts go under `name`, and its `anomaly_times` join the
    result's (the first anomaly's time is the earliest of them all)."""
    result[name] = counts
    if found["valid"] is not False:
        return
    result["valid"] = False
    result["anomaly_types"] = sorted({*result.get("anomaly_types", []), *found["anomaly_types"]})
    result["anomalies"] = {**result.get("anomalies", {}), **found["anomalies"]}
    result["anomaly_counts"] = {**result.get("anomaly_counts", {}), **found["anomaly_counts"]}
    result["anomaly_keys"] = {**result.get("anomaly_keys", {}), **found["anomaly_keys"]}
    times = found["anomaly_times"]
    if times:
        result["anomaly_times"] = {**result.get("anomaly_times", {}), **times}
        result["first_anomaly_time"] = min(result["anomaly_times"].values())
