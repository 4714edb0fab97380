"""LazyFS on the nodes: the BrokerDB hook and the `power-loss` fault.

`LazyFSHook` (add it to `db.hooks` before `db.setup`):
- `setup`: mounts a LazyFS daemon at `db.data_dir(node)` inside the node (so in the node's
  own mount namespace on the local backend), backed by `<broker dir>/lazyfs/backing/data`,
  control socket `<broker dir>/lazyfs/ctl.sock`, log `<broker dir>/lazyfs/lazyfs.log`;
- `after_kill`: when `lose_on_kill` (the default, as Jepsen does), every SIGKILL of the broker
  is a power loss: the unsynced data is dropped (the report is kept in `last_loss[node]`);
- `after_wipe`: makes the wipe durable (a later power loss must not bring data back);
- `teardown`: syncs and unmounts (nothing is lost on a clean stop), stops the daemon.

Everything goes through the Node interface (`exec`, `start_daemon`), so it works on every
backend whose nodes have /dev/fuse, CAP_SYS_ADMIN and the project installed.

`install_power_loss(nemesis, db)` adds the hook (once) and registers:
- `power-loss` value TARGET or {"nodes": TARGET, "torn": false | true | N}: SIGKILL the
  broker, drop its unsynced data (a torn write keeps part of each file's last unsynced
  write), let the kernel forget the cached pages, restart the broker. The nodes of one
  power loss go down together: every one is killed and loses its data before the first is
  started again. Recorded with what was lost, per node.
- `kill` records what each node's LazyFS dropped under `lost` (as `power-loss` does; empty
  when `lose_on_kill` is off and a kill keeps the page cache), so a history says which kills
  were lossy;
- a heal (`lazyfs-sync` event): every node's LazyFS syncs and goes to pass-through mode, so
  the final phase of a test and the clean stop lose nothing. The next `power-loss` switches
  a node back to lazy mode.
"""

from __future__ import annotations

import json
import shlex
import signal
from dataclasses import dataclass
from typing import Any

from clusters.node import DaemonSpec, Node
from nemesis.nodeside import node_python

MAX_FILES_RECORDED = 50
UNREACHABLE = "lazyfs control socket"  # how control.request says no daemon answers


@dataclass
class LazyFSOptions:
    """How each node's LazyFS runs (see fs.py and journal.py for the semantics)."""

    metadata: str = "posix"
    lose_on_kill: bool = True
    cache_limit_mb: int = 512
    direct_io: bool = False
    mount_timeout: float = 15.0


class LazyFSError(RuntimeError):
    pass


