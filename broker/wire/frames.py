"""Length-prefixed framing (Kafka's: a big-endian int32 size, then that many bytes).

`FrameReader.feed(data)` takes whatever the socket delivered and returns the complete
frames (payloads without their size, as memoryviews into one buffer); it raises
`FrameError` as soon as a size is negative or above the limit (the connection must then
be closed: the stream cannot be resynchronised).

Chunks are kept as they arrive until the next frame is complete, then joined once; the
frames are views of that buffer. A 1 MB produce request arriving in 64 KB reads costs
one join, not a growing buffer, and many small frames in one read cost no copies.
"""

from __future__ import annotations

_SIZE = 4


class FrameError(ValueError):
    """Broken framing: a negative or oversize length prefix."""


class FrameReader:
    """Incremental decoder of size-prefixed frames, with a maximum frame size."""

    __slots__ = ("_chunks", "_have", "_need", "max_size")

    def __init__(self, max_size: int) -> None:
        self._chunks: list[bytes] = []
        self._have = 0
        self._need = _SIZE  # bytes buffered before the next frame can be complete
        self.max_size = max_size

    @property
    def buffered(self) -> int:
        return self._have

    def _check(self, size: int) -> None:
        if size < 0:
            raise FrameError(f"negative frame size {size}")
        if size > self.max_size:
            raise FrameError(f"frame of {size} bytes is larger than the maximum of {self.max_size}")

    def feed(self, data: bytes) -> list[memoryview]:
        if not data:
            return []
        self._chunks.append(data)
        self._have += len(data)
        if self._have < self._need:
            return []
        buf = self._chunks[0] if len(self._chunks) == 1 else b"".join(self._chunks)
        view = memoryview(buf)
        n = len(buf)
        pos = 0
        out: list[memoryview] = []
        while n - pos >= _SIZE:
            size = int.from_bytes(view[pos : pos + _SIZE], "big", signed=True)
            self._check(size)
            end = pos + _SIZE + size
            if end > n:
                break
            out.append(view[pos + _SIZE : end])
            pos = end
        rest = n - pos
        if rest == 0:
            self._chunks, self._have, self._need = [], 0, _SIZE
        else:
            self._chunks = [buf[pos:] if pos else buf]
            self._have = rest
            if rest >= _SIZE:
                size = int.from_bytes(view[pos : pos + _SIZE], "big", signed=True)
                self._need = _SIZE + size
            else:
                self._need = _SIZE
        return out


def frame(payload: bytes) -> bytes:
    """`payload` with its size prefix."""
    return len(payload).to_bytes(_SIZE, "big") + payload
