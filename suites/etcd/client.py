"""One etcd client for the register workload: read, write and compare-and-set of small ints,
over etcd's v3 API through its grpc-gateway (`/v3/` on the client port, etcd 3.4) with etcd3gw.

`EtcdIO(endpoint, timeout=, reads=)` talks to the one member at `endpoint`
("http://10.1.2.3:2379"; Jepsen binds each client to one node) with one HTTP session:

- `read(key) -> int | str | None`: the key's value, None when it does not exist. `reads`
  "linearizable" is a plain range (etcd confirms its leadership through the Raft log
  first); "serializable" sends the range with `"serializable": true`: the member answers from
  its local state, which may be stale (allowed by etcd's docs, so a checker flags it);
- `write(key, value)`: a put;
- `cas(key, old, new) -> bool`: one txn "if value == old then put new" (old None: "if the
  key does not exist"); False when the compare failed (nothing written);
- `close()`.

Values are stored as their decimal text; a value that is not one reads as its text (the
checker then finds a value nobody wrote). Every request is sent at most once (requests'
adapter does not retry).

Errors raise `EtcdError` (a `workloads.errors.ClientError`) with `definite`: True only when
the request provably never reached etcd, i.e. no connection could be established (refused,
unreachable, name not resolved, connect timed out: urllib3's NewConnectionError /
ConnectTimeoutError). Everything after a connection was made may have taken effect:
timeouts waiting for the answer, connection resets and disconnects, every HTTP error (the
gateway maps etcd's gRPC errors to HTTP: 503 for "etcdserver: request timed out", "leader
changed", "no leader", 504 for deadlines, 500 ...), answers that are not JSON. A mutating
op (write, cas) that gets an indefinite error completes `info`, a definite one `fail`;
a read changes nothing, so any error of a read is a definite `fail` (`EtcdError.outcome`).
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import urlsplit

import requests
import urllib3.exceptions
from etcd3gw import exceptions as gw_errors
from etcd3gw.client import Etcd3Client
from etcd3gw.utils import _decode, _encode

from workloads.errors import ClientError, Outcome

READ_MODES = ("linearizable", "serializable")
_DECIMAL = re.compile(r"-?[0-9]+")


class EtcdError(ClientError):
    """An etcd request failed: `name` is the kind ("connect-failed", "timeout",
    "connection-lost", "http-503", ...), `detail` etcd's message; `definite`: the request
    never reached etcd (see the module docstring)."""

    def __init__(self, name: str, detail: str = "", *, definite: bool):
        super().__init__(None, name, detail)
        self.definite = definite

    def outcome(self, mutating: bool) -> Outcome:
        """How the op completes: `fail` for a read or a definite error, else `info`."""
        return Outcome("fail" if self.definite or not mutating else "info", self.name)

    def send_outcome(self) -> Outcome:
        return self.outcome(mutating=True)


class EtcdIO:
    """See the module docstring."""

    def __init__(self, endpoint: str, *, timeout: float, reads: str = "linearizable"):
        if reads not in READ_MODES:
            raise ValueError(f"bad etcd read mode {reads!r} (expected {' or '.join(READ_MODES)})")
        u = urlsplit(endpoint if "://" in endpoint else "http://" + endpoint)
        if not u.hostname or u.scheme not in ("http", "https"):
            raise ValueError(f"bad etcd endpoint {endpoint!r} (expected http://host:port)")
        self.endpoint = endpoint
        self.reads = reads
        self.client = Etcd3Client(host=u.hostname, port=u.port or 2379, protocol=u.scheme, timeout=timeout,
                                  api_path="/v3/")  # etcd >= 3.4: no /version round trip first

    def read(self, key: str) -> int | str | None:
        payload: dict[str, Any] = {"key": _encode(key)}
        if self.reads == "serializable":
            payload["serializable"] = True
        result = self._call(lambda: self.client.post(self.client.get_url("/kv/range"), json=payload))
        kvs = result.get("kvs") or []
        return _value(_decode(kvs[0].get("value", ""))) if kvs else None

    def write(self, key: str, value: int) -> None:
        self._call(lambda: self.client.put(key, str(value)))

    def cas(self, key: str, old: int | None, new: int) -> bool:
        if old is None:
            return bool(self._call(lambda: self.client.create(key, str(new))))
        return bool(self._call(lambda: self.client.replace(key, str(old), str(new))))

    def close(self) -> None:
        self.client.session.close()

    @staticmethod
    def _call(fn: Any) -> Any:
        try:
            return fn()
        except (gw_errors.Etcd3Exception, requests.RequestException, ValueError) as e:
            raise classify(e) from e


def _value(raw: bytes) -> int | str:
    text = raw.decode("utf-8", "replace")
    return int(text) if _DECIMAL.fullmatch(text) else text


def classify(e: BaseException) -> EtcdError:
    """The `EtcdError` for an exception of etcd3gw, requests or the JSON decoder (etcd3gw
    raises its own errors inside `except` blocks: the requests error is the context)."""
    cause = e.__context__ if isinstance(e, gw_errors.Etcd3Exception) and e.__context__ is not None else e
    if isinstance(cause, requests.ConnectTimeout) or _no_connection(cause):
        return EtcdError("connect-failed", _short(cause), definite=True)
    if isinstance(cause, requests.Timeout):
        return EtcdError("timeout", _short(cause), definite=False)
    if isinstance(cause, ValueError):  # requests' JSONDecodeError is one too
        return EtcdError("bad-response", _short(cause), definite=False)
    if isinstance(cause, requests.RequestException):
        return EtcdError("connection-lost", _short(cause), definite=False)
    return EtcdError(_http_kind(e), _etcd_message(e), definite=False)


def _no_connection(e: BaseException) -> bool:
    """A requests ConnectionError raised while connecting (urllib3's NewConnectionError,
    possibly inside MaxRetryError): no byte of the request was sent."""
    if not isinstance(e, requests.ConnectionError):
        return False
    reason = e.args[0] if e.args else None
    if isinstance(reason, urllib3.exceptions.MaxRetryError):
        reason = reason.reason
    return isinstance(reason, urllib3.exceptions.NewConnectionError | urllib3.exceptions.ConnectTimeoutError)


def _http_kind(e: BaseException) -> str:
    reason = e.args[0] if e.args else ""
    return {gw_errors.ConnectionFailedError: "unavailable", gw_errors.ConnectionTimeoutError: "gateway-timeout",
            gw_errors.InternalServerError: "internal"}.get(type(e), "http-error") + (f" ({reason})" if reason else "")


def _etcd_message(e: BaseException) -> str:
    """etcd's error text from the gateway's JSON body ({"error": ..., "code": ...})."""
    text = getattr(e, "detail_text", None) or str(e)
    try:
        body = json.loads(text)
        return f"{body.get('error') or body.get('message')} (grpc code {body.get('code')})"
    except (ValueError, AttributeError):
        return text.strip()[:200]


def _short(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}"[:300]
