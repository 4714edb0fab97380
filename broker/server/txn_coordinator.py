"""The transaction coordinator (KIP-98): transactional ids to producer ids and epochs,
their transactions' partitions and groups, and the markers that end them.

Placement and durability. A transactional id belongs to partition
crc32(id) % `transaction.state.log.num.partitions` of the internal topic
`__transaction_state` (created on the first FindCoordinator for a transaction, with
`transaction.state.log.replication.factor` replicas and `min.insync.replicas` =
`transaction.state.log.min.isr`, both capped at the brokers registered then). The leader
of that partition is the id's coordinator. Every state change (broker/core/txn_state.py)
is appended to the partition with acks=all before anything acts on it, so the state is
exactly as replicated as any acknowledged record. A broker that becomes leader of a state
partition replays it on the first request that needs it (the leader epoch tells a
stale copy), then finishes every transaction it finds prepared (PREPARE_COMMIT /
PREPARE_ABORT: the markers again, then COMPLETE_*); a watcher loads every state partition
this broker comes to lead within `WATCH_S`, so that happens without a client's request. Writing a marker twice is harmless:
a second marker ends no transaction.

Requests (Kafka's error codes):
- InitProducerId: a new id gets a fresh producer id, epoch 0; a known id gets its epoch
  bumped (a new producer id once the epoch is exhausted), which fences the previous
  instance (PRODUCER_FENCED at the coordinator, INVALID_PRODUCER_EPOCH at partitions once
  a marker of the new epoch reached them). An ongoing transaction of the previous epoch is
  aborted with the bumped epoch and the request answered CONCURRENT_TRANSACTIONS (the
  client asks again).
- AddPartitionsToTxn / AddOffsetsToTxn: ONGOING with the partitions / group added.
- EndTxn: PREPARE_COMMIT or PREPARE_ABORT is stored, the answer sent, then the markers
  are written (`MarkerWriter`) and COMPLETE_* stored; meanwhile requests for the id get
  CONCURRENT_TRANSACTIONS.
- A transaction ongoing longer than its timeout is aborted with a bumped epoch (checked
  every `transaction.abort.timed.out.transaction.cleanup.interval.ms`).
"""

from __future__ import annotations

import asyncio
import time
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode

from broker.core.messages import CreateTopicRequest, ProduceRequest, TopicPartition
from broker.core.replica import LEADER
from broker.core.transactions import marker_batch
from broker.core.txn_state import (
    COMPLETE_ABORT,
    COMPLETE_COMMIT,
    COMPLETE_OF,
    EMPTY,
    MAX_EPOCH,
    ONGOING,
    PREPARE_ABORT,
    PREPARE_COMMIT,
    STATE_TOPIC,
    TxnMetadata,
    encode,
    replay,
)
from broker.records import BatchError, decode_records, encode_batch, iter_batches
from broker.server.api_base import HandlerHost
from broker.server.offsets import coordinator_for
from broker.server.peer_client import PeerClient, PeerError
from broker.server.txn_offsets import PendingTxnOffsets
from broker.wire import kafka as k

E = ErrorCode
SOURCE = "txn-coordinator"  # the core's client address of the coordinator's writes
OFFSETS_TOPIC = "__consumer_offsets"  # markers to a group's coordinator name this topic
MARKER_RETRY_S = 0.2
WATCH_S = 0.5  # how often the state partitions this broker leads are looked at


@dataclass(slots=True)
class _Shard:
    """The loaded state of one state partition, valid for one leader epoch."""

    leader_epoch: int
    txns: dict[str, TxnMetadata]
    started: dict[str, float] = field(default_factory=dict)  # ONGOING since (monotonic s)
    busy: set[str] = field(default_factory=set)  # a write or the markers in flight
    # ids whose state is committed (below the high watermark at load, or stored since): a state
    # replayed from the uncommitted tail a previous leader appended (a write it reported failed)
    # may vanish with the next leader change, so no answer is given from it without a write
    settled: set[str] = field(default_factory=set)


def append_local(node: HandlerHost, tp: TopicPartition, records: bytes, timeout_ms: int) -> asyncio.Future[ErrorCode]:
    """Append `records` (acks=all) to the partition this broker leads; the error code."""
    fut: asyncio.Future[ErrorCode] = asyncio.get_running_loop().create_future()

    def done(resp: Any) -> None:
        if not fut.done():
            fut.set_result(resp.error)

    node.to_broker(SOURCE, ProduceRequest(node.new_cid(), tp, -1, records, timeout_ms), done)
    return fut


