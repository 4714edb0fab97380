"""A Kafka-aware proxy between the workload's clients and the brokers: faults on named
request and response types in the client path.

`KafkaProxy(nodes, journal, seed)` runs in the harness's process (an asyncio loop on a
thread of its own). `route("host:port")` opens a listener on 127.0.0.1 for that broker
and returns its address: clients bootstrap through it, and every Metadata,
FindCoordinator and DescribeCluster answer passing through has its brokers' addresses
rewritten to their listeners (opened on first sight), so every later connection of the
clients goes through the proxy too. Everything else passes byte for byte.

Faults are `ProxyRule`s (`set_rules`): on a request type (Kafka's name: Produce, Fetch,
EndTxn, AddPartitionsToTxn, InitProducerId, OffsetCommit, ...), in one direction
(request: client to broker; response: broker to client), optionally on one node's
connections only, each frame matched is acted on with probability `p`, at most `limit`
times, drawn with the proxy's seeded rng:

- `delay` holds it `delay_ms` (what follows on its connection waits behind it, as on a
  slow link: a delay past the client's request timeout makes it retry while the original
  is still on its way: when a client hangs up, what it sent is still delivered, for up to
  `DRAIN_S`, as a network would);
- `drop` loses it and everything after it on its connection, which the proxy then cuts (a
  TCP link loses no frame alone: it delivers a prefix of what was sent and breaks). What
  the client sent before a dropped request still reaches the broker (as after a hang-up,
  below); a dropped answer leaves the client to retry though the broker did the work;
- `duplicate` sends it twice (a request is done twice by the broker; the proxy swallows
  the second answer);
- `reorder` sends it after the next frame of its connection (or alone after 0.5 s). TCP
  never does that within a connection, and a client's answer to it can look like the
  broker's bug: librdkafka's idempotent producer takes a Produce whose sequence comes
  out of order for a lost one, bumps its epoch and numbers again from 0 the records it
  still holds, some possibly written already: a `duplicate` no broker can prevent. So
  the default draw (nemesis/clientpath.py) never reorders; a rule may ask for it.

Whatever the request faults did, a client gets its answers in the order it sent its
requests (Kafka's promise per connection): answers that come back out of order wait for
the ones before them.

Each action calls `journal({"api", "direction", "action", "node", "correlation_id",
"client_id", ...})` (the nemesis records it as a `client-path-action` event). Rules belong to an owner (`set_rules(rules, owner)`,
`clear_rules(owner)`), so faults that use the proxy at once keep each other's. `hold(api)`
arms a one-shot trap: the next request of that type is held before it is forwarded and
`Held` tells which node it was going to and what it said (an EndTxn's transactional id and
whether it commits); the caller releases it (`Held.release`), e.g. to kill that broker
while it acts on it. `txn_ids` are the transactional ids the clients' requests named. `clear()` ends the rules
and releases what is held; `close()` stops
the loop and every connection.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
import struct
import threading
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import kio.index as kio_index
import kio.schema.response_header.v1 as response_header_v1
from kio.serial import entity_reader

from broker.wire import kafka as k

ACTIONS = ("delay", "drop", "duplicate", "reorder")
DIRECTIONS = ("request", "response")
# the request types client-path faults aim at by default (issue 25): the writes, the reads,
# the transaction protocol's steps and the group's commits
DEFAULT_APIS = ("Produce", "Fetch", "EndTxn", "AddPartitionsToTxn", "InitProducerId", "OffsetCommit")
REORDER_WAIT_S = 0.5
DRAIN_S = 30.0  # how long frames still on their way to a broker are delivered after the client left
_REWRITTEN = {k.METADATA, k.FIND_COORDINATOR, k.DESCRIBE_CLUSTER}
_TXN_APIS = {k.INIT_PRODUCER_ID, k.ADD_PARTITIONS_TO_TXN, k.END_TXN}


def _camel(snake: str) -> str:
    return "".join(w.capitalize() for w in snake.split("_"))


API_KEYS: dict[str, int] = {_camel(name): key for key, name in kio_index.api_key_map.items()}
API_NAMES: dict[int, str] = {v: n for n, v in API_KEYS.items()}


def api_key_of(name: str) -> int:
    """The API key of a request type named as Kafka names it (ValueError naming the known ones)."""
    if name not in API_KEYS:
        raise ValueError(f"unknown request type {name!r} (known: {', '.join(sorted(API_KEYS))})")
    return API_KEYS[name]


@dataclass(frozen=True)
class ProxyRule:
    """One client-path fault (module docstring)."""

    api: str
    action: str
    direction: str = "request"
    p: float = 1.0
    delay_ms: int = 0
    limit: int = 20
    node: str | None = None

    def __post_init__(self) -> None:
        api_key_of(self.api)
        if self.action not in ACTIONS:
            raise ValueError(f"unknown proxy action {self.action!r} (known: {', '.join(ACTIONS)})")
        if self.direction not in DIRECTIONS:
            raise ValueError(f"unknown direction {self.direction!r} (request or response)")
        if not 0 < self.p <= 1 or self.delay_ms < 0 or self.limit < 1:
            raise ValueError(f"bad proxy rule {self}: 0 < p <= 1, delay_ms >= 0, limit >= 1")

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ProxyRule:
        known = {f.name for f in dataclasses.fields(cls)}
        extra = sorted(set(d) - known)
        if extra:
            raise ValueError(f"unknown proxy rule keys {extra} (known: {', '.join(sorted(known))})")
        return cls(**d)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


class Held:
    """A request the proxy holds (`KafkaProxy.hold`): `node` it was going to, `info` what it
    said; `release()` forwards it (at most once; `KafkaProxy.clear` releases it too)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self.caught = threading.Event()
        self.node: str | None = None
        self.info: dict[str, Any] = {}
        self._go: asyncio.Event | None = None

    def release(self) -> None:
        if self._go is not None:
            self._loop.call_soon_threadsafe(self._go.set)


