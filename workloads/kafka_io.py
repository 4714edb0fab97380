"""Kafka clients behind one small interface: confluent-kafka (librdkafka, the default) and
kafka-python (the alternative, workloads/kafka_python_io.py), one producer + one consumer per process.

`open_io(lib, bootstrap, acks=, timeout=, client_id=)` (workloads/kafka_clients.py) returns a `KafkaIO`:

- `send(topic, partition, value) -> offset`, waits at most `timeout` s for the broker's
  acknowledgement; raises `ClientError(code)` (classified by `workloads.errors`), code None
  when nothing came back in time;
- `assign({(topic, partition): offset | None})`: consume exactly these partitions from
  these offsets (None: from the beginning; confluent assigns offset 0, never the logical
  OFFSET_BEGINNING, see `ConfluentIO.assign`);
- `poll(timeout, max_records) -> [(topic, partition, offset, value)]`, raising
  `ClientError` on a consumer error;
- `high_watermark(topic, partition) -> int` (the next offset a consumer can read to);
- `commit_offsets(positions)` / `committed_offsets(tps)` (confluent only): the consumer group's offsets
  (OffsetCommit, OffsetFetch; the group is `group`, else one of the client's own);
- `close()`; a closed client opens no producer or consumer again (`ClientError` CLOSED):
  an op that outlived its test must not reach the next test's cluster.

With `transactional_id` (confluent only) the producer is transactional (KIP-98: librdkafka's
`transactional.id`, idempotent, acks=all) and the consumer reads committed records only;
`begin()`, then sends and polls, then `commit()` (True: committed; False: aborted, definitely
not committed; `ClientError`: unknown) or `abort()` make one transaction. A producer
started with the transactional id of an earlier one fences it (its epoch is bumped).
`fence()` does that to this object's own producer, as an application does whose abort
timed out: a new producer takes the id (its InitProducerId aborts the open transaction,
KIP-98) and the old one is abandoned, not closed, until `close()`: librdkafka keeps
retrying what it had in flight (a zombie, which the partitions must fence).

`open_sender(lib, bootstrap, acks=, timeout=, client_id=)` returns a `Sender`: one producer
whose `send(topic, partition, value) -> offset` many threads call at once (asynchronous
produce, each caller waiting for its own delivery report), for the queue workload's
send-only processes. `given(value) -> [producer, n] | None`: which producer instance was
handed that value, and as its how-manieth record (idempotent producers only; asked once per
value after its send): the order the producer must keep (checkers/producers.py).

librdkafka producers with acks=all are idempotent (KIP-98): librdkafka resends a batch
after NOT_LEADER_OR_FOLLOWER and the other errors that ask for a metadata refresh, without
counting a retry, though the first attempt may have been appended (KAFKA-13574); without
idempotence that resend appends the value twice, a `duplicate` the checker must not blame on
the broker. With idempotence the leader recognises the resent batch by its producer id and
sequence and answers with the first copy's offset, so a duplicate under acks=all is the
broker's bug, as long as the producer keeps its epoch: when messages time out in the client
(`message.timeout.ms`), librdkafka bumps the epoch itself and gives a batch it was still
retrying, possibly written, new sequence numbers from 0, which no broker can recognise
(librdkafka's introduction, "Message timeout considerations"; seen as `duplicate` in the
safe configuration). Idempotent producers therefore never time out messages
(`message.timeout.ms` 0); the harness bounds each send itself (`timeout` + 1 s, then
indeterminate), and what is still queued at the end is purged. They keep one request in
flight per connection, unless `in_flight` says more (`--idempotence`: up to
`MAX_IN_FLIGHT`, as applications run them; the broker must then order and deduplicate
up to five outstanding batches per partition, KIP-98). Other acks (librdkafka
allows idempotence only with acks=all) make one counted attempt (`retries=0`), and their uncounted resends
remain. Either way an error in a delivery
report is the last attempt's, so the send is indeterminate whatever the code
(`ClientError(retried=True)`, see workloads.errors). Idempotent producers also keep
`enable.gapless.guarantee`: a batch that fails for good raises a fatal error instead of
leaving a gap in what the producer wrote (a fatal error replaces the producer). Only errors
raised by `produce()` itself
(never queued) keep their code's classification. kafka-python makes one attempt per record
(retries=0). Values are the decimal text of integers; records have no key (the partition is
chosen explicitly).
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Mapping
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, Protocol

from workloads.errors import ClientError

TP = tuple[str, int]
# librdkafka's own log lines go here, not to stderr: `log_level` 0 still lets emergencies
# through (an idempotent producer's fatal "out of order sequence number", which a lossy bug
# provokes, was printed in a bug zoo run); the client code gets errors from the callbacks
LIBRDKAFKA_LOG = logging.getLogger("wrack.librdkafka")
LIBRDKAFKA_LOG.addHandler(logging.NullHandler())
LIBRDKAFKA_LOG.propagate = False
MAX_IN_FLIGHT = 5  # what Kafka's idempotent producers allow per connection (KIP-98)
_PRODUCERS = itertools.count(1)  # numbers the shared producers of this process (`ConfluentSender`)


class KafkaIO(Protocol):
    def send(self, topic: str, partition: int, value: int) -> int: ...
    def assign(self, positions: Mapping[TP, int | None]) -> None: ...
    def poll(self, timeout: float, max_records: int = 500) -> list[tuple[str, int, int, int]]: ...
    def high_watermark(self, topic: str, partition: int) -> int: ...
    def close(self) -> None: ...


def _delivery_error(err: Any) -> ClientError:
    """The error of a librdkafka delivery report: the record may have been sent more than
    once before it (see the module docstring), so the send's outcome is indeterminate."""
    return ClientError(err.code(), err.name(), err.str(), retried=True)