class LazyFSHook:
    """See the module docstring."""

    def __init__(self, opts: LazyFSOptions | None = None, service: str = "broker"):
        self.opts = opts or LazyFSOptions()
        self.service = service
        self.last_loss: dict[str, dict[str, Any]] = {}
        self.next_loss: dict[str, dict[str, Any]] = {}

    # ------------------------------------------------------------------ paths

    def state_dir(self, node: Node) -> str:
        return node.path(self.service, "lazyfs")

    def backing(self, node: Node) -> str:
        return node.path(self.service, "lazyfs", "backing")

    def socket(self, node: Node) -> str:
        return node.path(self.service, "lazyfs", "ctl.sock")

    def pidfile(self, node: Node) -> str:
        return node.path(self.service, "lazyfs", "lazyfs.pid")

    def logfile(self, node: Node) -> str:
        return node.path(self.service, "lazyfs", "lazyfs.log")

    def mountpoint(self, node: Node) -> str:
        return node.data_dir(self.service)

    # ------------------------------------------------------------------ control

    def ctl(self, node: Node, cmd: str, *, wait: float = 0.0, timeout: float = 120.0, **args: Any) -> dict[str, Any]:
        """Send a control command to the node's daemon; returns its answer."""
        argv = [node_python(node), "-m", "nemesis.lazyfs", "ctl", self.socket(node), cmd, "--wait", str(wait)]
        if args:
            argv += ["--args", json.dumps(args)]
        res = node.exec(argv, check=False, timeout=timeout + wait)
        if not res.ok:
            raise LazyFSError(f"{node.name}: lazyfs {cmd}: {(res.stderr.strip() or res.stdout.strip())[:300]}")
        return json.loads(res.stdout)

    def status(self, node: Node) -> dict[str, Any] | None:
        """The daemon's status, or None when no daemon answers (not mounted)."""
        try:
            return self.ctl(node, "status", timeout=30)
        except LazyFSError as e:
            if UNREACHABLE in str(e):
                return None
            raise

    def mounted(self, node: Node) -> bool:
        return self.status(node) is not None

    def mount(self, node: Node) -> None:
        """Start the daemon and wait until the mount answers (idempotent)."""
        if self.mounted(node):
            return
        mp, backing, q = self.mountpoint(node), self.backing(node), shlex.quote
        # a dead daemon leaves a mount that answers ENOTCONN: remove it; move any files
        # already in the data dir into the backing directory so they stay visible
        node.sh(f"grep -q ' {mp} fuse' /proc/self/mounts && umount -l {q(mp)}; "
                f"mkdir -p {q(backing)}/data {q(mp)} && "
                f"find {q(mp)} -mindepth 1 -maxdepth 1 -exec mv -t {q(backing)}/data {{}} +; true")
        argv = [node_python(node), "-m", "nemesis.lazyfs", "mount", backing, mp, "--control", self.socket(node),
                "--metadata", self.opts.metadata, "--cache-limit-mb", str(self.opts.cache_limit_mb)]
        if self.opts.direct_io:
            argv.append("--direct-io")
        node.start_daemon(DaemonSpec("lazyfs", argv, self.pidfile(node), self.logfile(node), cwd=self.state_dir(node)))
        try:
            self.ctl(node, "ping", wait=self.opts.mount_timeout)
        except LazyFSError as e:
            tail = node.exec(["tail", "-5", self.logfile(node)], check=False).stdout.strip()
            raise LazyFSError(f"{e}; daemon log: {tail}") from None

    def unmount(self, node: Node) -> None:
        """Sync, unmount and stop the daemon; removes a dead mount too (idempotent)."""
        mp, q = self.mountpoint(node), shlex.quote
        try:
            self.ctl(node, "sync")
        except LazyFSError:
            pass  # not mounted, or a dead daemon: unmount anyway
        node.sh(f"grep -q ' {mp} fuse' /proc/self/mounts || exit 0; "
                f"fusermount3 -u {q(mp)} 2>/dev/null || umount {q(mp)} 2>/dev/null || umount -l {q(mp)}",
                check=False, timeout=60)
        pf = self.pidfile(node)
        if not node.wait_daemon_exit(pf, 10):
            node.signal_daemon(pf, signal.SIGKILL)
            node.wait_daemon_exit(pf, 5)
        node.exec(["rm", "-f", pf], check=False)

    def lose(self, node: Node, torn: bool | int = False, seed: int | None = None) -> dict[str, Any]:
        """Drop the node's unsynced data now (the broker should be dead: see docs)."""
        return self.ctl(node, "lose-unsynced", torn=torn, seed=seed)

    # ------------------------------------------------------------------ BrokerDB hook

    def setup(self, db: Any, node: Node) -> None:
        self.mount(node)

    def after_kill(self, db: Any, node: Node) -> None:
        if not self.opts.lose_on_kill:
            return
        args = self.next_loss.pop(node.name, {})
        try:
            self.last_loss[node.name] = self.lose(node, **args)
        except LazyFSError as e:
            if UNREACHABLE not in str(e):  # not mounted on this node: nothing to lose
                raise

    def after_wipe(self, db: Any, node: Node) -> None:
        try:
            self.ctl(node, "sync")
        except LazyFSError as e:
            if UNREACHABLE not in str(e):
                raise

    def teardown(self, db: Any, node: Node) -> None:
        self.unmount(node)


def _summary(rep: dict[str, Any]) -> dict[str, Any]:
    files = rep.get("files", [])
    out = {"lost_bytes": rep.get("lost_bytes", 0), "files": files[:MAX_FILES_RECORDED],
           "undone": rep.get("undone", [])[:MAX_FILES_RECORDED]}
    if len(files) > MAX_FILES_RECORDED:
        out["files_not_recorded"] = len(files) - MAX_FILES_RECORDED
    return out


