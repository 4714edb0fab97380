"""The transaction coordinator after a store that failed once appended: the record is in the
local log, uncommitted (NOT_ENOUGH_REPLICAS_AFTER_APPEND), and the client was told the
transition failed, so the coordinator must not answer later requests from it (found by a
control run with --txn-p 0.5: bench/figures/findings/2026-11-29-fenced-txn-committed/). The
coordinator runs on a stand-in node whose state partition is an in-memory log; its appends go
through `append_local`, replaced here to append and then answer with the error."""

from __future__ import annotations

import asyncio
import logging
from types import SimpleNamespace

from kio.schema.errors import ErrorCode

from broker.core.messages import TopicPartition
from broker.core.replica import LEADER
from broker.records import iter_batches
from broker.server import txn_coordinator as tc

E = ErrorCode


class StateLog:
    """The state partition's log: batches appended in order, read back by offset."""

    def __init__(self) -> None:
        self.batches: list[bytes] = []
        self.log_start_offset = 0

    @property
    def log_end_offset(self) -> int:
        return len(self.batches)

    def append(self, batch: bytes) -> None:
        b = bytearray(batch)
        b[0:8] = len(self.batches).to_bytes(8, "big")  # the base offset
        self.batches.append(bytes(b))

    def read(self, offset: int, _max_bytes: int) -> bytes:
        return b"".join(self.batches[offset:])


def coordinator(answers: list[ErrorCode], monkeypatch) -> tuple[tc.TxnCoordinator, StateLog]:
    log = StateLog()
    replica = SimpleNamespace(role=LEADER, leader_epoch=2, log=log)
    settings = SimpleNamespace(transaction_state_log_num_partitions=1, transaction_max_timeout_ms=900000)
    broker = SimpleNamespace(partitions={TopicPartition(tc.STATE_TOPIC, 0): replica},
                             init_producer_id=lambda: (E.none, 7000))
    node = SimpleNamespace(s=settings, log=logging.getLogger("test"), broker=broker)
    c = tc.TxnCoordinator(node, markers=None)  # type: ignore[arg-type]

    async def append_local(_node, _tp, batch, _timeout_ms):
        log.append(batch)  # appended to the leader's log whatever the answer
        return answers.pop(0) if answers else E.none

    monkeypatch.setattr(tc, "append_local", append_local)
    return c, log


def test_a_store_that_failed_after_append_is_not_answered_from(monkeypatch):
    async def scenario() -> list[ErrorCode]:
        c, log = coordinator([E.none, E.not_enough_replicas_after_append, E.not_enough_replicas], monkeypatch)
        err, pid, epoch = await c.init_producer_id("t", 60000, -1, -1)
        assert (err, epoch) == (E.none, 0)
        first = await c.add_partitions("t", pid, epoch, [("q", 1)])  # appended, not committed
        assert log.log_end_offset == 2 and len(list(iter_batches(log.read(0, 1 << 20), validate=False))) == 2
        again = await c.add_partitions("t", pid, epoch, [("q", 1)])  # the client's retry
        return [first, again]

    first, again = asyncio.run(scenario())
    assert first is E.coordinator_not_available
    # the retry is a store again (failing here), not an answer from the failed record
    assert again is E.coordinator_not_available


def test_a_new_leader_does_not_answer_from_the_uncommitted_tail_it_inherited(monkeypatch):
    # the previous coordinator appended Ongoing[q-1] and reported the write failed; the next
    # leader's log still holds it above the high watermark. The client's retry of
    # AddPartitionsToTxn must be written (and so committed) before it is answered: answered
    # from the tail, the client produced to q-1 for a transaction that vanished with the
    # tail at the next leader change, so fencing aborted nothing and the next instance's
    # commit committed the record (findings/2026-11-29-zombie-record-committed)
    async def scenario() -> tuple[ErrorCode, int]:
        c, log = coordinator([E.none, E.not_enough_replicas_after_append, E.none], monkeypatch)
        err, pid, epoch = await c.init_producer_id("t", 60000, -1, -1)
        assert await c.add_partitions("t", pid, epoch, [("q", 1)]) is E.coordinator_not_available
        replica = c.node.broker.partitions[TopicPartition(tc.STATE_TOPIC, 0)]
        replica.leader_epoch, replica.high_watermark = 3, 1  # a new leader: Empty committed, Ongoing not
        retry = await c.add_partitions("t", pid, epoch, [("q", 1)])
        return retry, log.log_end_offset

    retry, records = asyncio.run(scenario())
    assert retry is E.none and records == 3  # stored again, then answered
