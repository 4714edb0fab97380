"""The `ssh` backend: existing hosts from an inventory file, reached with paramiko.

Inventory (YAML)::

    root: /var/lib/wrack            # optional: the harness's directory on every host
    known_hosts: ~/.ssh/known_hosts # optional: default the user's known_hosts
    hosts:
      - name: n1                    # optional: default n<position>
        address: 192.0.2.11
        user: admin                 # optional: default root (others use sudo -n)
        port: 22                    # optional
        key: ~/.ssh/id_ed25519      # optional: private key file

Host keys are verified (an unknown key is refused) unless `insecure` (the CLI's
`--insecure`) is given. `create` checks that every host answers; the cluster is persisted
in `/run/wrack/ssh/NAME/state.json` so `status`/`down` work from another process.
`teardown` stops the daemons the harness started (pidfiles below `root`), removes the
harness's firewall chain and deletes `root` on every host.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import yaml

from clusters.node import Cluster, ClusterSpec, Node
from clusters.ssh_transport import SSHNode

STATE_ROOT = Path(os.environ.get("WRACK_SSH_STATE_ROOT", "/run/wrack/ssh"))
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


@dataclass
class HostEntry:
    name: str
    address: str
    user: str = "root"
    port: int = 22
    key: str | None = None


@dataclass
class Inventory:
    hosts: list[HostEntry]
    root: str = "/var/lib/wrack"
    known_hosts: str | None = None


def load_inventory(path: str) -> Inventory:
    """Parse and validate an inventory; ValueError names the file and the bad entry."""
    try:
        raw = yaml.safe_load(Path(path).read_text())
    except OSError as e:
        raise ValueError(f"{path}: cannot read inventory: {e.strerror}") from None
    except yaml.YAMLError as e:
        raise ValueError(f"{path}: not valid YAML: {str(e).splitlines()[0]}") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("hosts"), list) or not raw["hosts"]:
        raise ValueError(f"{path}: expected a mapping with a non-empty `hosts` list")
    hosts = []
    for i, h in enumerate(raw["hosts"]):
        where = f"{path}: hosts[{i}]"
        if isinstance(h, str):
            h = {"address": h}
        if not isinstance(h, dict) or not isinstance(h.get("address"), str):
            raise ValueError(f"{where}: needs an `address`")
        unknown = set(h) - {"name", "address", "user", "port", "key"}
        if unknown:
            raise ValueError(f"{where}: unknown keys {sorted(unknown)}")
        port = h.get("port", 22)
        if not isinstance(port, int) or not 0 < port < 65536:
            raise ValueError(f"{where}: bad port {port!r}")
        key = os.path.expanduser(h["key"]) if h.get("key") else None
        if key is not None and not os.path.exists(key):
            raise ValueError(f"{where}: key file {key} does not exist")
        hosts.append(HostEntry(str(h.get("name", f"n{i + 1}")), h["address"], str(h.get("user", "root")), port, key))
    names = [h.name for h in hosts]
    if len(set(names)) != len(names):
        raise ValueError(f"{path}: host names are not unique")
    kh = raw.get("known_hosts")
    return Inventory(hosts, str(raw.get("root", "/var/lib/wrack")), os.path.expanduser(kh) if kh else None)


class SSHCluster(Cluster):
    backend = "ssh"

    def __init__(self, name: str, inv: Inventory, insecure: bool = False):
        self.name = name
        self.inventory = inv
        self.insecure = insecure
        self.nodes: list[Node] = [
            SSHNode(h.name, h.address, user=h.user, port=h.port, key_file=h.key, known_hosts=inv.known_hosts,
                    insecure=insecure, root=inv.root) for h in inv.hosts]

    def check(self) -> None:
        """Every host answers (raises NodeError naming the first that does not)."""
        with ThreadPoolExecutor(max_workers=min(16, len(self.nodes))) as ex:
            list(ex.map(lambda n: n.exec(["true"], timeout=30), self.nodes))

    def teardown(self) -> None:
        root = self.inventory.root

        def one(n: Node) -> None:
            n.sh(f"for p in $(find {root} -name '*.pid' 2>/dev/null); do kill -CONT $(cat $p) 2>/dev/null; "
                 f"kill -KILL $(cat $p) 2>/dev/null; done; "
                 f"iptables -w -D INPUT -j WRACK-NEMESIS -m comment --comment wrack 2>/dev/null; "
                 f"iptables -w -F WRACK-NEMESIS 2>/dev/null; iptables -w -X WRACK-NEMESIS 2>/dev/null; "
                 f"rm -rf {root}; true", check=False, timeout=60)
            if isinstance(n, SSHNode):
                n.close()

        with ThreadPoolExecutor(max_workers=min(16, len(self.nodes))) as ex:
            list(ex.map(one, self.nodes))
        shutil.rmtree(STATE_ROOT / self.name, ignore_errors=True)


def create(spec: ClusterSpec) -> SSHCluster:
    path = spec.options.get("inventory")
    if not path:
        raise ValueError("the ssh backend needs --inventory FILE")
    if not NAME_RE.match(spec.name):
        raise ValueError(f"bad cluster name {spec.name!r}")
    inv = load_inventory(path)
    c = SSHCluster(spec.name, inv, bool(spec.options.get("insecure")))
    c.check()
    d = STATE_ROOT / spec.name
    d.mkdir(parents=True, exist_ok=True)
    (d / "state.json").write_text(json.dumps({"name": spec.name, "insecure": c.insecure,
                                              "inventory": asdict(inv)}, indent=1))
    return c


def attach(name: str) -> SSHCluster:
    try:
        raw: dict[str, Any] = json.loads((STATE_ROOT / name / "state.json").read_text())
    except (OSError, ValueError):
        raise FileNotFoundError(f"no ssh cluster {name!r}") from None
    inv = raw["inventory"]
    return SSHCluster(name, Inventory([HostEntry(**h) for h in inv["hosts"]], inv["root"], inv["known_hosts"]),
                      raw["insecure"])


def names() -> list[str]:
    return sorted(d.name for d in STATE_ROOT.iterdir() if (d / "state.json").exists()) if STATE_ROOT.is_dir() else []


def force_down(name: str | None = None) -> list[str]:
    removed = []
    for n in [name] if name else names():
        try:
            attach(n).teardown()
            removed.append(f"ssh cluster {n}")
        except FileNotFoundError:
            continue
    return removed
