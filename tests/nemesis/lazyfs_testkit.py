"""Helpers for the LazyFS tests: a LazyFS mounted inside a local node, reachable from the
test process through the node holder's /proc/PID/root (same mount namespace as the node)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from clusters.local import LocalCluster
from clusters.node import Node
from nemesis.lazyfs.control import request
from nemesis.lazyfs.hook import LazyFSHook, LazyFSOptions


@dataclass
class Mounted:
    node: Node
    hook: LazyFSHook
    holder_pid: int

    def host(self, node_path: str) -> str:
        """The node's path as the test process sees it (through the holder's root)."""
        return f"/proc/{self.holder_pid}/root{node_path}"

    @property
    def mnt(self) -> str:
        return self.host(self.hook.mountpoint(self.node))

    @property
    def backing_data(self) -> str:
        return self.host(self.hook.backing(self.node) + "/data")

    def ctl(self, cmd: str, **args: Any) -> dict[str, Any]:
        return request(self.host(self.hook.socket(self.node)), cmd, **args)


@contextlib.contextmanager
def mounted_lazyfs(cluster: LocalCluster, node_name: str = "n1", **opts: Any) -> Iterator[Mounted]:
    """Mount LazyFS at the node's broker data dir; always unmounted on the way out."""
    node = cluster.node(node_name)
    hook = LazyFSHook(LazyFSOptions(**opts))
    holder = next(n.holder_pid for n in cluster.state.nodes if n.name == node_name)
    hook.mount(node)
    try:
        yield Mounted(node, hook, holder)
    finally:
        hook.unmount(node)


def tree(root: str) -> dict[str, Any]:
    """Every entry below `root`: relative path -> file content (bytes) or "dir"."""
    out: dict[str, Any] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        for d in dirnames:
            out[os.path.normpath(os.path.join(rel, d))] = "dir"
        for f in filenames:
            with open(os.path.join(dirpath, f), "rb") as fh:
                out[os.path.normpath(os.path.join(rel, f))] = fh.read()
    return out


def fuse_mounts_in(pid: int, below: str = "/var/lib/wrack") -> list[str]:
    """The FUSE mounts below `below` in the mount namespace of process `pid`."""
    with open(f"/proc/{pid}/mounts") as f:
        return [ln.split()[1] for ln in f if ln.split()[2].startswith("fuse") and ln.split()[1].startswith(below)]
