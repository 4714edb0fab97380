"""Crash-consistency self-test of the LazyFS file system (hypothesis, like jepsen-io/local-fs):
random sequences of create/write/truncate/fsync/fdatasync/rename/link/unlink/mkdir/rmdir/
fsync(dir)/power loss run on a real FUSE mount inside a local node and, after every step,
the whole tree is compared with a model of what the mount must show; after a power loss,
with what must have survived. One model per metadata mode (posix, ordered, immediate)."""

from __future__ import annotations

import itertools
import os
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lazyfs_testkit import mounted_lazyfs, tree

from clusters.testing import can_run_local, local_clusters

pytestmark = pytest.mark.root

EXAMPLES = int(os.environ.get("WRACK_LAZYFS_EXAMPLES", "40"))
FILES = ["a", "b", "d/x", "d/y"]


def parent(p: str) -> str:
    return os.path.dirname(p)


class Model:
    """What the mount must show (`vol`) and what survives a power loss (`dur`), per the
    semantics in docs/nemesis.md. Inodes are model ids; dirs have ids too (a re-created
    directory is a new one)."""

    def __init__(self, mode: str):
        self.mode = mode
        self.ids = itertools.count(1)
        self.data: dict[int, bytearray] = {}
        self.durable: dict[int, bytes] = {}
        self.last: dict[int, tuple[int, int]] = {}
        self.vol: dict[str, tuple[str, int]] = {"": ("dir", 0)}
        self.dur = dict(self.vol)
        self.pending: list[tuple[Any, frozenset[int]]] = []

    # namespace
    def _ns(self, change: Any, parents: set[int]) -> None:
        change(self.vol)
        if self.mode == "immediate":
            change(self.dur)
        else:
            self.pending.append((change, frozenset(parents)))

    def _commit(self, upto: int) -> None:
        for change, _ in self.pending[: upto + 1]:
            change(self.dur)
        del self.pending[: upto + 1]

    def dir_id(self, p: str) -> int | None:
        e = self.vol.get(p)
        return e[1] if e and e[0] == "dir" else None

    def is_file(self, p: str) -> bool:
        return self.vol.get(p, ("", 0))[0] == "file"

    # ops: each returns False when the op is not valid now (then it is not run)
    def create(self, p: str) -> bool:
        pd = self.dir_id(parent(p))
        if pd is None or p in self.vol:
            return False
        ino = next(self.ids)
        self.data[ino], self.durable[ino] = bytearray(), b""

        def ch(ns: dict[str, Any]) -> None:
            ns[p] = ("file", ino)

        self._ns(ch, {pd})
        return True

    def write(self, p: str, off: int, data: bytes) -> bool:
        if not self.is_file(p):
            return False
        b = self.data[self.vol[p][1]]
        if len(b) < off:
            b.extend(bytes(off - len(b)))
        b[off:off + len(data)] = data
        ino = self.vol[p][1]
        lw = self.last.get(ino)
        self.last[ino] = (lw[0], lw[1] + len(data)) if lw and lw[0] + lw[1] == off else (off, len(data))
        return True

    def truncate(self, p: str, n: int) -> bool:
        if not self.is_file(p):
            return False
        ino = self.vol[p][1]
        b = self.data[ino]
        if n < len(b):
            del b[n:]
            if ino in self.last:
                o, ln = self.last[ino]
                if o < n:
                    self.last[ino] = (o, min(ln, n - o))
                else:
                    del self.last[ino]
        else:
            b.extend(bytes(n - len(b)))
        return True

    def fsync(self, p: str) -> bool:
        if not self.is_file(p):
            return False
        ino = self.vol[p][1]
        self.durable[ino] = bytes(self.data[ino])
        self.last.pop(ino, None)
        if self.mode == "ordered":
            self._commit(len(self.pending) - 1)
        return True

    def rename(self, a: str, b: str) -> bool:
        if not self.is_file(a) or self.dir_id(parent(b)) is None or (b in self.vol and not self.is_file(b)):
            return False
        if a == b or self.vol.get(b) == self.vol[a]:
            return True  # POSIX: nothing happens
        pa, pb = self.dir_id(parent(a)), self.dir_id(parent(b))

        def ch(ns: dict[str, Any]) -> None:
            ns[b] = ns.pop(a)

        self._ns(ch, {pa, pb})  # type: ignore[arg-type]
        return True

    def link(self, a: str, b: str) -> bool:
        if not self.is_file(a) or b in self.vol or self.dir_id(parent(b)) is None:
            return False
        pb = self.dir_id(parent(b))

        def ch(ns: dict[str, Any]) -> None:
            ns[b] = ns[a]

        self._ns(ch, {pb})  # type: ignore[arg-type]
        return True

    def unlink(self, p: str) -> bool:
        if not self.is_file(p):
            return False
        pd = self.dir_id(parent(p))

        def ch(ns: dict[str, Any]) -> None:
            del ns[p]

        self._ns(ch, {pd})  # type: ignore[arg-type]
        return True

    def mkdir(self, p: str) -> bool:
        if p in self.vol:
            return False
        did = next(self.ids)

        def ch(ns: dict[str, Any]) -> None:
            ns[p] = ("dir", did)

        self._ns(ch, {0})
        return True

    def rmdir(self, p: str) -> bool:
        if self.dir_id(p) is None or any(k.startswith(p + "/") for k in self.vol):
            return False

        def ch(ns: dict[str, Any]) -> None:
            del ns[p]

        self._ns(ch, {0})
        return True

    def fsyncdir(self, p: str) -> bool:
        did = self.dir_id(p)
        if did is None:
            return False
        if self.mode == "ordered":
            self._commit(len(self.pending) - 1)
        elif self.mode == "posix":
            idx = [i for i, (_, ps) in enumerate(self.pending) if did in ps]
            if idx:
                self._commit(idx[-1])
        return True

    def crash(self, torn: int) -> bool:
        for ino in list(self.data):
            dur = self.durable[ino]
            if torn and ino in self.last:
                o, n = self.last[ino]
                piece = bytes(self.data[ino][o:o + min(torn, n)])
                if piece:
                    new = bytearray(dur)
                    if len(new) < o:
                        new.extend(bytes(o - len(new)))
                    new[o:o + len(piece)] = piece
                    dur = self.durable[ino] = bytes(new)
            self.data[ino] = bytearray(dur)
        self.last.clear()
        self.vol = dict(self.dur)
        self.pending.clear()
        return True

    def expected(self) -> dict[str, Any]:
        return {p: "dir" if k == "dir" else bytes(self.data[i]) for p, (k, i) in self.vol.items() if p}

    def links(self) -> set[frozenset[str]]:
        groups: dict[int, set[str]] = {}
        for p, (k, i) in self.vol.items():
            if k == "file":
                groups.setdefault(i, set()).add(p)
        return {frozenset(g) for g in groups.values()}


