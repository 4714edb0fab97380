"""Building a process's parts from its settings: the controller quorum member with its
files, the broker with its storage, the listeners' sockets.

`open_quorum` reads the metadata log and the quorum state (a bad file raises ValueError
naming it) and builds the `QuorumController` over a `RaftNode`; `open_broker` recovers
the storage and builds the `Broker`; `bind_listeners` binds every listener (a taken port
is a `StartupError`). The process (broker/server/node.py) starts them.
"""

from __future__ import annotations

import logging
import random
import socket
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from broker.config import BrokerSettings
from broker.core import safeguards as sg
from broker.core.broker import Broker, BrokerConfig
from broker.core.controller import ControllerConfig
from broker.core.messages import Endpoint
from broker.core.quorum_controller import QuorumController
from broker.core.raft import RaftConfig, RaftNode
from broker.core.raft_messages import RaftEntry
from broker.server.groups import GroupCoordinator
from broker.server.logstore import open_store
from broker.server.offsets import OffsetStore
from broker.server.quorum_store import (
    METADATA_FILE,
    QUORUM_STATE_FILE,
    FileRaftLog,
    MetadataLogFile,
    QuorumStateFile,
)
from broker.storage import LogManager

OFFSETS_FILE = "wrack-consumer-offsets.log"


class StartupError(Exception):
    """The process cannot start (e.g. a listener's port is taken): one line, exit 254."""


@dataclass
class QuorumFiles:
    """A controller's files: its metadata log and its quorum state."""

    metadata: MetadataLogFile
    state: QuorumStateFile


@dataclass
class BrokerParts:
    """A broker and what it serves from: its log storage, committed offsets and groups."""

    broker: Broker
    store: LogManager
    offsets: OffsetStore
    groups: GroupCoordinator


def open_quorum(
    s: BrokerSettings,
    now: int,
    safeguards: sg.SafeguardSet,
    log: logging.Logger,
    on_append: Callable[[int, RaftEntry], None],
) -> tuple[QuorumController, QuorumFiles]:
    """This node's controller: its metadata log and quorum state from disk (ValueError
    names a bad file), a `RaftNode` over the voters, the `Controller` config."""
    files = QuorumFiles(
        MetadataLogFile(Path(s.metadata_log_dir) / METADATA_FILE),
        QuorumStateFile(Path(s.metadata_log_dir) / QUORUM_STATE_FILE),
    )
    entries = files.metadata.load()
    state = files.state.load()
    raft = RaftNode(
        s.node_id,
        [v.node_id for v in s.controller_quorum_voters],
        FileRaftLog(files.metadata, entries, on_append=on_append),
        RaftConfig(
            election_timeout_ms=s.controller_quorum_election_timeout_ms,
            fetch_timeout_ms=s.controller_quorum_fetch_timeout_ms,
            request_timeout_ms=s.controller_quorum_request_timeout_ms,
            retry_backoff_ms=s.controller_quorum_retry_backoff_ms,
            # KIP-996 (Kafka 4.0, no setting): a voter cut off from the leader alone
            # cannot take over while the others still hear from it
            pre_vote=True,
        ),
        random.Random(),
        state,
        now,
    )
    log.info(
        "controller: metadata log %s with %d records, quorum state %s",
        files.metadata.path,
        len(entries),
        state or "none",
    )
    quorum = QuorumController(
        ControllerConfig(
            node_id=s.node_id,
            broker_session_timeout_ms=s.broker_session_timeout_ms,
            min_insync_replicas=s.min_insync_replicas,
            unclean_leader_election_enable=s.unclean_leader_election_enable,
            unclean_recovery_strategy=s.unclean_recovery_strategy,
            safeguards=safeguards,
        ),
        raft,
    )
    return quorum, files


def open_broker(
    s: BrokerSettings,
    controller_id: int,
    safeguards: sg.SafeguardSet,
    log: logging.Logger,
    clock: Callable[[], int],
) -> BrokerParts:
    """Recover the storage, load the committed offsets, build the `Broker` (its first
    controller is `controller_id`)."""
    store = open_store(list(s.log_dirs), dict(s.storage), log.getChild("storage"), clock)
    info = store.startup()
    log.info(
        "storage: %s shutdown, previous broker epoch %d",
        "clean" if info.clean_shutdown else "unclean",
        info.previous_broker_epoch,
    )
    offsets = OffsetStore(Path(s.log_dirs[0]) / OFFSETS_FILE)
    offsets.load()
    groups = GroupCoordinator(
        s.group_initial_rebalance_delay_ms, s.group_min_session_timeout_ms, s.group_max_session_timeout_ms
    )
    broker = Broker(
        BrokerConfig(
            node_id=s.node_id,
            controller_id=controller_id,
            broker_heartbeat_interval_ms=s.broker_heartbeat_interval_ms,
            replica_lag_time_max_ms=s.replica_lag_time_max_ms,
            replica_fetch_wait_max_ms=s.replica_fetch_wait_max_ms,
            replica_fetch_backoff_ms=s.replica_fetch_backoff_ms,
            retry_backoff_ms=s.retry_backoff_ms,
            retry_backoff_max_ms=max(s.retry_backoff_max_ms, s.retry_backoff_ms),
            request_timeout_ms=s.replica_socket_timeout_ms,
            hw_checkpoint_interval_ms=s.replica_high_watermark_checkpoint_interval_ms,
            min_insync_replicas=s.min_insync_replicas,
            safeguards=safeguards,
            listeners=tuple(Endpoint(li.name, li.host, li.port) for li in s.advertised_listeners),
            unfence_when_caught_up=True,
        ),
        store.get_or_create,
        str(uuid.uuid4()),
        info.previous_broker_epoch,
        dict(info.hw_checkpoint),
    )
    return BrokerParts(broker, store, offsets, groups)


def never_serve_again(s: BrokerSettings, log: logging.Logger) -> bool:
    """`wrack.test.never.serve.after.restart` (liveness tests only): the broker's first
    start leaves a marker in its first log dir; a later start finds it and never
    registers, so it never serves again."""
    if not s.test_never_serve_after_restart:
        return False
    marker = Path(s.log_dirs[0]) / ".wrack-started-once"
    if marker.exists():
        log.warning("wrack.test.never.serve.after.restart: started before, never registering")
        return True
    marker.touch()
    return False


def bind_listeners(s: BrokerSettings) -> list[tuple[Any, socket.socket]]:
    """Bind every listener now (a taken port is a `StartupError`): (listener, socket)."""
    bound = []
    for li in s.listeners:
        host = li.host or "0.0.0.0"
        try:
            family = socket.AF_INET6 if ":" in host else socket.AF_INET
            sock = socket.socket(family, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host, li.port))
            sock.setblocking(False)
        except OSError as e:
            raise StartupError(f"listener {li.name}://{li.host}:{li.port}: {e.strerror or e}") from None
        bound.append((li, sock))
    return bound