def find_hook(db: Any) -> LazyFSHook | None:
    for h in getattr(db, "hooks", []):
        if isinstance(h, LazyFSHook):
            return h
    return None


def _record_kill_losses(nemesis: Any, hook: LazyFSHook) -> None:
    """Make the nemesis's `kill` record what each node's LazyFS dropped: `lost` {node: what
    `power-loss` records}, empty when kills keep the page cache (`lose_on_kill` off). Once."""
    plain = nemesis.handlers["kill"]
    if getattr(plain, "records_lazyfs_losses", False):
        return

    def kill(spec: Any) -> dict[str, Any]:
        rec = plain(spec)
        rec["lost"] = {n: _summary(hook.last_loss.pop(n)) for n in rec.get("nodes", []) if n in hook.last_loss}
        return rec

    kill.records_lazyfs_losses = True  # type: ignore[attr-defined]
    nemesis.register("kill", kill)


def install_power_loss(nemesis: Any, db: Any | None = None, opts: LazyFSOptions | None = None) -> LazyFSHook:
    """Add the LazyFS hook to `db` (once; before db.setup) and register `power-loss` and the
    lazyfs heal on `nemesis` (module docstring)."""
    db = db if db is not None else nemesis.db
    if db is None:
        raise ValueError("power loss needs a DB")
    hook = find_hook(db)
    if hook is None:
        hook = LazyFSHook(opts, service=getattr(db, "service", "broker"))
        db.hooks.append(hook)
    passthrough: set[str] = set()  # nodes the heal switched to pass-through (and no power loss since)

    def power_loss(value: Any) -> dict[str, Any]:
        spec, torn = value, False
        if isinstance(value, dict) and "nodes" in value:
            spec, torn = value["nodes"], value.get("torn", False)
        names = nemesis.targets(spec or "one")
        seed = nemesis.rng.randrange(2**31) if torn is True else None
        lost = {name: lose_power(nemesis.cluster.node(name), torn, seed) for name in names}
        for name in names:  # together: every node is down before the first comes back (a site's power cut)
            db.start(nemesis.cluster.node(name))
            nemesis.killed.discard(name)
            nemesis.paused.discard(name)
        return {"nodes": names, "torn": torn, "seed": seed, "lost": lost}

    def lose_power(node: Any, torn: Any, seed: int | None) -> dict[str, Any]:
        """SIGKILL `node`'s service and drop its unsynced data; what was lost, summarised."""
        status = hook.status(node)
        if status is None:
            raise LazyFSError(f"{node.name}: no LazyFS mounted at {hook.mountpoint(node)} "
                              f"(install_power_loss before db.setup)")
        if status["mode"] != "lazy":
            hook.ctl(node, "configure", mode="lazy")
        passthrough.discard(node.name)
        hook.last_loss.pop(node.name, None)
        hook.next_loss[node.name] = {"torn": torn, "seed": seed}
        db.kill(node)
        rep = hook.last_loss.pop(node.name, None)
        if rep is None:  # lose_on_kill is off: lose explicitly
            hook.next_loss.pop(node.name, None)
            rep = hook.lose(node, torn=torn, seed=seed)
        return _summary(rep)

    def heal() -> None:
        """Every node not yet healed: sync, pass-through; one `lazyfs-sync` event if any."""
        done, synced = [], {}
        for node in nemesis.cluster.nodes:
            if node.name in passthrough:
                continue
            try:
                ans = hook.ctl(node, "configure", mode="passthrough")
            except LazyFSError as e:
                if UNREACHABLE in str(e):
                    continue
                raise
            done.append(node.name)
            passthrough.add(node.name)
            synced[node.name] = ans.get("synced_bytes", 0)
        if done:
            nemesis.record("lazyfs-sync", {"nodes": done, "mode": "passthrough", "synced_bytes": synced,
                                           "final": True})

    nemesis.register("power-loss", power_loss)
    _record_kill_losses(nemesis, hook)
    if not any(name == "lazyfs" for name, _ in nemesis.heals):
        nemesis.register_heal("lazyfs", heal)
    return hook


__all__ = ["LazyFSHook", "LazyFSOptions", "LazyFSError", "install_power_loss", "find_hook"]