class MarkerWriter:
    """Writes the markers of a transaction: to partitions this broker leads through its
    own core, to others with WriteTxnMarkers to their leaders, to consumer groups through
    their coordinators (`__consumer_offsets` in the request)."""

    def __init__(self, node: HandlerHost, pending_offsets: PendingTxnOffsets) -> None:
        self.node = node
        self.pending_offsets = pending_offsets
        self.peers = PeerClient(f"wrack-txn-{node.node_id}")

    def _leader(self, tp: TopicPartition) -> int:
        assert self.node.broker is not None
        reg = self.node.broker.image.partitions.get(tp)
        return -2 if reg is None else reg.leader

    async def write(self, meta: TxnMetadata, commit: bool, coordinator_epoch: int, still_mine: Any) -> bool:
        """Markers to every partition and group of `meta` until all are written (True),
        or `still_mine()` turns false (False). A deleted partition needs none."""
        assert self.node.broker is not None
        todo: set[TopicPartition] = {TopicPartition(t, p) for t, p in meta.partitions}
        todo |= {TopicPartition(OFFSETS_TOPIC, self._group_node(g)) for g in meta.groups}
        while todo:
            if not still_mine():
                return False
            by_node: dict[int, list[TopicPartition]] = {}
            for tp in todo:
                node_id = tp.partition if tp.topic == OFFSETS_TOPIC else self._leader(tp)
                if node_id == -2:
                    continue
                by_node.setdefault(node_id, []).append(tp)
            todo &= {tp for tps in by_node.values() for tp in tps}
            results = await asyncio.gather(*(self._write_to(n, tps, meta, commit, coordinator_epoch)
                                             for n, tps in by_node.items()))
            for done in results:
                todo -= done
            if todo:
                await asyncio.sleep(MARKER_RETRY_S)
        return True

    def _group_node(self, group: str) -> int:
        assert self.node.broker is not None
        return coordinator_for(group, list(self.node.broker.image.brokers))

    async def _write_to(self, node_id: int, tps: list[TopicPartition], meta: TxnMetadata, commit: bool,
                        coordinator_epoch: int) -> set[TopicPartition]:
        """The partitions of `tps` whose marker `node_id` wrote (or that need none)."""
        if node_id < 0:
            return set()
        if node_id == self.node.node_id:
            codes = await asyncio.gather(*(self.write_here(tp, meta.producer_id, meta.epoch, commit, coordinator_epoch)
                                           for tp in tps))
            return {tp for tp, c in zip(tps, codes, strict=True) if c in (E.none, E.unknown_topic_or_partition)}
        ep = self._endpoint(node_id)
        if ep is None:
            return set()
        topics: dict[str, list[int]] = {}
        for tp in tps:
            topics.setdefault(tp.topic, []).append(tp.partition)
        value = {"markers": [{"producer_id": meta.producer_id, "producer_epoch": meta.epoch, "transaction_result": commit,
                              "coordinator_epoch": coordinator_epoch,
                              "topics": [{"name": t, "partition_indexes": ps} for t, ps in topics.items()]}]}
        try:
            resp = await self.peers.call(ep.host, ep.port, k.WRITE_TXN_MARKERS, 1, value)
        except PeerError as e:
            self.node.log.info("transaction markers: %s", e)
            return set()
        done = set()
        for m in resp.markers:
            for t in m.topics:
                for p in t.partitions:
                    if p.error_code in (E.none, E.unknown_topic_or_partition):
                        done.add(TopicPartition(t.name, p.partition_index))
        return done

    def _endpoint(self, node_id: int) -> Any:
        assert self.node.broker is not None
        info = self.node.broker.image.brokers.get(node_id)
        if info is None:
            return None
        return next((e for e in info.listeners if e.name == self.node.s.inter_broker_listener_name), None)

    async def write_here(self, tp: TopicPartition, producer_id: int, epoch: int, commit: bool,
                         coordinator_epoch: int) -> ErrorCode:
        """One marker written by this broker: a partition it leads, or (`__consumer_offsets`)
        the pending offsets of the producer in the groups it coordinates."""
        if tp.topic == OFFSETS_TOPIC:
            assert self.node.offsets is not None
            self.pending_offsets.complete(producer_id, commit, self.node.offsets)
            return E.none
        batch = marker_batch(producer_id, epoch, commit, coordinator_epoch, int(time.time() * 1000))
        return await append_local(self.node, tp, batch, 30000)


