"""Power loss on real nodes (namespaces and containers): a LazyFS mount at the broker's data
dir in the node's own mount namespace; after the `power-loss` fault a file holds exactly its fsynced prefix (plus the
torn bytes when asked); directory semantics as documented; the kernel's cached pages of an
open file are dropped; fsync never turns into ENOSYS; unmount leaves nothing behind."""

from __future__ import annotations

import os
import random
import sys
from pathlib import Path

import pytest
from lazyfs_testkit import mounted_lazyfs
from lazyfs_writer import pattern

from contracts.history import HistoryWriter, read_events
from nemesis.core import FaultOp, Nemesis
from nemesis.lazyfs.hook import find_hook, install_power_loss
from suites.wrack.db import BrokerDB, BrokerOptions

pytestmark = pytest.mark.root

WRITER = str(Path(__file__).resolve().parent / "lazyfs_writer.py")
SEG = "seg-0/00000000000000000000.log"


def node_fuse_mounts(node, below="/var/lib/wrack"):
    """The FUSE mounts below `below` as the node itself sees them (any backend)."""
    lines = node.exec(["cat", "/proc/self/mounts"]).stdout.splitlines()
    return [ln.split()[1] for ln in lines if ln.split()[2].startswith("fuse") and ln.split()[1].startswith(below)]


def writer_command(cluster):
    """The writer stand-in: the host's file on local nodes, a copy on every container."""
    if cluster.backend == "local":
        return [sys.executable, WRITER]
    for n in cluster.nodes:
        n.upload(WRITER, n.path("lazyfs_writer.py"))
    return ["python3", cluster.nodes[0].path("lazyfs_writer.py")]


def wait_written(node, db, timeout=20.0):
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        r = node.exec(["cat", node.path("broker", "written")], check=False)
        if r.ok:
            return dict(kv.split("=") for kv in r.stdout.split())
        assert db.running(node), node.exec(["tail", db.logfile(node)], check=False).stdout
        time.sleep(0.05)
    raise AssertionError("the writer did not write")


@pytest.fixture
def writer_cluster(make_backend_cluster, tmp_path):
    c = make_backend_cluster(2)
    db = BrokerDB(c, BrokerOptions(command=writer_command(c)))
    hist = HistoryWriter(tmp_path / "history.jsonl")
    nem = Nemesis(c, db, history=hist, rng=random.Random(5))
    install_power_loss(nem)
    try:
        yield c, db, nem, hist
    finally:
        for n in c.nodes:
            db.teardown(n)
        assert all(node_fuse_mounts(n) == [] for n in c.nodes)


@pytest.mark.parametrize("torn", [False, 1234, True])
def test_lazyfs_power_loss_keeps_exactly_the_fsynced_prefix(writer_cluster, torn):
    c, db, nem, hist = writer_cluster
    for n in c.nodes:
        db.setup(n)
        db.start(n)
    for n in c.nodes:
        db.wait_ready(n, 20)
    n1, n2 = c.node("n1"), c.node("n2")
    w = wait_written(n1, db)
    synced, unsynced = int(w["synced"]), int(w["unsynced"])
    seg = f"{db.data_dir(n1)}/{SEG}"
    full = pattern(synced, 1) + pattern(unsynced, 2)
    assert n1.read_file(seg) == full  # the mount shows the cached view
    pid = n1.daemon_pid(db.pidfile(n1))
    ev = nem.invoke(FaultOp("power-loss", {"nodes": ["n1"], "torn": torn}))
    assert db.running(n1) and n1.daemon_pid(db.pidfile(n1)) != pid  # killed and restarted
    (f,) = ev["value"]["lost"]["n1"]["files"]
    kept = f.get("torn_kept", 0)
    if torn is False:
        assert kept == 0
    elif torn is True:
        assert 1 <= kept < unsynced
    else:
        assert kept == torn
    assert ev["value"]["lost"]["n1"]["lost_bytes"] == unsynced
    assert f["path"] == "/" + SEG and f["durable_size"] == synced
    assert n1.read_file(seg) == full[: synced + kept]
    # the same bytes are in the backing file, i.e. durable
    hook = find_hook(db)
    assert n1.read_file(f"{hook.backing(n1)}/data/{SEG}") == full[: synced + kept]
    # n2 was not touched: its unsynced data is still there
    assert n2.read_file(f"{db.data_dir(n2)}/{SEG}") == full
    # the final heal syncs everything and switches to pass-through: nothing is lost any more
    assert nem.heal_all() == []
    assert hook.ctl(n2, "status")["mode"] == "passthrough"
    assert hook.lose(n2)["lost_bytes"] == 0
    assert n2.read_file(f"{db.data_dir(n2)}/{SEG}") == full
    assert nem.heal_all() == []  # healed already (the runner's heal, then teardown's): no second event
    hist.close()
    fs = [e["f"] for e in read_events(hist.path)]
    assert fs == ["power-loss", "lazyfs-sync"]


