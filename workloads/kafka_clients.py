"""The client libraries by name (`--client`): `open_io(lib, bootstrap, ...)` gives a
`KafkaIO` and `open_sender(lib, bootstrap, ...)` a `Sender` (workloads/kafka_io.py states
both contracts) of confluent-kafka (librdkafka, the default; kafka_io.py) or kafka-python
(kafka_python_io.py, which loads the library only when a client is made)."""

from __future__ import annotations

from typing import Any

from workloads.kafka_io import ConfluentIO, ConfluentSender, KafkaIO, Sender
from workloads.kafka_python_io import KafkaPythonIO, KafkaPythonSender

CLIENT_LIBRARIES = ("confluent", "kafka-python")


def _library(lib: str) -> tuple[Any, Any]:
    """(the KafkaIO class, the Sender class) of client library `lib`; ValueError if unknown."""
    if lib == "confluent":
        return ConfluentIO, ConfluentSender
    if lib == "kafka-python":
        return KafkaPythonIO, KafkaPythonSender
    raise ValueError(f"unknown client library {lib!r} (known: {', '.join(CLIENT_LIBRARIES)})")


def open_io(lib: str, bootstrap: str, **kw: Any) -> KafkaIO:
    """A `KafkaIO` of library `lib` (module docstring)."""
    io: KafkaIO = _library(lib)[0](bootstrap, **kw)
    return io


def open_sender(lib: str, bootstrap: str, **kw: Any) -> Sender:
    """A `Sender` of library `lib`: one producer whose `send` many threads call at once."""
    sender: Sender = _library(lib)[1](bootstrap, **kw)
    return sender
