"""`wrack cluster up|status|down`: bring nodes up, show them, remove them (leftovers too).

`up` prints the cluster's description (JSON with `--json`); `down --force` removes
everything the backend made for the cluster (every cluster of the backend without
`--name`) by names and labels, even after the harness crashed. Exit 0 on success, 254 for
bad arguments or a cluster that does not exist / exists already.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from clusters.backends import BACKENDS, DEFAULT_BACKEND, backend
from contracts.errors import InputError

DEFAULT_NAME = "wrack"


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("cluster", help="bring test clusters up and down", description=__doc__.split("\n\n")[0])
    csub = p.add_subparsers(dest="cluster_command", metavar="ACTION", parser_class=type(p))
    csub.required = True
    for action, helptext in (("up", "create a cluster"), ("status", "show clusters"),
                             ("down", "remove a cluster")):
        a = csub.add_parser(action, help=helptext)
        a.add_argument("--backend", choices=sorted(BACKENDS), default=DEFAULT_BACKEND,
                       help=f"where nodes come from (default {DEFAULT_BACKEND})")
        a.add_argument("--name", default=None, help=f"cluster name (default {DEFAULT_NAME})")
        a.add_argument("--json", action="store_true", help="machine-readable output")
        if action == "up":
            a.add_argument("--nodes", type=int, default=5, help="number of nodes (default 5)")
            a.add_argument("--transport", choices=["nsenter", "ssh"], default="nsenter",
                           help="how the local backend runs commands on nodes (default nsenter)")
            a.add_argument("--inventory", default=None, metavar="FILE", help="ssh backend: inventory YAML")
            a.add_argument("--insecure", action="store_true",
                           help="ssh backend: accept unknown host keys (verification is on by default)")
        if action == "down":
            a.add_argument("--force", action="store_true",
                           help="also remove leftovers of crashed runs (every cluster without --name)")
        a.set_defaults(func=run)


def _print(obj: Any, as_json: bool) -> None:
    if as_json:
        sys.stdout.write(json.dumps(obj, separators=(",", ":")) + "\n")
        return
    clusters = obj if isinstance(obj, list) else [obj]
    for c in clusters:
        extra = f" transport={c['transport']}" if "transport" in c else ""
        own = c.get("owner")
        if own:
            extra += f", owner {own['tag']} pid {own['pid']}" + ("" if own["alive"] else
                                                                 " (gone: the next local cluster made removes it)")
        sys.stdout.write(f"{c['name']} ({c['backend']}{extra}): {len(c['nodes'])} nodes\n")
        for n in c["nodes"]:
            state = "" if n.get("up", True) else "  DOWN"
            sys.stdout.write(f"  {n['name']}  {n['address']}{state}\n")


def run(args: argparse.Namespace) -> int:
    # lazy: `wrack` imports every command module at start (--help); clusters.node costs ~8 ms
    from clusters.node import ClusterSpec

    try:
        mod = backend(args.backend)
        if args.cluster_command == "up":
            opts = {k: v for k, v in vars(args).items() if k in ("inventory", "insecure")}
            spec = ClusterSpec(name=args.name or DEFAULT_NAME, nodes=args.nodes, transport=args.transport,
                               options=opts)
            cluster = mod.create(spec)
            _print(cluster.describe(), args.json)
            return 0
        if args.cluster_command == "status":
            wanted = [args.name] if args.name else mod.names()
            out = []
            for name in wanted:
                try:
                    out.append(mod.attach(name).describe())
                except FileNotFoundError:
                    if args.name:
                        raise
                    out.append({"name": name, "backend": args.backend, "nodes": [], "leftover": True})
            _print(out if not args.name else out[0], args.json)
            return 0
        # down
        if args.force:
            removed = mod.force_down(args.name)
            if args.json:
                _print({"removed": removed}, True)
            return 0
        name = args.name or DEFAULT_NAME
        mod.attach(name).teardown()
        return 0
    except (ValueError, FileExistsError, FileNotFoundError, PermissionError) as e:
        raise InputError(str(e).strip("'\"")) from None
