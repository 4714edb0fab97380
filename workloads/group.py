"""The consumer-group workload: the queue workload's sends, read by the members of one consumer
group that subscribe, poll, commit their offsets and are rebalanced (docs/harness.md "Workloads").

Keys and send lanes are the queue workload's (workloads/queue.py). Each consuming process is a
member of the group `GROUP` (kafka-python's KafkaConsumer: the one client library here whose
API shows the generation a member holds, `KafkaConsumer.group_metadata`), subscribed to every
workload topic, with a producer of the test's `--client` for its sends. Ops:

- `subscribe` [keys] -> ok (every process's first op: it joins the group);
- `poll` -> ok `[["poll", {key: [[offset, v], ...]}]]` with `assignment` (the keys the
  member holds after the poll), `generation` and `member` (its generation id, null when it
  holds none, and member id); `fail` on a consumer error;
- `commit` -> the member's positions of its assignment, committed synchronously: ok with value
  {key: offset} (the next offset to read), `generation` and `member`; `fail` when the
  coordinator rejected it (a rebalance, or a stale generation or member: nothing committed);
  `info` when its fate is unknown;
- `send` and `crash` as in the queue workload (a crash abandons the member: the group evicts
  it after its session timeout).

Rebalances come from members joining (a new process after a crash) and leaving, and from the
faults. The final phase is the queue workload's: the recovery probe, then every consuming
process leaves the group and reads every key from the beginning in assign mode.

Checks (`analyze`): the queue checker on the whole history (lost, duplicated, reordered
records; subscribe-mode polls may skip and rewind, the `subscribe` allowance), and
checkers/group.py on the group's ops: committed offsets never go backwards, no record is
skipped below the group's committed offset, no two members own one partition in one generation.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from checkers import group as gc
from checkers import queue as qc
from contracts.generator import PENDING, Context, Generator, Pending
from contracts.history import read_events
from workloads.base import WorkloadAnalysis, WorkloadOptions, key_of
from workloads.errors import ClientError
from workloads.queue import QueueClient, QueueGenerator, QueueWorkload, is_send_lane

GROUP = "wrack-group"
COMMIT_P = 1 / 8  # share of a member's ops that commit


class GroupGenerator(QueueGenerator):
    """Queue ops for send lanes; for members: subscribe first, then crash, commit, send or poll."""

    def op(self, ctx: Context) -> dict[str, Any] | Pending | None:
        t = ctx.random_free_thread()
        if t is None:
            return PENDING
        p, rng, o = ctx.workers[t], ctx.rng, self.opts
        if is_send_lane(t, o):
            return self._send(ctx, p)
        if p not in self.assigned:
            return {"process": p, "f": "subscribe", "value": list(self.keys), "time": ctx.time}
        r = rng.random()
        if r < o.crash_p:
            return {"process": p, "f": "crash", "value": None, "time": ctx.time}
        if r < o.crash_p + COMMIT_P:
            return {"process": p, "f": "commit", "value": None, "time": ctx.time}
        if rng.random() < o.send_p:
            return self._send(ctx, p)
        return {"process": p, "f": "poll", "value": [["poll"]], "time": ctx.time}

    def update(self, ctx: Context, event: Mapping[str, Any]) -> None:
        if event.get("f") == "subscribe" and event.get("type") == "ok":
            self.assigned.add(event["process"])


class GroupMember:
    """One kafka-python consumer in `GROUP`, subscribed to `topics`."""

    def __init__(self, bootstrap: str, topics: list[str], client_id: str, timeout: float):
        # lazy: optional client (harness extra), ~0.2 s; only the group workload loads it here
        import kafka
        import kafka.errors

        self.errors = kafka.errors
        self.kafka = kafka
        ms = max(100, int(timeout * 1000))
        self.timeout_ms = ms
        self.consumer = kafka.KafkaConsumer(
            bootstrap_servers=bootstrap.split(","), group_id=GROUP, client_id=client_id,
            enable_auto_commit=False, auto_offset_reset="earliest", session_timeout_ms=6000,
            heartbeat_interval_ms=2000, request_timeout_ms=max(ms, 7000), fetch_max_wait_ms=100,
            metadata_max_age_ms=5000, reconnect_backoff_ms=50, reconnect_backoff_max_ms=500)
        self.consumer.subscribe(topics)

    def holding(self) -> dict[str, Any]:
        """What the member holds now: its assignment (keys), generation (None: none) and member id."""
        gm = self.consumer.group_metadata()
        gen = gm.generation_id if gm.generation_id is not None and gm.generation_id >= 0 else None
        keys = sorted(key_of(tp.topic, tp.partition) for tp in self.consumer.assignment())
        return {"assignment": keys, "generation": gen, "member": gm.member_id or None}

    def poll(self, timeout_ms: int, max_records: int) -> dict[str, list[list[Any]]]:
        batches = self.consumer.poll(timeout_ms=timeout_ms, max_records=max_records)
        out: dict[str, list[list[Any]]] = {}
        for tp, recs in sorted(batches.items(), key=lambda x: (x[0].topic, x[0].partition)):
            out[key_of(tp.topic, tp.partition)] = [[r.offset, _int(r.value)] for r in recs]
        return out

    def commit(self) -> dict[str, int]:
        """Commit the positions of the assignment; {key: offset} committed."""
        oam = self.kafka.structs.OffsetAndMetadata
        offsets = {tp: self.consumer.position(tp, timeout_ms=self.timeout_ms) for tp in self.consumer.assignment()}
        offsets = {tp: o for tp, o in offsets.items() if o is not None}
        if offsets:
            self.consumer.commit({tp: oam(o, "", -1) for tp, o in offsets.items()}, timeout_ms=self.timeout_ms)
        return {key_of(tp.topic, tp.partition): o for tp, o in offsets.items()}

    def close(self) -> None:
        try:
            self.consumer.close(autocommit=False)
        except Exception:  # noqa: BLE001 - closing a broken client
            pass


def _int(raw: bytes | None) -> Any:
    try:
        return int(raw) if raw is not None else None
    except ValueError:
        return raw.decode(errors="replace") if raw is not None else None


class GroupClient:
    """A consuming process: a group member for subscribe, poll and commit; a `QueueClient` for
    sends and, once it is told to `assign` (the final read-back), for assign-mode reads."""

    def __init__(self, make_member: Callable[[], GroupMember], plain: QueueClient, opts: WorkloadOptions):
        self.make_member = make_member
        self.plain = plain
        self.opts = opts
        self.member: GroupMember | None = None

    def invoke(self, op: Mapping[str, Any]) -> dict[str, Any]:
        f = op["f"]
        try:
            if f == "subscribe":
                if self.member is None:
                    self.member = self.make_member()
                return {"type": "ok"}
            if f == "poll" and self.member is not None:
                msgs = self.member.poll(op.get("poll_ms", self.opts.poll_ms), self.opts.max_poll_records)
                return {"type": "ok", "value": [["poll", msgs]], **self.member.holding()}
            if f == "commit":
                return self._commit()
        except ClientError as e:
            return {"type": "fail", "error": str(e)}
        except Exception as e:  # noqa: BLE001 - kafka-python's errors: the poll or join did not happen
            if f == "subscribe":
                return {"type": "fail", "error": f"{type(e).__name__}: {e}"}
            return {"type": "fail" if f == "poll" else "info", "error": f"{type(e).__name__}: {e}"}
        if f == "assign":
            self._leave()
        return self.plain.invoke(op)

    def _commit(self) -> dict[str, Any]:
        if self.member is None:
            return {"type": "fail", "error": "not a member"}
        held = self.member.holding()
        try:
            done = self.member.commit()
        except self.member.errors.CommitFailedError as e:
            return {"type": "fail", "error": f"CommitFailedError: {e}"[:300], **held}
        except self.member.errors.KafkaError as e:
            definite = not getattr(e, "retriable", True) and isinstance(e, self.member.errors.BrokerResponseError)
            return {"type": "fail" if definite else "info", "error": f"{type(e).__name__}: {e}"[:300], **held}
        return {"type": "ok", "value": done, **held}

    def _leave(self) -> None:
        if self.member is not None:
            self.member.close()
            self.member = None

    def close(self) -> None:
        self._leave()
        self.plain.close()


class GroupWorkload(QueueWorkload):
    """The consumer-group workload (see the module docstring)."""

    name = "group"
    topic_prefix = "group"

    def client(self, thread: int, process: int, bootstrap: str) -> Any:
        if is_send_lane(thread, self.opts):
            return super().client(thread, process, bootstrap)
        plain = QueueClient(self.io_factory(process, bootstrap), self.opts)
        topics = sorted(self.topics())
        return GroupClient(lambda: GroupMember(bootstrap, topics, f"member-p{process}", self.opts.request_timeout),
                           plain, self.opts)

    def generator(self) -> Generator:
        return GroupGenerator(self.keys, self.opts, self.values)

    def analyze(self, history_path: Path, time_limit: float | None = None) -> WorkloadAnalysis:
        """The queue checker's result with the group checks' anomalies added (checkers/group.py)."""
        an = qc.analyze_file(str(history_path), time_limit=time_limit)
        result = dict(an.result)
        groups = gc.check(read_events(history_path))
        result["group"] = {k: v for k, v in groups.items() if k not in ("anomalies", "anomaly_types")}
        if groups["anomaly_types"]:
            result["anomaly_types"] = [*result.get("anomaly_types", []), *groups["anomaly_types"]]
            result["anomalies"] = {**result.get("anomalies", {}), **groups["anomalies"]}
            result["valid"] = False
        return WorkloadAnalysis(result, plots=an)
