"""The data path's APIs: Produce, Fetch, ListOffsets, OffsetForLeaderEpoch,
InitProducerId and DeleteRecords, from decoded kio requests to the broker core's messages
and back (Kafka's behaviour; differences in docs/broker.md). Produce applies the topic's
configs to each batch first (`broker.storage.validator`, Kafka's LogValidator)."""

from __future__ import annotations

import asyncio
import datetime
import time
from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode

from broker.core import properties as props
from broker.core.broker import MAX_TIMESTAMP
from broker.core.messages import (
    DEBUG_REPLICA_ID,
    DeleteRecordsRequest,
    FetchPartition,
    FetchRequest,
    OffsetsForLeaderEpochRequest,
    ProduceRequest,
    TopicPartition,
)
from broker.core.producers import scan
from broker.records import BatchError, validate_for_append
from broker.server.api_base import ApiFamily, Req
from broker.storage.validator import AppendPolicy, conform
from broker.wire import kafka as k
from broker.wire.fetch_codec import NodeEndpoint, PartitionData, TopicData, encode_fetch_response

E = ErrorCode
_MOVED = (E.not_leader_or_follower, E.fenced_leader_epoch)  # errors that carry a leader hint (KIP-951)
DELETE_RECORDS_MARGIN_S = 5.0  # past a DeleteRecords timeout, how long to wait for the broker machine's answer


def check_batches(records: bytes | None, max_message_bytes: int) -> ErrorCode:
    """What a leader checks before appending a Produce partition (v3+: exactly one v2
    batch, length and CRC-32C valid, not a control batch, within message.max.bytes):
    `broker.records.validate_for_append`, then the one-batch rule."""
    if not records:
        return E.invalid_record
    if len(records) > max_message_bytes:
        return E.message_too_large
    try:
        headers = validate_for_append(records, max_message_bytes)
    except ValueError as e:
        return getattr(e, "error_code", E.corrupt_message)
    if len(headers) != 1:
        return E.invalid_record
    return E.none


