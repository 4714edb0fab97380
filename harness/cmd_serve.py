"""`wrack serve`: a local web page listing runs (verdict, configuration, date), sortable and
filterable, linking each run's report; campaigns' summaries too, and at /campaigns each
campaign cell's detection rate over time and across git revisions (from the pipeline's tables).

Binds 127.0.0.1 by default (`--host` to change it, at your own risk: no authentication).
Serves only files below the given roots. Stops on Ctrl-C (exit 0).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from contracts.errors import InputError
from contracts.store import results_root


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="browse runs in a local web page", description=__doc__.split("\n\n")[0])
    p.add_argument("roots", nargs="*", metavar="DIR",
                   help="results roots (default ./results and ./campaign-results)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8080, help="port (default 8080; 0 picks a free one)")
    p.add_argument("--tables", action="append", default=[], metavar="DIR",
                   help="a pipeline directory for the campaign page (repeatable; each root's _pipeline/ is read too)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # lazy: `wrack` imports every command module at start (--help); harness.serve costs ~25 ms
    from harness.serve import make_server

    roots = args.roots or [str(results_root()), "campaign-results"]
    roots = [r for r in roots if Path(r).is_dir()] or roots[:1]
    for r in roots:
        if not Path(r).is_dir():
            raise InputError("no such directory", r)
    for t in args.tables:
        if not Path(t, "runs").is_dir():
            raise InputError("not a pipeline directory (no runs/ table)", t)
    try:
        srv = make_server(roots, args.host, args.port, tables=args.tables)
    except OSError as e:
        raise InputError(f"cannot listen on {args.host}:{args.port}: {e.strerror}") from None
    host, port = srv.server_address[:2]
    sys.stdout.write(f"serving {', '.join(roots)} on http://{host}:{port}/ (Ctrl-C stops)\n")
    sys.stdout.flush()
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        srv.server_close()
    return 0