class _Rules:
    """The rules in force and what each did (guarded by `lock`: set from the nemesis thread,
    read on the proxy's loop)."""

    def __init__(self, seed: Any) -> None:
        self.lock = threading.Lock()
        self.rng = random.Random(f"{seed}/client-path")
        self.rules: dict[str, list[ProxyRule]] = {}  # owner -> its rules
        self.done: dict[str, list[int]] = {}  # owner -> how often each of its rules acted
        self.trap: tuple[int, Held] | None = None

    def pick(self, key: int, direction: str, node: str) -> ProxyRule | None:
        with self.lock:
            for owner, rules in self.rules.items():
                done = self.done[owner]
                for i, r in enumerate(rules):
                    if (API_KEYS[r.api] == key and r.direction == direction and (r.node is None or r.node == node)
                            and done[i] < r.limit and self.rng.random() < r.p):
                        done[i] += 1
                        return r
        return None


class _Pipe:
    """Frames to one side of a connection, in order, each not before its release time."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self.writer = writer
        self.broken = False  # the link broke (`_Conn.cut`): frames still queued are lost
        self.queue: asyncio.Queue[tuple[float, bytes | asyncio.Event]] = asyncio.Queue()

    def put(self, frame: bytes | asyncio.Event, delay_s: float = 0.0) -> None:
        self.queue.put_nowait((asyncio.get_running_loop().time() + delay_s, frame))

    async def drained(self) -> None:
        """Until every frame put has been written."""
        await self.queue.join()

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            at, frame = await self.queue.get()
            wait = at - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            if isinstance(frame, asyncio.Event):  # a held request: nothing after it passes first
                await frame.wait()
            elif not self.broken:
                self.writer.write(frame)
                await self.writer.drain()
            self.queue.task_done()


async def _read_frame(reader: asyncio.StreamReader) -> bytes:
    (n,) = struct.unpack(">i", await reader.readexactly(4))
    return await reader.readexactly(n)


def _request_head(payload: bytes) -> tuple[int, int, int, str | None, int]:
    """(api key, version, correlation id, client id, offset of the body) of a request."""
    key, ver, cid = struct.unpack_from(">hhi", payload, 0)
    n = struct.unpack_from(">h", payload, 8)[0]
    client = payload[10:10 + n].decode(errors="replace") if n >= 0 else None
    pos = 10 + max(n, 0)
    cls = k.request_class(key, ver)
    if cls is not None and cls.__flexible__:
        pos = k.skip_tagged_fields(payload, pos)
    return key, ver, cid, client, pos


def _expects_answer(key: int, ver: int, payload: bytes, pos: int) -> bool:
    """False only for an acks=0 Produce, which the broker never answers."""
    if key != k.PRODUCE:
        return True
    try:
        if ver >= 9:  # compact nullable string: uvarint length + 1
            n, pos = k.read_uvarint(payload, pos)
            pos += max(n - 1, 0)
        elif ver >= 3:
            n = struct.unpack_from(">h", payload, pos)[0]
            pos += 2 + max(n, 0)
        return struct.unpack_from(">h", payload, pos)[0] != 0
    except (struct.error, ValueError):
        return True


def _request_info(key: int, ver: int, payload: bytes, pos: int) -> dict[str, Any]:
    """What a held request said: an EndTxn's transactional id and whether it commits, an
    InitProducerId's or AddPartitionsToTxn's transactional id."""
    cls = k.request_class(key, ver)
    if cls is None or key not in _TXN_APIS:
        return {}
    try:
        body, _ = entity_reader(cls)(payload, pos)
    except Exception:  # noqa: BLE001 - a body kio cannot read: nothing to tell
        return {}
    out: dict[str, Any] = {}
    for f in ("transactional_id", "committed", "producer_id", "producer_epoch"):
        v = getattr(body, f, None)
        if v is not None and not isinstance(v, tuple):
            out[f] = v if isinstance(v, bool | str) else int(v)
    return out


class KafkaProxy:
    """The proxy (module docstring). `nodes` maps a broker's host to its node name (actions and
    held requests name the node); `journal` hears every action."""

    def __init__(self, nodes: Mapping[str, str], journal: Callable[[dict[str, Any]], Any], seed: Any = 0,
                 listen_host: str = "127.0.0.1"):
        self.nodes = dict(nodes)
        self.journal = journal
        self.listen_host = listen_host
        self.state = _Rules(seed)
        self.routes: dict[tuple[str, int], tuple[str, int]] = {}
        self._servers: list[asyncio.base_events.Server] = []
        self._conns: set[asyncio.StreamWriter] = set()
        self._held: list[Held] = []
        self.txn_ids: set[str] = set()  # the transactional ids the clients' requests named
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="kafka-proxy", daemon=True)
        self._thread.start()
        self._route_lock = threading.Lock()

    # ------------------------------------------------------------ control (any thread)
    def route(self, address: str) -> str:
        """The proxy's address for the broker at `address` ("host:port"), opening it if new."""
        host, _, port = address.rpartition(":")
        fut = asyncio.run_coroutine_threadsafe(self._listen((host, int(port))), self.loop)
        h, p = fut.result(10)
        return f"{h}:{p}"

    def set_rules(self, rules: list[ProxyRule], owner: str = "") -> None:
        """`rules` in force for `owner` (replacing its earlier ones; other owners' stay)."""
        with self.state.lock:
            self.state.rules[owner] = list(rules)
            self.state.done[owner] = [0] * len(rules)

    def clear_rules(self, owner: str = "") -> list[int]:
        """End `owner`'s rules; returns how often each acted."""
        with self.state.lock:
            self.state.rules.pop(owner, None)
            return self.state.done.pop(owner, [])

    def clear(self) -> None:
        """End every rule of every owner and release every held request."""
        with self.state.lock:
            self.state.rules, self.state.done, self.state.trap = {}, {}, None
            held, self._held = self._held, []
        for h in held:
            h.release()

    def hold(self, api: str) -> Held:
        """Hold the next request of type `api` (on any connection) until `Held.release()`."""
        held = Held(self.loop)
        with self.state.lock:
            self.state.trap = (api_key_of(api), held)
            self._held.append(held)
        return held

    def unhold(self, held: Held) -> None:
        """Disarm `held`'s trap if nothing was caught yet, else release what it holds."""
        with self.state.lock:
            if self.state.trap is not None and self.state.trap[1] is held:
                self.state.trap = None
            if held in self._held:
                self._held.remove(held)
        held.release()

    def close(self) -> None:
        """Release what is held, close every listener and connection, stop the loop."""
        self.clear()

        async def shut() -> None:
            for s in self._servers:
                s.close()
            for w in list(self._conns):
                w.close()
            # every connection's tasks end here, not when the closed loop is collected
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        if self.loop.is_running():
            asyncio.run_coroutine_threadsafe(shut(), self.loop).result(10)
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(10)
        self.loop.close()

    # ------------------------------------------------------------ the loop
    async def _listen(self, upstream: tuple[str, int]) -> tuple[str, int]:
        if upstream not in self.routes:
            server = await asyncio.start_server(lambda r, w: self._serve(upstream, r, w), self.listen_host, 0)
            self._servers.append(server)
            self.routes[upstream] = server.sockets[0].getsockname()[:2]
        return self.routes[upstream]

    async def _serve(self, upstream: tuple[str, int], creader: asyncio.StreamReader,
                     cwriter: asyncio.StreamWriter) -> None:
        try:
            ureader, uwriter = await asyncio.open_connection(*upstream)
        except OSError:
            cwriter.close()
            return
        conn = _Conn(self, self.nodes.get(upstream[0], upstream[0]), _Pipe(uwriter), _Pipe(cwriter))
        self._conns |= {cwriter, uwriter}
        tasks = [asyncio.ensure_future(t) for t in (conn.requests(creader), conn.responses(ureader),
                                                     conn.up.run(), conn.down.run())]
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for t in done:  # a side closed (IncompleteReadError) or broke: the connection ends
                t.exception()
            if (tasks[0] in done or conn.down.broken) and not tasks[2].done():
                # the client hung up (e.g. its request timed out) or a drop cut the link: what
                # it sent before is still on its way, as in a network, and reaches the broker
                # after its retry
                await asyncio.wait([asyncio.ensure_future(conn.up.drained())], timeout=DRAIN_S)
        finally:
            for t in tasks:
                t.cancel()
            for w in (cwriter, uwriter):
                self._conns.discard(w)
                w.close()

    def _act(self, conn: _Conn, rule: ProxyRule, cid: int, client: str | None, key: int) -> None:
        self.journal({"api": API_NAMES.get(key, str(key)), "direction": rule.direction, "action": rule.action,
                      "node": conn.node, "correlation_id": cid, "client_id": client,
                      **({"delay_ms": rule.delay_ms} if rule.action == "delay" else {})})

    async def rewrite(self, key: int, ver: int, payload: bytes) -> bytes:
        """A Metadata, FindCoordinator or DescribeCluster answer with its brokers' addresses
        replaced by their listeners' (opened as needed); the frame as is otherwise."""
        cls = k.response_class(key, ver)
        if cls is None:
            return _framed(payload)
        cid = struct.unpack_from(">i", payload, 0)[0]
        pos = k.skip_tagged_fields(payload, 4) if cls.__header_schema__ is response_header_v1.ResponseHeader else 4
        try:
            body, _ = entity_reader(cls)(payload, pos)
        except Exception:  # noqa: BLE001 - not ours to judge: pass it on
            return _framed(payload)
        body = await self._rewritten(body)
        return k.encode_response(key, ver, cid, body)

    async def _rewritten(self, entity: Any) -> Any:
        changes: dict[str, Any] = {}
        names = {f.name for f in dataclasses.fields(entity)}
        if {"host", "port"} <= names and entity.host and int(entity.port) > 0:
            h, p = await self._listen((entity.host, int(entity.port)))
            changes.update(host=h, port=type(entity.port)(p))
        for f in dataclasses.fields(entity):
            v = getattr(entity, f.name)
            if isinstance(v, tuple) and v and dataclasses.is_dataclass(v[0]):
                changes[f.name] = tuple([await self._rewritten(x) for x in v])
            elif dataclasses.is_dataclass(v) and not isinstance(v, type):
                changes[f.name] = await self._rewritten(v)
        return dataclasses.replace(entity, **changes) if changes else entity