class DataApis(ApiFamily):
    def apis(self) -> dict[int, Callable[[Req, Any], None]]:
        return {k.PRODUCE: self.produce, k.FETCH: self.fetch, k.LIST_OFFSETS: self.list_offsets,
                k.INIT_PRODUCER_ID: self.init_producer_id, k.OFFSET_FOR_LEADER_EPOCH: self.offset_for_leader_epoch,
                k.DELETE_RECORDS: self.delete_records}

    # ------------------------------------------------------------ topic configs
    def topic_setting(self, topic: str, name: str) -> str:
        """The value of property `name` for `topic`: the topic's config, else this broker's
        dynamic config, else the broker's (`MetadataImage.topic_config`)."""
        p = props.BY_NAME[name]
        if p.field is not None and props.Scope.BROKER in p.scopes:
            broker = p.type.show(getattr(self.s, p.field))
        else:
            broker = p.type.show(p.parse(self.s.raw[name])) if name in self.s.raw else p.default or ""
        return self.image.topic_config(topic, p.topic_name or name, broker, self.node.node_id)

    def append_policy(self, topic: str) -> AppendPolicy:
        return AppendPolicy(
            max_message_bytes=int(self.topic_setting(topic, "message.max.bytes")),
            segment_bytes=int(self.topic_setting(topic, "log.segment.bytes")),
            compact="compact" in self.topic_setting(topic, "log.cleanup.policy").split(","),
            compression=self.topic_setting(topic, "compression.type"),
            log_append_time=self.topic_setting(topic, "log.message.timestamp.type") == "LogAppendTime",
        )

    # ------------------------------------------------------------ Produce
    def produce(self, req: Req, body: Any) -> None:
        node, broker = self.node, self.node.broker
        assert broker is not None
        acks = body.acks
        timeout_ms = k.ms(body.timeout)
        results: dict[tuple[str, int], tuple[ErrorCode, int]] = {}
        append_times: dict[tuple[str, int], int] = {}
        layout: list[tuple[str, list[int]]] = []
        pending = [1]

        def finish() -> None:
            out = []
            for name, parts in layout:
                prs = []
                for idx in parts:
                    err, base = results[(name, idx)]
                    r = broker.partitions.get(TopicPartition(name, idx))
                    at = append_times.get((name, idx), -1) if err is E.none else -1
                    prs.append({"index": idx, "error_code": err, "base_offset": base,
                                "log_append_time": _datetime(at) if at >= 0 else None,
                                "log_start_offset": r.log.log_start_offset if r is not None else -1})
                out.append({"name": name, "partition_responses": prs})
            req.reply({"responses": out, "throttle_time": 0})

        def done_one() -> None:
            pending[0] -= 1
            if pending[0] == 0 and acks != 0:
                finish()

        bad_request = E.invalid_required_acks if acks not in (0, 1, -1) else E.none
        for td in body.topic_data:
            name = td.name
            idxs: list[int] = []
            layout.append((name, idxs))
            for pd in td.partition_data:
                key = (name, pd.index)
                if key in results or pd.index in idxs:
                    continue  # a partition listed twice is answered once
                idxs.append(pd.index)
                tp = TopicPartition(name, pd.index)
                err = bad_request
                if err is E.none and not self._known(tp):
                    err = E.unknown_topic_or_partition
                records = pd.records
                if err is E.none:
                    policy = self.append_policy(name)
                    err = check_batches(records, policy.max_message_bytes)
                if err is E.none:
                    try:
                        records, append_times[key] = conform(records, policy, int(time.time() * 1000))
                    except BatchError as e:
                        err = e.error_code
                if err is E.none and acks == 0:
                    err = broker.leader_error(tp)
                if err is not E.none:
                    results[key] = (err, -1)
                    continue
                cid = node.new_cid()
                msg = ProduceRequest(cid, tp, acks, records, timeout_ms)
                if acks == 0:
                    results[key] = (E.none, -1)
                    node.to_broker(req.conn.client, msg)
                    continue
                pending[0] += 1

                def on_response(resp: Any, key: tuple[str, int] = key) -> None:
                    results[key] = (resp.error, resp.base_offset)
                    done_one()

                node.to_broker(req.conn.client, msg, on_response)
        if acks == 0:
            req.slot.complete(None)
            if any(e is not E.none for e, _ in results.values()):
                req.conn.close_after_flush()  # as Kafka: the client learns through a metadata refresh
            return
        done_one()

    # ------------------------------------------------------------ Fetch
    def fetch(self, req: Req, body: Any) -> None:
        node = self.node
        v = req.version
        if v >= 15:
            replica_id, replica_epoch = body.replica_state.replica_id, body.replica_state.replica_epoch
        else:
            replica_id, replica_epoch = body.replica_id, -1
        if getattr(body, "session_id", 0) not in (0, -1) or getattr(body, "session_epoch", -1) > 0:
            req.reply({"throttle_time": 0, "error_code": E.fetch_session_id_not_found, "session_id": 0, "responses": []})
            return
        layout: list[tuple[str, Any, list[int]]] = []
        errors: dict[TopicPartition, ErrorCode] = {}
        parts: list[FetchPartition] = []
        by_id = self._topics_by_id() if v >= 13 else {}
        for t in body.topics:
            if v >= 13:  # topics by id (KIP-516)
                topic_id = t.topic_id
                name = by_id.get(topic_id)
                missing = E.unknown_topic_id
            else:
                topic_id, name, missing = None, t.topic, E.unknown_topic_or_partition
            idxs: list[int] = []
            layout.append((name, topic_id, idxs))
            for p in t.partitions:
                tp = TopicPartition(name or "", p.partition)
                idxs.append(p.partition)
                if name is None or not self._known(tp):
                    errors[tp] = missing if name is None or name not in self.image.topics else E.unknown_topic_or_partition
                    continue
                parts.append(FetchPartition(
                    tp, getattr(p, "current_leader_epoch", -1), p.fetch_offset, getattr(p, "last_fetched_epoch", -1),
                    getattr(p, "log_start_offset", -1), max(p.partition_max_bytes, 0),
                ))

        committed = replica_id < 0 and getattr(body, "isolation_level", 0) == 1
        fetch_offsets = {fp.tp: fp.fetch_offset for fp in parts}

        def respond(resp: Any) -> None:
            got = {pr.tp: pr for pr in resp.partitions} if resp is not None else {}
            out = []
            leaders: dict[int, NodeEndpoint] = {}
            for name, topic_id, idxs in layout:
                prs = []
                for idx in idxs:
                    tp = TopicPartition(name or "", idx)
                    pr = got.get(tp)
                    if pr is None:
                        code = errors.get(tp, E.unknown_topic_or_partition).value
                        prs.append(PartitionData(idx, code, -1, -1, -1, b""))
                        continue
                    if pr.error is E.none:
                        div = pr.diverging_epoch
                        aborted = self._aborted(tp, fetch_offsets.get(tp, 0), pr.records) if committed else None
                        prs.append(PartitionData(idx, 0, pr.high_watermark, pr.last_stable_offset, pr.log_start_offset,
                                                 pr.records, None if div is None else (div.epoch, div.end_offset),
                                                 aborted))
                    else:
                        hint = self._leader_hint(tp, req.conn.listener, leaders) if v >= 16 and pr.error in _MOVED else None
                        prs.append(PartitionData(idx, pr.error.value, -1, -1, -1, b"", current_leader=hint))
                out.append(TopicData(name or "", topic_id, prs))
            if not req.slot.done:
                req.slot.complete(encode_fetch_response(v, req.cid, 0, out, node_endpoints=list(leaders.values())))

        if not parts:
            respond(None)
            return
        cid = node.new_cid()
        msg = FetchRequest(cid, replica_id, replica_epoch, tuple(parts), max(k.ms(body.max_wait), 0),
                           body.min_bytes, getattr(body, "max_bytes", 0x7FFFFFFF), getattr(body, "isolation_level", 0))
        node.to_broker(req.conn.client, msg, respond)

    def _aborted(self, tp: TopicPartition, start: int, records: bytes) -> list[tuple[int, int]]:
        """(producer id, first offset) of the aborted transactions with records in what a
        read_committed fetch from `start` returns (Kafka's AbortedTransactions)."""
        r = self.node.broker.partitions.get(tp) if self.node.broker is not None else None
        if r is None or not records:
            return []
        try:
            end = max(start, scan(records)[1])
        except BatchError:  # a partial batch at the end: bound by the LSO
            end = r.last_stable_offset()
        return [(a.producer_id, a.first_offset) for a in r.aborted_between(start, end)]

    def _leader_hint(self, tp: TopicPartition, listener: str, nodes: dict[int, NodeEndpoint]) -> tuple[int, int] | None:
        """KIP-951 (Fetch v16): the partition's current leader and epoch as this broker's
        metadata knows them (None when unknown); the leader's endpoint goes into `nodes`."""
        reg = self.image.partitions.get(tp)
        if reg is None or reg.leader < 0:
            return None
        ep = self._endpoint(reg.leader, listener)
        if ep is not None:
            nodes[reg.leader] = NodeEndpoint(reg.leader, ep.host, ep.port)
        return (reg.leader, reg.leader_epoch)

    # ------------------------------------------------------------ ListOffsets
    def list_offsets(self, req: Req, body: Any) -> None:
        broker = self.node.broker
        assert broker is not None
        out = []
        for t in body.topics:
            prs = []
            for p in t.partitions:
                tp = TopicPartition(t.name, p.partition_index)
                if not self._known(tp):
                    prs.append({"partition_index": p.partition_index, "error_code": E.unknown_topic_or_partition})
                    continue
                if p.timestamp == MAX_TIMESTAMP and req.version < 7 or p.timestamp < MAX_TIMESTAMP:
                    prs.append({"partition_index": p.partition_index, "error_code": E.invalid_request})
                    continue
                res = broker.list_offset(tp, getattr(p, "current_leader_epoch", -1), p.timestamp,
                                         getattr(body, "isolation_level", 0) == 1, body.replica_id == DEBUG_REPLICA_ID)
                prs.append({"partition_index": p.partition_index, "error_code": res.error, "timestamp": res.timestamp,
                            "offset": res.offset, "leader_epoch": res.leader_epoch})
            out.append({"name": t.name, "partitions": prs})
        req.reply({"throttle_time": 0, "topics": out})

    # ------------------------------------------------------------ DeleteRecords
    def delete_records(self, req: Req, body: Any) -> None:
        """The leader moves each partition's log start offset up (Kafka's DeleteRecords;
        offset -1: the high watermark) and answers once every replica on a live broker has
        moved its own there (the low watermark), or REQUEST_TIMED_OUT after the request's
        timeout. A topic without `delete` in its cleanup.policy answers POLICY_VIOLATION, as Kafka."""
        self.spawn(req, body, self._delete_records(req, body))

    async def _delete_records(self, req: Req, body: Any) -> None:
        node = self.node
        loop = asyncio.get_running_loop()
        timeout_ms = max(k.ms(body.timeout), 0)
        out, waits = [], []
        for t in body.topics:
            prs: list[dict[str, Any]] = []
            out.append({"name": t.name, "partitions": prs})
            for p in t.partitions:
                tp = TopicPartition(t.name, p.partition_index)
                pr = {"partition_index": p.partition_index, "low_watermark": -1, "error_code": E.none}
                prs.append(pr)
                if not self._known(tp):
                    pr["error_code"] = E.unknown_topic_or_partition
                elif "delete" not in self.topic_setting(t.name, "log.cleanup.policy").split(","):
                    pr["error_code"] = E.policy_violation
                else:
                    fut: asyncio.Future[Any] = loop.create_future()
                    node.to_broker(req.conn.client, DeleteRecordsRequest(node.new_cid(), tp, p.offset, timeout_ms),
                                   lambda resp, f=fut: f.done() or f.set_result(resp))
                    waits.append((pr, fut))
        for pr, fut in waits:  # the broker answers each by its timeout; the margin covers a broker shutting down
            try:
                resp = await asyncio.wait_for(fut, timeout_ms / 1000 + DELETE_RECORDS_MARGIN_S)
            except TimeoutError:
                pr["error_code"] = E.request_timed_out
                continue
            pr["error_code"], pr["low_watermark"] = resp.error, resp.low_watermark
        req.reply({"throttle_time": 0, "topics": out})

    # ------------------------------------------------------------ InitProducerId
    def init_producer_id(self, req: Req, body: Any) -> None:
        """Idempotent producers: a fresh producer id with epoch 0 (Kafka gives a producer
        without a transactional id a new id every time, whatever id and epoch it sends).
        A transactional id is the transaction coordinator's (api_txn.py, which calls this
        for the others)."""
        broker = self.node.broker
        assert broker is not None
        err, pid = broker.init_producer_id()
        req.reply({"throttle_time": 0, "error_code": err, "producer_id": pid, "producer_epoch": 0 if pid >= 0 else -1})

    # ------------------------------------------------------------ OffsetsForLeaderEpoch
    def offset_for_leader_epoch(self, req: Req, body: Any) -> None:
        node = self.node
        replica_id = getattr(body, "replica_id", -2)
        out = []
        for t in body.topics:
            prs: list[dict[str, Any]] = []
            out.append({"topic": t.topic, "partitions": prs})
            for p in t.partitions:
                tp = TopicPartition(t.topic, p.partition)
                if not self._known(tp):
                    prs.append({"error_code": E.unknown_topic_or_partition, "partition": p.partition})
                    continue
                got: list[Any] = []
                msg = OffsetsForLeaderEpochRequest(node.new_cid(), replica_id, tp, p.current_leader_epoch, p.leader_epoch)
                node.to_broker(req.conn.client, msg, got.append)
                r = got[0]  # answered synchronously
                prs.append({"error_code": r.error, "partition": p.partition, "leader_epoch": r.leader_epoch,
                            "end_offset": r.end_offset})
        req.reply({"throttle_time": 0, "topics": out})


def _datetime(ms: int) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
