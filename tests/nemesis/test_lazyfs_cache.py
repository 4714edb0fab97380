"""LazyFS's page cache on its own (no FUSE): dirty extents against a naive byte model
(hypothesis), and FileCache flush/lose/torn against the backing file."""

from __future__ import annotations

import os

from hypothesis import given, settings
from hypothesis import strategies as st

from nemesis.lazyfs.cache import Extents, FileCache

ext_ops = st.lists(st.one_of(
    st.tuples(st.just("w"), st.integers(0, 200), st.binary(min_size=1, max_size=60)),
    st.tuples(st.just("t"), st.integers(0, 250)),
), max_size=40)


@settings(max_examples=200, deadline=None, database=None)
@given(ext_ops)
def test_lazyfs_extents_match_a_byte_model(seq):
    e = Extents()
    dirty: dict[int, int] = {}  # offset -> byte
    for op in seq:
        if op[0] == "w":
            _, off, data = op
            e.write(off, data)
            for i, b in enumerate(data):
                dirty[off + i] = b
        else:
            e.truncate(op[1])
            dirty = {k: v for k, v in dirty.items() if k < op[1]}
        assert e.nbytes == len(dirty)
        rs = e.ranges()
        assert all(a < b for a, b in rs) and all(rs[i][1] < rs[i + 1][0] for i in range(len(rs) - 1))
        out = bytearray(b"?" * 300)
        e.overlay(0, out)
        assert all(out[k] == v for k, v in dirty.items())
        assert all(out[k] == ord("?") for k in range(300) if k not in dirty)


def test_lazyfs_filecache_flush_lose_and_torn(tmp_path):
    p = tmp_path / "f"
    p.write_bytes(b"0123456789")
    fd = os.open(p, os.O_RDWR)
    try:
        c = FileCache(os.fstat(fd).st_ino, fd, 10)
        c.write(10, b"abcdef", 1)
        assert c.read(0, 100) == b"0123456789abcdef" and p.read_bytes() == b"0123456789"
        c.flush(sync=True)
        assert p.read_bytes() == b"0123456789abcdef" and not c.dirty
        c.truncate(4, 2)
        c.truncate(8, 3)  # extend again: the old bytes 4..8 must read as zeros
        assert c.read(0, 100) == b"0123\0\0\0\0"
        c.write(8, b"XYZ", 4)
        c.write(11, b"UVW", 5)  # continues the run: last write is (8, 6)
        assert c.last_write == (8, 6)
        rep = c.lose(keep=4)
        assert rep["torn_offset"] == 8 and rep["torn_kept"] == 4
        # the truncate was not synced either: the durable 16 bytes stay, bytes 8..12 torn in
        assert p.read_bytes() == b"01234567XYZUcdef" == c.read(0, 100)
        c.write(0, b"q", 6)
        c.lose()
        assert p.read_bytes() == b"01234567XYZUcdef" and not c.dirty
    finally:
        os.close(fd)