def _value(raw: bytes | None) -> Any:
    if raw is None:
        return None
    try:
        return int(raw)
    except ValueError:
        return raw.decode(errors="replace")


def transaction_timeout(request_timeout: float) -> float:
    """Seconds a transactional producer's transaction may stay open before its coordinator
    aborts it (`transaction.timeout.ms`): twice the request timeout, at least 10 s. So long
    may a transaction a crashed client left open hold read_committed consumers (KIP-98)."""
    return max(2 * max(0.1, request_timeout), 10.0)


def producer_delivery(acks: str, timeout_ms: int, idempotent: bool = True, in_flight: int = 1) -> dict[str, Any]:
    """librdkafka's delivery settings for `acks` (module docstring): acks=all sends are
    idempotent (the broker drops a resent batch it already has), retried without limit
    and never time out in the client (`message.timeout.ms` 0: a timeout would bump the
    producer epoch and resend possibly written records under new sequence numbers), with
    `in_flight` requests per connection (at most `MAX_IN_FLIGHT`); other acks, and acks=all
    when `idempotent` is off (a broker without the idempotent producer), make one counted
    attempt within `timeout_ms`, one request in flight. Idempotent ones are gap-less: a
    batch that fails for good is a fatal error, never a hole in the producer's records."""
    if acks == "all" and idempotent:
        return {"acks": "all", "enable.idempotence": True, "message.timeout.ms": 0,
                "enable.gapless.guarantee": True,
                "max.in.flight.requests.per.connection": max(1, min(in_flight, MAX_IN_FLIGHT))}
    return {"acks": str(acks), "enable.idempotence": False, "message.send.max.retries": 0,
            "message.timeout.ms": timeout_ms, "max.in.flight.requests.per.connection": 1}