class TxnCoordinator:
    """The transaction coordinator of this broker: see the module docstring."""

    def __init__(self, node: HandlerHost, markers: MarkerWriter) -> None:
        self.node = node
        self.s = node.s
        self.log = node.log.getChild("txn")
        self.markers = markers
        self.shards: dict[int, _Shard] = {}
        self._creating = False
        self._watcher: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[Any]] = set()

    # ------------------------------------------------------------ placement
    def partition_for(self, txn_id: str) -> int:
        return zlib.crc32(txn_id.encode("utf-8")) % self.s.transaction_state_log_num_partitions

    def find(self, txn_id: str) -> int:
        """The coordinator's node id for `txn_id`, or -1 (the state topic is being created,
        or its partition has no leader)."""
        assert self.node.broker is not None
        image = self.node.broker.image
        if STATE_TOPIC not in image.topics:
            self._create_state_topic()
            return -1
        reg = image.partitions.get(TopicPartition(STATE_TOPIC, self.partition_for(txn_id)))
        return reg.leader if reg is not None and reg.leader >= 0 else -1

    def _create_state_topic(self) -> None:
        if self._creating:
            return
        self._creating = True
        assert self.node.broker is not None
        brokers = max(1, len(self.node.broker.image.brokers))
        rf = min(self.s.transaction_state_log_replication_factor, brokers)
        min_isr = min(self.s.transaction_state_log_min_isr, rf)
        msg = CreateTopicRequest(self.node.new_cid(), STATE_TOPIC, self.s.transaction_state_log_num_partitions, rf,
                                 (("min.insync.replicas", str(min_isr)),))
        fut = self.node.forward_to_controller(msg)

        def done(f: asyncio.Future[Any]) -> None:
            self._creating = False
            if not f.cancelled():
                self.log.info("created %s (RF %d, min ISR %d): %s", STATE_TOPIC, rf, min_isr, f.result().error.name)

        fut.add_done_callback(done)

    # ------------------------------------------------------------ state partitions
    def _shard(self, txn_id: str) -> tuple[int, _Shard | None]:
        """(state partition, its loaded state) if this broker leads the partition."""
        p = self.partition_for(txn_id)
        assert self.node.broker is not None
        r = self.node.broker.partitions.get(TopicPartition(STATE_TOPIC, p))
        if r is None or r.role != LEADER:
            self.shards.pop(p, None)
            return p, None
        shard = self.shards.get(p)
        if shard is None or shard.leader_epoch != r.leader_epoch:
            shard = self.shards[p] = self._load(p, r)
        return p, shard

    def _load(self, p: int, r: Any) -> _Shard:
        """Replay the state partition this broker now leads; finish prepared transactions."""
        records: list[tuple[bytes | None, bytes | None]] = []
        last_at: dict[bytes | None, int] = {}  # each id's last record
        off, log = r.log.log_start_offset, r.log
        try:
            while off < log.log_end_offset:
                buf = log.read(off, 1 << 20)
                nxt = off
                for start, end, h in iter_batches(buf, validate=False):
                    for rec in decode_records(buf[start:end], validate=False):
                        records.append((rec.key, rec.value))
                        last_at[rec.key] = rec.offset
                    nxt = h.next_offset
                if nxt <= off:
                    break
                off = nxt
        except (OSError, BatchError) as e:
            self.log.error("%s-%d: replaying the transaction state stopped at offset %d: %s", STATE_TOPIC, p, off, e)
        shard = _Shard(r.leader_epoch, replay(records))
        shard.settled = {k.decode("utf-8") for k, at in last_at.items() if k is not None and at < r.high_watermark}
        now = time.monotonic()
        self.log.info("%s-%d: loaded %d transactional ids (leader epoch %d)", STATE_TOPIC, p, len(shard.txns),
                      r.leader_epoch)
        for meta in shard.txns.values():
            if meta.state == ONGOING:
                shard.started[meta.txn_id] = now
            elif meta.preparing:
                self._spawn(self._complete(p, shard, meta))
        return shard

    def _current(self, p: int, shard: _Shard) -> bool:
        """Whether `shard` is still this broker's state of partition `p`."""
        assert self.node.broker is not None
        r = self.node.broker.partitions.get(TopicPartition(STATE_TOPIC, p))
        return r is not None and r.role == LEADER and r.leader_epoch == shard.leader_epoch and self.shards.get(p) is shard

    async def _store(self, p: int, shard: _Shard, meta: TxnMetadata) -> ErrorCode:
        """Append `meta` to the state partition (acks=all); on success it is the id's state.
        A failed write leaves the state as it was (Kafka's TransactionStateManager): the
        record may be in the local log, uncommitted (NOT_ENOUGH_REPLICAS_AFTER_APPEND), and a
        replay would answer from a transition the client was told failed. The state is
        replayed again only for a new leader epoch (`_shard`)."""
        batch = encode_batch([encode(meta)], [meta.txn_id.encode("utf-8")], int(time.time() * 1000))
        err = await append_local(self.node, TopicPartition(STATE_TOPIC, p), batch, 30000)
        if err is E.none and self._current(p, shard):
            shard.txns[meta.txn_id] = meta
            shard.settled.add(meta.txn_id)
            if meta.state == ONGOING:
                shard.started.setdefault(meta.txn_id, time.monotonic())
            else:
                shard.started.pop(meta.txn_id, None)
            return E.none
        self.log.info("%s-%d: storing %s of %s failed: %s", STATE_TOPIC, p, meta.state, meta.txn_id, err.name)
        return E.not_coordinator if err in (E.not_leader_or_follower, E.none) else E.coordinator_not_available

    async def _exclusive(self, shard: _Shard, txn_id: str, coro: Any) -> Any:
        shard.busy.add(txn_id)
        try:
            return await coro
        finally:
            shard.busy.discard(txn_id)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # ------------------------------------------------------------ requests
    async def init_producer_id(self, txn_id: str, timeout_ms: int, pid: int, epoch: int) -> tuple[ErrorCode, int, int]:
        if not 0 < timeout_ms <= self.s.transaction_max_timeout_ms:
            return E.invalid_transaction_timeout, -1, -1
        p, shard = self._shard(txn_id)
        if shard is None:
            return E.not_coordinator, -1, -1
        if txn_id in shard.busy:
            return E.concurrent_transactions, -1, -1
        meta = shard.txns.get(txn_id)
        if meta is None:
            assert self.node.broker is not None
            err, new_pid = self.node.broker.init_producer_id()
            if err is not E.none:
                return err, -1, -1
            new = TxnMetadata(txn_id, new_pid, 0, timeout_ms)
        elif meta.preparing:
            return E.concurrent_transactions, -1, -1
        elif pid >= 0 and (pid, epoch) != (meta.producer_id, meta.epoch):
            return E.producer_fenced, -1, -1
        elif meta.state == ONGOING:  # the previous instance's transaction: abort it, fenced
            self._spawn(self._abort(p, shard, meta, "a new instance of the producer"))
            return E.concurrent_transactions, -1, -1
        else:
            new = meta.to(EMPTY, **self._bumped(meta), timeout_ms=timeout_ms, partitions=frozenset(), groups=frozenset())
        err = await self._exclusive(shard, txn_id, self._store(p, shard, new))
        return (err, new.producer_id, new.epoch) if err is E.none else (err, -1, -1)

    def _bumped(self, meta: TxnMetadata) -> dict[str, int]:
        if meta.epoch < MAX_EPOCH:
            return {"producer_id": meta.producer_id, "epoch": meta.epoch + 1}
        assert self.node.broker is not None
        err, pid = self.node.broker.init_producer_id()
        return {"producer_id": pid if err is E.none else meta.producer_id, "epoch": 0 if err is E.none else meta.epoch}

    def _check(self, shard: _Shard | None, txn_id: str, pid: int, epoch: int) -> tuple[ErrorCode, TxnMetadata | None]:
        """The checks every request of a running producer passes (Kafka's order)."""
        if shard is None:
            return E.not_coordinator, None
        meta = shard.txns.get(txn_id)
        if meta is None or meta.producer_id != pid:
            return E.invalid_producer_id_mapping, None
        if epoch != meta.epoch:
            return E.producer_fenced, None
        if txn_id in shard.busy or meta.preparing:
            return E.concurrent_transactions, None
        return E.none, meta

    async def add_partitions(self, txn_id: str, pid: int, epoch: int,
                             partitions: Iterable[tuple[str, int]]) -> ErrorCode:
        p, shard = self._shard(txn_id)
        err, meta = self._check(shard, txn_id, pid, epoch)
        if meta is None:
            return err
        assert shard is not None
        parts = frozenset(partitions)
        if meta.state == ONGOING:
            if parts <= meta.partitions and txn_id in shard.settled:
                return E.none
            new = meta.to(ONGOING, partitions=meta.partitions | parts)  # or the same, stored again
        else:
            new = meta.to(ONGOING, partitions=parts, groups=frozenset())
        return await self._exclusive(shard, txn_id, self._store(p, shard, new))

    async def add_offsets(self, txn_id: str, pid: int, epoch: int, group: str) -> ErrorCode:
        p, shard = self._shard(txn_id)
        err, meta = self._check(shard, txn_id, pid, epoch)
        if meta is None:
            return err
        assert shard is not None
        if meta.state == ONGOING:
            if group in meta.groups and txn_id in shard.settled:
                return E.none
            new = meta.to(ONGOING, groups=meta.groups | {group})
        else:
            new = meta.to(ONGOING, partitions=frozenset(), groups=frozenset({group}))
        return await self._exclusive(shard, txn_id, self._store(p, shard, new))

    async def end_txn(self, txn_id: str, pid: int, epoch: int, commit: bool) -> ErrorCode:
        p, shard = self._shard(txn_id)
        if shard is not None and (meta0 := shard.txns.get(txn_id)) is not None and txn_id not in shard.busy \
                and txn_id in shard.settled and (meta0.producer_id, meta0.epoch) == (pid, epoch) \
                and meta0.state == (COMPLETE_COMMIT if commit else COMPLETE_ABORT):
            return E.none  # a retry of an EndTxn that completed
        err, meta = self._check(shard, txn_id, pid, epoch)
        if meta is None:
            return err
        assert shard is not None
        if meta.state != ONGOING:
            return E.invalid_txn_state
        new = meta.to(PREPARE_COMMIT if commit else PREPARE_ABORT)
        shard.busy.add(txn_id)  # until COMPLETE_* is stored
        err = await self._store(p, shard, new)
        if err is not E.none:
            shard.busy.discard(txn_id)
            return err
        self._spawn(self._complete(p, shard, new))
        return E.none

    # ------------------------------------------------------------ ending transactions
    async def _abort(self, p: int, shard: _Shard, meta: TxnMetadata, why: str) -> None:
        """Abort `meta`'s ongoing transaction with a bumped epoch (fencing its producer)."""
        if meta.txn_id in shard.busy or not self._current(p, shard):
            return
        new = meta.to(PREPARE_ABORT, **self._bumped(meta))
        self.log.info("aborting the transaction of %s (producer %d epoch %d -> %d): %s", meta.txn_id,
                      meta.producer_id, meta.epoch, new.epoch, why)
        shard.busy.add(meta.txn_id)
        if await self._store(p, shard, new) is not E.none:
            shard.busy.discard(meta.txn_id)
            return
        await self._complete(p, shard, new)

    async def _complete(self, p: int, shard: _Shard, meta: TxnMetadata) -> None:
        """Markers for a prepared transaction, then COMPLETE_* (the id stays busy till then)."""
        shard.busy.add(meta.txn_id)
        try:
            ok = await self.markers.write(meta, meta.state == PREPARE_COMMIT, shard.leader_epoch,
                                          lambda: self._current(p, shard))
            if ok:
                await self._store(p, shard, meta.to(COMPLETE_OF[meta.state], partitions=frozenset(), groups=frozenset()))
        except Exception:
            self.log.exception("completing the transaction of %s", meta.txn_id)
        finally:
            shard.busy.discard(meta.txn_id)

    def start(self) -> None:
        """Start watching the state partitions (the node's loop is running)."""
        if self._watcher is None:
            self._watcher = asyncio.get_running_loop().create_task(self._watch())

    async def _watch(self) -> None:
        """Every WATCH_S: load each state partition this broker has come to lead (so what a
        failed coordinator prepared is finished without waiting for a request); every
        cleanup interval: abort the transactions ongoing longer than their timeout."""
        next_reap = time.monotonic() + self.s.transaction_abort_interval_ms / 1000
        while not self.node_stopped():
            await asyncio.sleep(WATCH_S)
            broker = self.node.broker
            if broker is None or STATE_TOPIC not in broker.image.topics:
                continue
            for p in range(self.s.transaction_state_log_num_partitions):
                r = broker.partitions.get(TopicPartition(STATE_TOPIC, p))
                if r is not None and r.role == LEADER:
                    shard = self.shards.get(p)
                    if shard is None or shard.leader_epoch != r.leader_epoch:
                        self.shards[p] = self._load(p, r)
            if time.monotonic() >= next_reap:
                next_reap = time.monotonic() + self.s.transaction_abort_interval_ms / 1000
                self._reap()

    def _reap(self) -> None:
        now = time.monotonic()
        for p, shard in list(self.shards.items()):
            if not self._current(p, shard):
                continue
            for txn_id, since in list(shard.started.items()):
                meta = shard.txns.get(txn_id)
                if meta is not None and meta.state == ONGOING and now - since > meta.timeout_ms / 1000:
                    self._spawn(self._abort(p, shard, meta, "transaction timed out"))

    def node_stopped(self) -> bool:
        return self.node.broker is None or getattr(self.node, "shutting_down", False)

    def close(self) -> None:
        if self._watcher is not None:
            self._watcher.cancel()
        for t in list(self._tasks):
            t.cancel()
        self.markers.peers.close()
