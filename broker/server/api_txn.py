"""The transaction APIs (KIP-98): FindCoordinator for transactional ids (key type 1),
InitProducerId with a transactional id, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn
(the coordinator: broker/server/txn_coordinator.py), TxnOffsetCommit (the group
coordinator's pending offsets: broker/server/txn_offsets.py) and WriteTxnMarkers (a
partition leader appends the coordinator's markers).

FindCoordinator and InitProducerId also serve groups and idempotent producers: their
other cases go to the families that own them (`GroupApis`, `DataApis`)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

from kio.schema.errors import ErrorCode

from broker.core.messages import TopicPartition
from broker.server.api_base import ApiFamily, HandlerHost, Req, reply_error
from broker.server.api_data import DataApis
from broker.server.api_groups import GroupApis
from broker.server.offsets import Committed, coordinator_for
from broker.server.txn_coordinator import OFFSETS_TOPIC, MarkerWriter, TxnCoordinator
from broker.wire import kafka as k

E = ErrorCode


class TxnApis(ApiFamily):
    def __init__(self, node: HandlerHost, data: DataApis, groups: GroupApis) -> None:
        super().__init__(node)
        self.data = data
        self.groups = groups
        self.pending_offsets = groups.pending_txn_offsets
        self.markers = MarkerWriter(node, self.pending_offsets)
        self.coordinator = TxnCoordinator(node, self.markers)

    def apis(self) -> dict[int, Callable[[Req, Any], None]]:
        return {k.FIND_COORDINATOR: self.find_coordinator, k.INIT_PRODUCER_ID: self.init_producer_id,
                k.ADD_PARTITIONS_TO_TXN: self.add_partitions_to_txn, k.ADD_OFFSETS_TO_TXN: self.add_offsets_to_txn,
                k.END_TXN: self.end_txn, k.WRITE_TXN_MARKERS: self.write_txn_markers,
                k.TXN_OFFSET_COMMIT: self.txn_offset_commit}

    def start(self) -> None:
        """The node's loop runs: the coordinator starts watching its state partitions."""
        self.coordinator.start()

    def _spawn(self, req: Req, body: Any, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)

        def done(t: asyncio.Task[Any]) -> None:
            if not t.cancelled() and t.exception() is not None:
                self.log.error("%r: %r failed: %r", req.conn, req.header, t.exception())
                reply_error(req, body, E.unknown_server_error, self.log)

        task.add_done_callback(done)

    # ------------------------------------------------------------ coordinator lookup
    def find_coordinator(self, req: Req, body: Any) -> None:
        if getattr(body, "key_type", 0) != 1:
            self.groups.find_coordinator(req, body)
            return
        self.groups.reply_coordinator(req, self.coordinator.find(body.key))

    # ------------------------------------------------------------ coordinator requests
    def init_producer_id(self, req: Req, body: Any) -> None:
        if body.transactional_id is None:
            self.data.init_producer_id(req, body)
            return

        async def run() -> None:
            err, pid, epoch = await self.coordinator.init_producer_id(
                body.transactional_id, k.ms(body.transaction_timeout), getattr(body, "producer_id", -1),
                getattr(body, "producer_epoch", -1))
            req.reply({"throttle_time": 0, "error_code": err, "producer_id": pid, "producer_epoch": epoch})

        self._spawn(req, body, run())

    def add_partitions_to_txn(self, req: Req, body: Any) -> None:
        txn_id = body.v3_and_below_transactional_id
        topics = [(t.name, list(t.partitions)) for t in body.v3_and_below_topics]
        unknown = {(n, p) for n, ps in topics for p in ps if not self._known(TopicPartition(n, p))}

        def reply(code_of: Callable[[str, int], ErrorCode]) -> None:
            req.reply({"throttle_time": 0, "results_by_topic_v3_and_below": [
                {"name": n, "results_by_partition": [{"partition_index": p, "partition_error_code": code_of(n, p)}
                                                     for p in ps]} for n, ps in topics]})

        if unknown:
            reply(lambda n, p: E.unknown_topic_or_partition if (n, p) in unknown else E.operation_not_attempted)
            return

        async def run() -> None:
            err = await self.coordinator.add_partitions(
                txn_id, body.v3_and_below_producer_id, body.v3_and_below_producer_epoch,
                [(n, p) for n, ps in topics for p in ps])
            reply(lambda n, p: err)

        self._spawn(req, body, run())

    def add_offsets_to_txn(self, req: Req, body: Any) -> None:
        async def run() -> None:
            err = await self.coordinator.add_offsets(body.transactional_id, body.producer_id, body.producer_epoch,
                                                     body.group_id)
            req.reply({"throttle_time": 0, "error_code": err})

        self._spawn(req, body, run())

    def end_txn(self, req: Req, body: Any) -> None:
        async def run() -> None:
            err = await self.coordinator.end_txn(body.transactional_id, body.producer_id, body.producer_epoch,
                                                 body.committed)
            req.reply({"throttle_time": 0, "error_code": err})

        self._spawn(req, body, run())

    # ------------------------------------------------------------ partition leaders and groups
    def write_txn_markers(self, req: Req, body: Any) -> None:
        async def run() -> None:
            out = []
            for m in body.markers:
                tps = [TopicPartition(t.name, p) for t in m.topics for p in t.partition_indexes]
                codes = await asyncio.gather(*(self._marker(tp, m) for tp in tps))
                topics: dict[str, list[dict[str, Any]]] = {}
                for tp, code in zip(tps, codes, strict=True):
                    topics.setdefault(tp.topic, []).append({"partition_index": tp.partition, "error_code": code})
                out.append({"producer_id": m.producer_id, "topics": [
                    {"name": n, "partitions": ps} for n, ps in topics.items()]})
            req.reply({"markers": out})

        self._spawn(req, body, run())

    async def _marker(self, tp: TopicPartition, m: Any) -> ErrorCode:
        if tp.topic != OFFSETS_TOPIC and not self._known(tp):
            return E.unknown_topic_or_partition
        return await self.markers.write_here(tp, m.producer_id, m.producer_epoch, m.transaction_result,
                                             m.coordinator_epoch)

    def txn_offset_commit(self, req: Req, body: Any) -> None:
        """Offsets of a transaction: pending in the group until its marker (txn_offsets.py)."""
        group = body.group_id
        err = E.none
        if coordinator_for(group, list(self.image.brokers)) != self.node.node_id:
            err = E.not_coordinator
        elif getattr(body, "generation_id", -1) >= 0 and self.node.groups is not None:
            err = self.node.groups.commit_error(self.node.now(), group, body.generation_id, body.member_id)
        entries: dict[tuple[str, int], Committed] = {}
        out = []
        for t in body.topics:
            prs = []
            for p in t.partitions:
                code = err
                if code is E.none and not self._known(TopicPartition(t.name, p.partition_index)):
                    code = E.unknown_topic_or_partition
                if code is E.none:
                    entries[(t.name, p.partition_index)] = Committed(
                        p.committed_offset, getattr(p, "committed_leader_epoch", -1), p.committed_metadata)
                prs.append({"partition_index": p.partition_index, "error_code": code})
            out.append({"name": t.name, "partitions": prs})
        if entries:
            self.pending_offsets.add(body.producer_id, group, entries)
        req.reply({"throttle_time": 0, "topics": out})