def test_lazyfs_kill_with_the_hook_is_a_power_loss_and_unmount_is_clean(writer_cluster):
    c, db, nem, _ = writer_cluster
    n1 = c.node("n1")
    db.setup(n1)
    db.start(n1)
    w = wait_written(n1, db)
    nem.invoke(FaultOp("kill", ["n1"]))
    assert n1.read_file(f"{db.data_dir(n1)}/{SEG}") == pattern(int(w["synced"]), 1)
    nem.invoke(FaultOp("start", ["n1"]))
    db.wait_ready(n1)
    hook = find_hook(db)
    dpid = n1.daemon_pid(hook.pidfile(n1))
    assert node_fuse_mounts(n1) == [db.data_dir(n1)]
    assert node_fuse_mounts(c.node("n2")) == []  # another node's mount namespace does not see it
    assert db.data_dir(n1) not in Path("/proc/self/mounts").read_text()
    db.teardown(n1)
    assert node_fuse_mounts(n1) == []
    # the daemon is gone (or a zombie) in the node's own process namespace
    assert n1.sh(f"test ! -e /proc/{dpid} || cut -d' ' -f3 /proc/{dpid}/stat | grep -qx Z", check=False).ok
    # a clean stop loses nothing: the backing data holds what the mount showed
    assert n1.read_file(f"{hook.backing(n1)}/data/{SEG}") == pattern(int(w["synced"]), 1)


@pytest.fixture
def lazyfs_one(make_cluster):
    c = make_cluster(1)
    with mounted_lazyfs(c) as m:
        yield m


