"""Length-prefixed framing (Kafka's: a big-endian int32 size, then that many bytes).

`FrameReader.feed(data)` takes whatever the socket delivered and returns the complete
frames (payloads without their size); it raises `FrameError` as soon as a size is
negative or above the limit (the connection must then be closed: the stream cannot be
resynchronised). Bytes are accumulated in one buffer and cut once per call, so a large
frame arriving in many chunks costs one copy, and many small frames in one chunk cost no
quadratic shifting.
"""

from __future__ import annotations

_SIZE = 4


class FrameError(ValueError):
    """Broken framing: a negative or oversize length prefix."""


class FrameReader:
    """Incremental decoder of size-prefixed frames, with a maximum frame size."""

    __slots__ = ("_buf", "max_size")

    def __init__(self, max_size: int) -> None:
        self._buf = bytearray()
        self.max_size = max_size

    @property
    def buffered(self) -> int:
        return len(self._buf)

    def feed(self, data: bytes) -> list[bytes]:
        buf = self._buf
        buf += data
        n = len(buf)
        pos = 0
        out: list[bytes] = []
        while n - pos >= _SIZE:
            size = int.from_bytes(buf[pos : pos + _SIZE], "big", signed=True)
            if size < 0:
                raise FrameError(f"negative frame size {size}")
            if size > self.max_size:
                raise FrameError(f"frame of {size} bytes is larger than the maximum of {self.max_size}")
            end = pos + _SIZE + size
            if end > n:
                break
            out.append(bytes(buf[pos + _SIZE : end]))
            pos = end
        if pos:
            del buf[:pos]
        return out


def frame(payload: bytes) -> bytes:
    """`payload` with its size prefix."""
    return len(payload).to_bytes(_SIZE, "big") + payload