def run_real(root: str, mounted: Any, op: tuple[Any, ...]) -> None:
    kind, *args = op
    p = lambda x: os.path.join(root, x)  # noqa: E731
    if kind == "create":
        os.close(os.open(p(args[0]), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
    elif kind == "write":
        fd = os.open(p(args[0]), os.O_WRONLY)
        try:
            os.pwrite(fd, args[2], args[1])
        finally:
            os.close(fd)
    elif kind == "truncate":
        os.truncate(p(args[0]), args[1])
    elif kind in ("fsync", "fdatasync"):
        fd = os.open(p(args[0]), os.O_RDONLY)
        try:
            (os.fsync if kind == "fsync" else os.fdatasync)(fd)
        finally:
            os.close(fd)
    elif kind == "rename":
        os.rename(p(args[0]), p(args[1]))
    elif kind == "link":
        os.link(p(args[0]), p(args[1]))
    elif kind == "unlink":
        os.unlink(p(args[0]))
    elif kind == "mkdir":
        os.mkdir(p(args[0]))
    elif kind == "rmdir":
        os.rmdir(p(args[0]))
    elif kind == "fsyncdir":
        fd = os.open(p(args[0]) if args[0] else root, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    elif kind == "crash":
        mounted.ctl("lose-unsynced", torn=args[0])
    else:  # pragma: no cover
        raise ValueError(kind)


def resolve_append(m: Model, op: tuple[Any, ...]) -> tuple[Any, ...]:
    """An append is a write at the file's current size (known from the model)."""
    if op[0] == "append" and m.is_file(op[1]):
        return ("write", op[1], len(m.data[m.vol[op[1]][1]]), op[2])
    return op


def apply_model(m: Model, op: tuple[Any, ...]) -> bool:
    kind, *args = op
    if kind == "append":
        return False
    if kind == "fdatasync":
        return m.fsync(args[0])
    return getattr(m, kind)(*args)


PRELUDE = [("create", "a"), ("create", "b"), ("write", "a", 0, bytes(range(100, 200))),
           ("write", "b", 0, b"b" * 50), ("fsync", "a"), ("fsync", "b"), ("fsyncdir", "")]

names = st.sampled_from(FILES)
ops = st.one_of(
    st.tuples(st.just("append"), names, st.binary(min_size=1, max_size=40)),
    st.tuples(st.just("create"), names),
    st.tuples(st.just("write"), names, st.integers(0, 300), st.binary(min_size=1, max_size=80)),
    st.tuples(st.just("write"), names, st.integers(0, 5000),
              st.sampled_from([b"\x5a" * 4096, bytes(range(256)) * 700])),  # 4 KiB / 175 KiB writes
    st.tuples(st.just("truncate"), names, st.integers(0, 400)),
    st.tuples(st.sampled_from(["fsync", "fdatasync"]), names),
    st.tuples(st.just("rename"), names, names),
    st.tuples(st.just("link"), names, names),
    st.tuples(st.just("unlink"), names),
    st.tuples(st.just("mkdir"), st.just("d")),
    st.tuples(st.just("rmdir"), st.just("d")),
    st.tuples(st.just("fsyncdir"), st.sampled_from(["", "d"])),
    st.tuples(st.just("crash"), st.sampled_from([0, 0, 7, 100])),
)


@pytest.fixture(scope="module")
def lazyfs_node():
    if not can_run_local():
        pytest.skip("needs root and network/mount namespaces")
    with local_clusters("lfsm") as make:
        c = make(1)
        with mounted_lazyfs(c) as m:
            yield m


@pytest.mark.parametrize("mode", ["posix", "ordered", "immediate"])
def test_lazyfs_random_ops_match_the_crash_model(lazyfs_node, mode):
    m = lazyfs_node
    assert m.ctl("configure", mode="lazy", metadata=mode)["metadata"] == mode
    counter = itertools.count()

    @settings(max_examples=EXAMPLES, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
    @given(st.lists(ops, min_size=1, max_size=30))
    def run(seq: list[tuple[Any, ...]]) -> None:
        m.ctl("sync")
        root = os.path.join(m.mnt, f"{mode}{next(counter)}")
        os.mkdir(root)
        m.ctl("sync")
        model = Model(mode)
        seq = PRELUDE + seq
        for i, op in enumerate(seq):
            op = resolve_append(model, op)
            if not apply_model(model, op):
                continue
            run_real(root, m, op)
            got = tree(root)
            want = model.expected()
            assert got == want, f"after step {i} {op[:2]} of {[o[:2] for o in seq[:i + 1]]}"
            inos: dict[int, set[str]] = {}
            for path, v in got.items():
                if v != "dir":
                    inos.setdefault(os.lstat(os.path.join(root, path)).st_ino, set()).add(path)
            assert {frozenset(g) for g in inos.values()} == model.links(), f"hard links after step {i}"

    run()
    st_ = m.ctl("status")
    assert st_["fsyncs"] > 0 and st_["losses"] > 0  # fsync reached the daemon (never ENOSYS)