class ConfluentIO:
    """confluent-kafka (librdkafka)."""

    def __init__(self, bootstrap: str, *, acks: str = "all", timeout: float = 5.0, client_id: str = "wrack",
                 transactional_id: str | None = None, idempotent: bool = True, in_flight: int = 1,
                 group: str | None = None):
        # lazy: optional client (harness extra), ~30 ms; only --client confluent loads it
        import confluent_kafka as ck

        self._ck = ck
        self.timeout = timeout
        ms = max(100, int(timeout * 1000))
        common = {"bootstrap.servers": bootstrap, "client.id": client_id, "socket.timeout.ms": ms,
                  "reconnect.backoff.ms": 50, "reconnect.backoff.max.ms": 500,
                  "topic.metadata.refresh.interval.ms": 2000, "metadata.max.age.ms": 5000,
                  "socket.connection.setup.timeout.ms": ms, "log_level": 0, "logger": LIBRDKAFKA_LOG}
        self._producer_conf = {**common, **producer_delivery(acks, ms, idempotent, in_flight), "linger.ms": 0,
                               "request.timeout.ms": ms, "retry.backoff.ms": 50}
        self._consumer_conf = {**common, "group.id": group or f"wrack-{client_id}", "enable.auto.commit": False,
                               "auto.offset.reset": "earliest", "enable.partition.eof": False,
                               "isolation.level": "read_uncommitted", "fetch.wait.max.ms": 100,
                               "session.timeout.ms": 6000, "heartbeat.interval.ms": 2000}
        self.transactional_id = transactional_id
        if transactional_id is not None:
            self._producer_conf.pop("enable.gapless.guarantee", None)  # an abort settles a failed batch
            self._producer_conf.update({"transactional.id": transactional_id, "acks": "all",
                                        "enable.idempotence": True,
                                        "transaction.timeout.ms": int(transaction_timeout(timeout) * 1000),
                                        "max.in.flight.requests.per.connection": max(1, min(in_flight, MAX_IN_FLIGHT))})
            self._consumer_conf["isolation.level"] = "read_committed"
        self._producer: Any = None
        self._consumer: Any = None
        self._zombies: list[Any] = []  # abandoned transactional producers (`fence`)
        # a synchronous commit runs on a daemon thread of its own (`commit_offsets`); the consumer
        # is closed by whichever ends last, close() or that thread (`_commit_lock` decides)
        self._commit_waiting: Future[Any] | None = None
        self._commit_lock = threading.Lock()
        self._commit_running = False
        self._consumer_closing = False
        # set by close(): an op still running (the interpreter closes clients whose op
        # outlived the run) opens nothing more, or its producer would outlive the test and
        # talk to the next test's cluster, at the same addresses, under the same ids
        self._closed = False

    @property
    def producer(self) -> Any:
        return self._open_producer(self.timeout)

    def _open_producer(self, init_timeout: float) -> Any:
        if self._producer is None:
            if self._closed:
                raise ClientError(None, "CLOSED", "the client was closed")
            p = self._ck.Producer(self._producer_conf)
            err = None
            if self.transactional_id is not None:
                try:
                    p.init_transactions(init_timeout)
                except self._ck.KafkaException as e:
                    err = e.args[0]
            if err is not None or self._closed:
                # a producer whose InitProducerId did not finish keeps trying in the
                # background: destroy it now (raised from the except block, it would be
                # held by a frame/traceback cycle until a full garbage collection)
                _discard(self._ck, p)
                del p
                if err is None:
                    raise ClientError(None, "CLOSED", "the client was closed")
                raise self._txn_error_of(err)
            self._producer = p
        return self._producer

    # ------------------------------------------------------------ transactions
    def _txn_error(self, e: Any) -> ClientError:
        return self._txn_error_of(e.args[0])

    def _txn_error_of(self, err: Any) -> ClientError:
        if err.fatal():
            self._drop_producer()
        return ClientError(err.code(), err.name(), err.str())

    def begin(self) -> None:
        """Begin a transaction (the producer is made, and its id initialised, if needed);
        nothing was written if this raises."""
        try:
            self.producer.begin_transaction()
        except self._ck.KafkaException as e:
            raise self._txn_error(e) from None

    def commit(self) -> bool:
        """Commit the transaction: True; False when it was aborted instead (an abortable
        error, then a successful abort: definitely not committed); ClientError: unknown."""
        try:
            self.producer.commit_transaction(self.timeout)
            return True
        except self._ck.KafkaException as e:
            if not e.args[0].txn_requires_abort():
                raise self._txn_error(e) from None
        self.abort()
        return False

    def abort(self) -> None:
        """Abort the transaction; ClientError if that is not known to have happened."""
        try:
            self.producer.abort_transaction(self.timeout)
        except self._ck.KafkaException as e:
            raise self._txn_error(e) from None

    def fence(self) -> None:
        """Abandon the producer (still running, not purged: it keeps retrying what it had in
        flight) and start a new one with the same transactional id, waiting up to twice the
        timeout for its InitProducerId. When this returns, the abandoned producer's open
        transaction is over at the coordinator: aborted, unless its commit had been asked
        for. ClientError if the new producer could not be initialised."""
        if self._producer is not None:
            self._zombies.append(self._producer)
            self._producer = None
        if self._closed:
            self._discard_zombies()
        self._open_producer(2 * self.timeout)

    def _discard_zombies(self) -> None:
        while self._zombies:
            _discard(self._ck, self._zombies.pop())

    @property
    def consumer(self) -> Any:
        if self._consumer is None:
            if self._closed:
                raise ClientError(None, "CLOSED", "the client was closed")
            self._consumer = self._ck.Consumer(self._consumer_conf)
        return self._consumer

    def send(self, topic: str, partition: int, value: int) -> int:
        box: dict[str, Any] = {}

        def done(err: Any, msg: Any) -> None:
            box["err"] = err
            box["offset"] = msg.offset() if msg is not None else None

        p = self.producer
        try:
            p.produce(topic, value=str(value).encode(), partition=partition, on_delivery=done)
        except BufferError:
            raise ClientError(-184) from None
        except self._ck.KafkaException as e:
            err = e.args[0]
            if err.fatal():
                self._drop_producer()
            p = None  # this frame and `e` make a cycle: it must not hold the producer
            raise ClientError(err.code(), err.name(), err.str()) from None
        deadline = time.monotonic() + self.timeout + 1.0
        while "err" not in box:
            left = deadline - time.monotonic()
            if left <= 0:
                p = None  # the exception's traceback keeps this frame: not the producer
                raise ClientError(None, "TIMEOUT", f"no delivery report in {self.timeout + 1.0:g} s")
            try:
                p.poll(min(left, 0.5))
            except self._ck.KafkaException as e:  # a fatal error of the producer: this send's fate is unknown
                if e.args[0].fatal():
                    self._drop_producer()
                p = None  # as above
                raise ClientError(None, "FATAL", e.args[0].str()) from None
        err = box["err"]
        if err is not None:
            if err.fatal():
                self._drop_producer()
            raise _delivery_error(err)
        return int(box["offset"])

    def _drop_producer(self) -> None:
        """After an idempotent producer's fatal error: the next send makes a new one."""
        if self._producer is not None:
            _discard(self._ck, self._producer)
            self._producer = None

    def assign(self, positions: Mapping[TP, int | None]) -> None:
        """Explicit offsets only: None is offset 0 (a log that starts later answers
        OFFSET_OUT_OF_RANGE, and auto.offset.reset=earliest moves the consumer to its start).
        Never OFFSET_BEGINNING: librdkafka looks a logical offset up with ListOffsets, and
        when a re-assign makes that answer outdated it arms a 500 ms retry that a later
        assign does not cancel; it then sends the partition back to offset 0 however far it
        was read (tests/broker/test_broker_consumer_reassign.py)."""
        ck = self._ck
        self.consumer.assign([ck.TopicPartition(t, p, 0 if o is None else o) for (t, p), o in positions.items()])

    def poll(self, timeout: float, max_records: int = 500) -> list[tuple[str, int, int, int]]:
        msgs = self.consumer.consume(num_messages=max_records, timeout=timeout)
        out = []
        for m in msgs:
            err = m.error()
            if err is not None:
                if err.code() == self._ck.KafkaError._PARTITION_EOF:
                    continue
                raise ClientError(err.code(), err.name(), err.str())
            out.append((m.topic(), m.partition(), m.offset(), _value(m.value())))
        return out

    def commit_offsets(self, positions: Mapping[TP, int]) -> None:
        """Commit `positions` (the next offset to read, per partition) for the consumer's
        group, synchronously (OffsetCommit; a simple commit: no member, generation -1);
        ClientError when it is not known to have succeeded."""
        ck = self._ck
        if self._commit_waiting is not None and not self._commit_waiting.done():
            raise ClientError(None, "TIMEOUT", "an earlier commit of this consumer is still unanswered")
        offsets = [ck.TopicPartition(t, p, o) for (t, p), o in positions.items()]
        # librdkafka's synchronous commit has no timeout (it waits for a coordinator as long as
        # none answers: a Tansu run hung 5 min in one), so it runs on a daemon thread of its own:
        # one that never returns must not keep the process from exiting either
        self._commit_waiting = self._start_commit(self.consumer, offsets)
        try:
            done = self._commit_waiting.result(timeout=self.timeout)
        except FutureTimeout:
            raise ClientError(None, "TIMEOUT", f"commit unanswered after {self.timeout:g} s") from None
        except ck.KafkaException as e:
            err = e.args[0]
            raise ClientError(err.code(), err.name(), err.str()) from None
        for tp in done or ():
            if tp.error is not None:
                raise ClientError(tp.error.code(), tp.error.name(), tp.error.str())

    def _start_commit(self, consumer: Any, offsets: list[Any]) -> Future[Any]:
        """`consumer.commit(offsets)` on a daemon thread; its outcome as a Future. If close()
        came while it ran, the thread closes the consumer when the commit returns."""
        fut: Future[Any] = Future()
        with self._commit_lock:
            self._commit_running = True

        def run() -> None:
            try:
                fut.set_result(consumer.commit(offsets=offsets, asynchronous=False))
            except BaseException as e:  # noqa: BLE001 - handed to the waiting op
                fut.set_exception(e)
            finally:
                with self._commit_lock:
                    self._commit_running = False
                    closing = self._consumer_closing
                if closing:
                    _close_consumer(consumer)

        threading.Thread(target=run, name="wrack-commit", daemon=True).start()
        return fut

    def committed_offsets(self, tps: list[TP]) -> dict[TP, int | None]:
        """The consumer group's committed offsets of `tps` (OffsetFetch; None: none);
        ClientError if they could not be read."""
        ck = self._ck
        try:
            got = self.consumer.committed([ck.TopicPartition(t, p) for t, p in tps], timeout=self.timeout)
        except ck.KafkaException as e:
            err = e.args[0]
            raise ClientError(err.code(), err.name(), err.str()) from None
        out: dict[TP, int | None] = {}
        for tp in got:
            if tp.error is not None:
                raise ClientError(tp.error.code(), tp.error.name(), tp.error.str())
            out[(tp.topic, tp.partition)] = tp.offset if tp.offset >= 0 else None
        return out

    def high_watermark(self, topic: str, partition: int) -> int:
        try:
            _low, high = self.consumer.get_watermark_offsets(self._ck.TopicPartition(topic, partition),
                                                             timeout=self.timeout, cached=False)
        except self._ck.KafkaException as e:
            err = e.args[0]
            raise ClientError(err.code(), err.name(), err.str()) from None
        return int(high)

    def close(self) -> None:
        self._closed = True
        self._drop_producer()
        self._discard_zombies()
        if self._consumer is not None:
            with self._commit_lock:
                self._consumer_closing = True
                busy = self._commit_running
            if not busy:  # else the commit's thread closes it when the commit returns
                _close_consumer(self._consumer)
            self._consumer = None