def _framed(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


class _Conn:
    """One client connection through the proxy: its requests and answers (module docstring)."""

    def __init__(self, proxy: KafkaProxy, node: str, up: _Pipe, down: _Pipe) -> None:
        self.proxy, self.node, self.up, self.down = proxy, node, up, down
        self.sent: dict[int, tuple[int, int]] = {}  # correlation id -> (api key, version)
        self.order: deque[int] = deque()  # correlation ids in the client's order, answers due
        self.ready: dict[int, bytes] = {}  # answers that came before those due earlier
        self.swallow: set[int] = set()  # duplicated requests: their second answer is dropped
        self.held: tuple[bytes, asyncio.TimerHandle] | None = None  # a request sent after the next
        self.held_down: tuple[bytes, asyncio.TimerHandle] | None = None  # an answer passed on after the next

    async def requests(self, reader: asyncio.StreamReader) -> None:
        while True:
            payload = await _read_frame(reader)
            key, ver, cid, client, pos = _request_head(payload)
            frame = _framed(payload)
            if _expects_answer(key, ver, payload, pos):
                self.sent[cid] = (key, ver)
                self.order.append(cid)
            if key in _TXN_APIS:
                tid = _request_info(key, ver, payload, pos).get("transactional_id")
                if tid:
                    self.proxy.txn_ids.add(tid)
            self._trap(key, ver, payload, pos)
            rule = self.proxy.state.pick(key, "request", self.node)
            if rule is not None:
                self.proxy._act(self, rule, cid, client, key)
                if rule.action == "drop":
                    self.cut()
                    return
            self._forward(rule, cid, frame)

    def cut(self) -> None:
        """The link broke at a dropped frame: the client's side is reset at once and hears
        nothing more; what it sent before still reaches the broker (`KafkaProxy._serve`)."""
        self.down.broken = True
        self.down.writer.transport.abort()

    def _trap(self, key: int, ver: int, payload: bytes, pos: int) -> None:
        st = self.proxy.state
        with st.lock:
            trap = st.trap
            if trap is None or trap[0] != key:
                return
            st.trap = None
        held = trap[1]
        held._go = asyncio.Event()
        held.node, held.info = self.node, _request_info(key, ver, payload, pos)
        self.up.put(held._go)  # what follows on this connection waits behind it
        held.caught.set()

    def _forward(self, rule: ProxyRule | None, cid: int, frame: bytes) -> None:
        if self.held is not None:  # a reordered request goes after this one
            held, timer = self.held
            self.held = None
            timer.cancel()
            self._send_up(rule, cid, frame)
            self.up.put(held)
            return
        self._send_up(rule, cid, frame)

    def _send_up(self, rule: ProxyRule | None, cid: int, frame: bytes) -> None:
        action = rule.action if rule is not None else None
        if action == "duplicate":
            self.up.put(frame)
            self.up.put(frame)
            self.swallow.add(cid)
        elif action == "reorder":
            loop = asyncio.get_running_loop()
            self.held = (frame, loop.call_later(REORDER_WAIT_S, self._release_held))
        else:
            self.up.put(frame, (rule.delay_ms / 1000) if action == "delay" and rule is not None else 0.0)

    def _release_held(self) -> None:
        if self.held is not None:
            frame, _ = self.held
            self.held = None
            self.up.put(frame)

    async def responses(self, reader: asyncio.StreamReader) -> None:
        while True:
            payload = await _read_frame(reader)
            cid = struct.unpack_from(">i", payload, 0)[0]
            if cid not in self.sent:
                if cid in self.swallow:  # the second answer of a duplicated request
                    self.swallow.discard(cid)
                    continue
                self.down.put(_framed(payload))  # not one we wait for: pass it on
                continue
            key, ver = self.sent.pop(cid)
            frame = await self.proxy.rewrite(key, ver, payload) if key in _REWRITTEN else _framed(payload)
            rule = self.proxy.state.pick(key, "response", self.node)
            if rule is not None:
                self.proxy._act(self, rule, cid, None, key)
                if rule.action == "drop":
                    self.cut()
                    return
            self.ready[cid] = frame
            self._deliver(rule, cid)

    def _deliver(self, rule: ProxyRule | None, cid: int) -> None:
        """Pass on the answers now due in the client's order; `rule` acts on answer `cid`."""
        while self.order and self.order[0] in self.ready:
            c = self.order.popleft()
            frame = self.ready.pop(c)
            act = rule.action if rule is not None and c == cid else None
            if act == "reorder" and self.held_down is None:
                timer = asyncio.get_running_loop().call_later(REORDER_WAIT_S, self._put_down, b"")
                self.held_down = (frame, timer)
            elif act == "duplicate":
                self._put_down(frame)
                self.down.put(frame)
            else:
                self._put_down(frame, rule.delay_ms / 1000 if act == "delay" and rule is not None else 0.0)

    def _put_down(self, frame: bytes, delay_s: float = 0.0) -> None:
        """`frame` to the client (b"": nothing), then an answer held back to follow it."""
        if frame:
            self.down.put(frame, delay_s)
        if self.held_down is not None:
            held, timer = self.held_down
            self.held_down = None
            timer.cancel()
            self.down.put(held)