def _fsync_path(p, directory=False):
    fd = os.open(p, os.O_RDONLY | (os.O_DIRECTORY if directory else 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def test_lazyfs_directory_operations_are_durable_only_after_fsync_of_the_directory(lazyfs_one):
    m = lazyfs_one
    d = m.mnt
    Path(d, "kept").write_bytes(b"v1")
    _fsync_path(f"{d}/kept")
    _fsync_path(d, directory=True)
    before = m.ctl("status")["fsyncdirs"]
    # a new file with fsynced data but no fsync of its directory: gone after a power loss;
    # a rename and an unsynced truncate: undone; a new directory: gone
    Path(d, "new").write_bytes(b"data")
    _fsync_path(f"{d}/new")
    os.rename(f"{d}/kept", f"{d}/renamed")
    os.mkdir(f"{d}/sub")
    rep = m.ctl("lose-unsynced")
    assert sorted(os.listdir(d)) == ["kept"] and Path(d, "kept").read_bytes() == b"v1"
    assert [u["op"] for u in rep["undone"]] == ["mkdir", "rename", "create"]
    # fsync of the directory commits the journal up to its last change (and all before it)
    Path(d, "t").write_bytes(b"0123456789")
    _fsync_path(f"{d}/t")
    os.rename(f"{d}/kept", f"{d}/renamed")
    _fsync_path(d, directory=True)
    os.truncate(f"{d}/t", 3)
    os.unlink(f"{d}/renamed")
    m.ctl("lose-unsynced")
    assert sorted(os.listdir(d)) == ["renamed", "t"]
    assert Path(d, "t").read_bytes() == b"0123456789" and Path(d, "renamed").read_bytes() == b"v1"
    os.unlink(f"{d}/renamed")
    _fsync_path(d, directory=True)
    m.ctl("lose-unsynced")
    assert sorted(os.listdir(d)) == ["t"]
    # every directory fsync reached the daemon (an ENOSYS would have made the kernel stop asking)
    assert m.ctl("status")["fsyncdirs"] == before + 2


def test_lazyfs_drops_the_kernels_cached_pages_of_an_open_file(lazyfs_one):
    m = lazyfs_one
    p = f"{m.mnt}/open"
    fd = os.open(p, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.pwrite(fd, b"A" * 8192, 0)
        os.fsync(fd)
        _fsync_path(m.mnt, directory=True)
        os.pwrite(fd, b"B" * 4096, 0)
        os.pwrite(fd, b"C" * 100, 8192)
        assert os.pread(fd, 9000, 0) == b"B" * 4096 + b"A" * 4096 + b"C" * 100  # now in the page cache
        m.ctl("lose-unsynced")
        assert os.fstat(fd).st_size == 8192
        assert os.pread(fd, 9000, 0) == b"A" * 8192  # through the same fd: no stale page
    finally:
        os.close(fd)


def test_lazyfs_passthrough_and_metadata_modes(lazyfs_one):
    m = lazyfs_one
    d = m.mnt
    assert m.ctl("configure", metadata="immediate")["metadata"] == "immediate"
    Path(d, "x").write_bytes(b"unsynced")
    assert m.ctl("lose-unsynced")["lost_bytes"] == 8
    assert Path(d, "x").read_bytes() == b""  # LazyFS's model: the name stays, the data goes
    m.ctl("configure", mode="passthrough")
    Path(d, "y").write_bytes(b"direct")
    assert Path(m.backing_data, "y").read_bytes() == b"direct"
    assert m.ctl("lose-unsynced")["lost_bytes"] == 0 and Path(d, "y").read_bytes() == b"direct"
    with pytest.raises(Exception, match="unknown mode"):
        m.ctl("configure", mode="sloppy")


@pytest.mark.parametrize("direct_io", [False, True])
def test_lazyfs_cache_limit_writes_back_and_report(make_cluster, direct_io):
    c = make_cluster(1)
    with mounted_lazyfs(c, cache_limit_mb=1, direct_io=direct_io) as m:
        assert m.ctl("status")["direct_io"] is direct_io
        p = f"{m.mnt}/big"
        chunk = bytes(range(256)) * 1024  # 256 KiB
        with open(p, "wb") as f:
            f.write(chunk)
            f.flush()
            rep = m.ctl("report")
            assert [(x["path"], x["dirty_ranges"]) for x in rep["files"]] == [("/big", [[0, len(chunk)]])]
            assert rep["journal"] == [{"op": "create", "path": "/big"}]
            for _ in range(11):
                f.write(chunk)
        assert Path(p).read_bytes() == chunk * 12
        st = m.ctl("status")
        assert st["writebacks"] >= 1 and st["dirty_bytes"] <= 1 << 20
        _fsync_path(m.mnt, directory=True)
        lost = m.ctl("lose-unsynced")["lost_bytes"]
        # what was written back (cache full) survives, like pages a kernel flusher wrote
        size = os.path.getsize(p)
        assert size + lost == len(chunk) * 12 and size >= len(chunk) * 12 - (1 << 20)
        assert Path(p).read_bytes() == (chunk * 12)[:size]


def test_a_power_loss_of_several_nodes_takes_them_down_together(writer_cluster):
    """Like a site's power cut: every node is killed and loses its unsynced data before the
    first is started again (one after another, the first would be back, catching up, when
    the last went down)."""
    c, db, nem, _ = writer_cluster
    calls: list[tuple[str, str]] = []
    kill, start = db.kill, db.start

    def recorded(name, f):
        def call(node, *args):
            calls.append((name, node.name))
            return f(node, *args)
        return call

    db.kill, db.start = recorded("kill", kill), recorded("start", start)  # type: ignore[method-assign]
    for n in c.nodes:
        db.setup(n)
        start(n)
    written = {n.name: wait_written(n, db) for n in c.nodes}
    ev = nem.invoke(FaultOp("power-loss", {"nodes": "all", "torn": False}))
    assert sorted(ev["value"]["nodes"]) == ["n1", "n2"]
    assert [f for f, _ in calls] == ["kill", "kill", "start", "start"], calls
    for n in c.nodes:
        assert ev["value"]["lost"][n.name]["lost_bytes"] == int(written[n.name]["unsynced"])
        assert db.running(n)