def _close_consumer(consumer: Any) -> None:
    """Close a librdkafka consumer (one closed already raises RuntimeError: fine)."""
    try:
        consumer.close()
    except RuntimeError:
        pass


def _discard(ck: Any, producer: Any) -> None:
    """Purge a librdkafka producer (in flight too) and let it go (destroyed with its last
    reference)."""
    try:
        producer.purge()
        producer.flush(0)
    except ck.KafkaException:  # a broken producer raises its fatal error again
        pass


class ConfluentSender:
    """One librdkafka producer shared by many processes' concurrent sends.

    `send` may be called from any number of threads at once; each call produces one record
    asynchronously and waits (at most `timeout` + 1 s) for its own delivery report, which a
    poller thread serves. The producer's settings are `ConfluentIO`'s (idempotent for acks=all);
    every delivery-report error is indeterminate (module docstring)."""

    def __init__(self, bootstrap: str, *, acks: str = "all", timeout: float = 5.0, client_id: str = "wrack",
                 idempotent: bool = True, in_flight: int = 1):
        self._io = ConfluentIO(bootstrap, acks=acks, timeout=timeout, client_id=client_id, idempotent=idempotent,
                               in_flight=in_flight)
        self._ck = self._io._ck
        self.timeout = timeout
        self._client_id = client_id
        self._ordered = bool(self._io._producer_conf["enable.idempotence"])  # an order to keep
        self._producer = self._io.producer
        self._tag = self._new_tag()
        self._handed = 0  # records handed to the producer `_tag`, in produce() order
        self._given: dict[int, list[Any]] = {}  # value -> [tag, n], until asked (`given`)
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._poller = threading.Thread(target=self._serve, name=f"sender-{client_id}", daemon=True)
        self._poller.start()

    def _new_tag(self) -> str:
        """A name for the producer instance now in use, unique in this process."""
        return f"{self._client_id}/{next(_PRODUCERS)}"

    def _serve(self) -> None:
        """Serve delivery reports until closed. A fatal error raised by `poll` (librdkafka
        reports an idempotent producer's fatal error there too) replaces the producer; the
        sends it held end as indeterminate when their wait runs out."""
        while not self._closed.is_set():
            producer = self._producer
            try:
                producer.poll(0.05)
            except self._ck.KafkaException as e:
                if e.args[0].fatal():
                    self._replace_after_fatal(producer)

    def _replace_after_fatal(self, broken: Any) -> None:
        """An idempotent producer's fatal error leaves it unusable: the next sends go to a new
        one (a new producer id); what the broken one still holds is purged (indeterminate)."""
        with self._lock:
            if self._producer is not broken:
                return
            self._io._producer = None
            self._producer = self._io.producer
            self._tag, self._handed = self._new_tag(), 0
        try:
            broken.purge()
            broken.flush(0)
        except self._ck.KafkaException:  # a broken producer raises its fatal error again
            pass

    def send(self, topic: str, partition: int, value: int) -> int:
        done = threading.Event()
        box: dict[str, Any] = {}

        def report(err: Any, msg: Any) -> None:
            box["err"] = err
            box["offset"] = msg.offset() if msg is not None else None
            done.set()

        try:
            producer = self._handed_over(topic, partition, value, report)
        except BufferError:
            raise ClientError(-184) from None
        except self._ck.KafkaException as e:
            err = e.args[0]
            raise ClientError(err.code(), err.name(), err.str()) from None
        if not done.wait(self.timeout + 1.0):
            raise ClientError(None, "TIMEOUT", f"no delivery report in {self.timeout + 1.0:g} s")
        err = box["err"]
        if err is not None:
            if err.fatal():
                self._replace_after_fatal(producer)
            raise _delivery_error(err)
        return int(box["offset"])

    def _handed_over(self, topic: str, partition: int, value: int, report: Any) -> Any:
        """produce() the record; the producer that took it, whose n-th record it is (numbered
        under the lock, so n is the order of produce() calls)."""
        failed: Exception | None = None
        with self._lock:
            producer = self._producer
            try:
                producer.produce(topic, value=str(value).encode(), partition=partition, on_delivery=report)
            except self._ck.KafkaException as e:
                failed = e
            else:
                if self._ordered:
                    self._given[value] = [self._tag, self._handed]
                    self._handed += 1
        if failed is not None:  # replaced (when fatal) once the lock is released
            if failed.args[0].fatal():
                self._replace_after_fatal(producer)
            raise failed
        return producer

    def given(self, value: int) -> list[Any] | None:
        """[producer, n]: `value` was the n-th record handed to idempotent producer `producer`
        (None: not idempotent, or never handed over). Forgotten once asked."""
        with self._lock:
            return self._given.pop(value, None)

    def close(self) -> None:
        """Drop what is still queued (its senders get a purge error) and stop the poller."""
        self._producer.purge()
        self._producer.flush(1.0)
        self._closed.set()
        self._poller.join(2.0)


