"""The stand-in's server: `python server.py HOST PORT` keeps a dict of keys to ints in memory.

GET /KEY -> the value (404: none); PUT /KEY/VALUE sets it; POST /KEY/OLD/NEW compares and sets
(OLD "nil": the key must not exist) and answers "true" or "false"."""

from __future__ import annotations

import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

DATA: dict[str, int] = {}
LOCK = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    def _answer(self, code: int, body: str = "") -> None:
        data = body.encode()
        self.send_response(code)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        with LOCK:
            v = DATA.get(self.path.strip("/"))
        self._answer(404) if v is None else self._answer(200, str(v))

    def do_PUT(self) -> None:
        key, value = self.path.strip("/").split("/")
        with LOCK:
            DATA[key] = int(value)
        self._answer(200)

    def do_POST(self) -> None:
        key, old, new = self.path.strip("/").split("/")
        with LOCK:
            ok = DATA.get(key) == (None if old == "nil" else int(old))
            if ok:
                DATA[key] = int(new)
        self._answer(200, "true" if ok else "false")

    def log_message(self, *args: object) -> None:
        return


if __name__ == "__main__":
    ThreadingHTTPServer((sys.argv[1], int(sys.argv[2])), Handler).serve_forever()
