"""The kafka-python client behind `workloads.kafka_io`'s interface (`--client kafka-python`,
the alternative to librdkafka): `KafkaPythonIO` is a `KafkaIO` (one producer and one
consumer; one attempt per record, retries=0; no transactions and no consumer groups) and
`KafkaPythonSender` a `Sender` (kafka-python's producer is thread-safe, so one client serves
every sending thread). kafka_io.py's docstring states the interface's contract.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from workloads.errors import ClientError
from workloads.kafka_io import TP, _value


class KafkaPythonIO:
    """kafka-python."""

    def __init__(self, bootstrap: str, *, acks: str = "all", timeout: float = 5.0, client_id: str = "wrack",
                 transactional_id: str | None = None, idempotent: bool = True, in_flight: int = 1,
                 group: str | None = None):
        if transactional_id is not None:
            raise ValueError("transactions need --client confluent")
        # lazy: optional client (harness extra), ~0.2 s; only --client kafka-python loads it
        import kafka
        import kafka.errors

        self._kafka = kafka
        self._errors = kafka.errors
        self.timeout = timeout
        ms = max(100, int(timeout * 1000))
        self._servers = bootstrap.split(",")
        self._common = {"bootstrap_servers": self._servers, "client_id": client_id, "request_timeout_ms": ms,
                        "reconnect_backoff_ms": 50, "reconnect_backoff_max_ms": 500, "metadata_max_age_ms": 5000}
        self._acks: Any = "all" if acks == "all" else int(acks)
        self._producer: Any = None
        self._consumer: Any = None

    def _error(self, e: Exception) -> ClientError:
        errno = getattr(e, "errno", None)
        if isinstance(e, self._errors.KafkaTimeoutError) or errno is None:
            return ClientError(None, type(e).__name__, str(e))
        return ClientError(int(errno), None, str(e))

    @property
    def producer(self) -> Any:
        if self._producer is None:
            try:
                self._producer = self._kafka.KafkaProducer(
                    **self._common, acks=self._acks, retries=0, linger_ms=0,
                    max_in_flight_requests_per_connection=1, max_block_ms=int(self.timeout * 1000))
            except self._errors.NoBrokersAvailable as e:
                raise ClientError(-187, "NoBrokersAvailable", str(e)) from None
        return self._producer

    @property
    def consumer(self) -> Any:
        if self._consumer is None:
            try:
                self._consumer = self._kafka.KafkaConsumer(
                    **self._common, group_id=None, enable_auto_commit=False, auto_offset_reset="earliest",
                    fetch_max_wait_ms=100, isolation_level="read_uncommitted")
            except self._errors.NoBrokersAvailable as e:
                raise ClientError(-187, "NoBrokersAvailable", str(e)) from None
        return self._consumer

    def send(self, topic: str, partition: int, value: int) -> int:
        try:
            fut = self.producer.send(topic, value=str(value).encode(), partition=partition)
        except ClientError:
            raise
        except self._errors.KafkaTimeoutError as e:  # metadata not available: nothing sent
            raise ClientError(-188, "KafkaTimeoutError(metadata)", str(e)) from None
        except self._errors.KafkaError as e:
            raise self._error(e) from None
        try:
            md = fut.get(timeout=self.timeout + 1.0)
        except self._errors.KafkaError as e:
            raise self._error(e) from None
        return int(md.offset)

    def assign(self, positions: Mapping[TP, int | None]) -> None:
        TopicPartition = self._kafka.TopicPartition
        c = self.consumer
        tps = {TopicPartition(t, p): o for (t, p), o in positions.items()}
        c.assign(list(tps))
        for tp, o in tps.items():
            if o is None:
                c.seek_to_beginning(tp)
            else:
                c.seek(tp, o)

    def poll(self, timeout: float, max_records: int = 500) -> list[tuple[str, int, int, int]]:
        try:
            batches = self.consumer.poll(timeout_ms=int(timeout * 1000), max_records=max_records)
        except self._errors.KafkaError as e:
            raise self._error(e) from None
        out = []
        for tp, recs in batches.items():
            for r in recs:
                out.append((tp.topic, tp.partition, r.offset, _value(r.value)))
        out.sort(key=lambda x: (x[0], x[1], x[2]))
        return out

    def high_watermark(self, topic: str, partition: int) -> int:
        tp = self._kafka.TopicPartition(topic, partition)
        try:
            return int(self.consumer.end_offsets([tp])[tp])
        except self._errors.KafkaError as e:
            raise self._error(e) from None

    def close(self) -> None:
        if self._producer is not None:
            try:
                self._producer.close(timeout=0)
            except Exception:  # noqa: BLE001 - closing a broken client
                pass
            self._producer = None
        if self._consumer is not None:
            try:
                self._consumer.close(autocommit=False)
            except Exception:  # noqa: BLE001
                pass
            self._consumer = None


class KafkaPythonSender:
    """kafka-python's producer is thread-safe: one `KafkaPythonIO` serves every sender."""

    def __init__(self, bootstrap: str, *, acks: str = "all", timeout: float = 5.0, client_id: str = "wrack",
                 idempotent: bool = True, in_flight: int = 1):
        self._io = KafkaPythonIO(bootstrap, acks=acks, timeout=timeout, client_id=client_id)

    def send(self, topic: str, partition: int, value: int) -> int:
        return self._io.send(topic, partition, value)

    def given(self, value: int) -> list[Any] | None:
        return None  # one attempt per record, not idempotent: no order to keep

    def close(self) -> None:
        self._io.close()