class Sender(Protocol):
    def send(self, topic: str, partition: int, value: int) -> int: ...
    def given(self, value: int) -> list[Any] | None: ...
    def close(self) -> None: ...


def create_topics(bootstrap: str, topics: Mapping[str, int], *, replication_factor: int,
                  config: Mapping[str, str] | None = None, timeout: float = 30.0) -> None:
    """Create `topics` (name -> partitions) and wait until every partition has a leader.
    Existing topics are fine. Raises RuntimeError naming what did not come up in time."""
    # lazy: confluent_kafka (harness extra), ~50 ms; `wrack analyze` imports this module and creates no topic
    import confluent_kafka as ck
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 5000, "log_level": 0})
    deadline = time.monotonic() + timeout
    # librdkafka sends CreateTopics to the controller it learnt from metadata: fetch it first
    # (without it the first request waits for a controller until its timeout)
    last_err = ""
    while True:
        try:
            admin.list_topics(timeout=min(10.0, timeout))
            break
        except ck.KafkaException as e:
            last_err = f"metadata: {e.args[0].name()} {e.args[0].str()}"
            if time.monotonic() > deadline:
                raise RuntimeError(f"no metadata from {bootstrap} in {timeout:g} s: {last_err}") from None
            time.sleep(0.2)
    pending = dict(topics)
    while pending and time.monotonic() < deadline:
        new = [NewTopic(t, num_partitions=n, replication_factor=replication_factor, config=dict(config or {}))
               for t, n in pending.items()]
        futs = admin.create_topics(new, operation_timeout=10, request_timeout=10)
        for t, fut in futs.items():
            try:
                fut.result()
                pending.pop(t, None)
            except ck.KafkaException as e:
                err = e.args[0]
                if err.code() == ck.KafkaError.TOPIC_ALREADY_EXISTS:
                    pending.pop(t, None)
                else:
                    last_err = f"{t}: {err.name()} {err.str()}"
            except Exception as e:  # noqa: BLE001 - retried until the deadline
                last_err = f"{t}: {e}"
        if pending:
            time.sleep(0.2)
    if pending:
        raise RuntimeError(f"could not create topics {sorted(pending)} in {timeout:g} s: {last_err}")
    while True:
        try:
            md = admin.list_topics(timeout=5)
        except ck.KafkaException as e:
            if time.monotonic() > deadline:
                raise RuntimeError(f"no metadata after creating topics: {e.args[0].str()}") from None
            time.sleep(0.2)
            continue
        missing = []
        for t, n in topics.items():
            tm = md.topics.get(t)
            if tm is None or tm.error is not None or len(tm.partitions) < n:
                missing.append(t)
                continue
            missing += [f"{t}-{p}" for p, pm in tm.partitions.items() if pm.leader < 0]
        if not missing:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"no leader for {missing} after {timeout:g} s")
        time.sleep(0.2)
