"""The `wrack` command line: subcommands, exit codes, one-line errors.

Exit codes (docs/ARCHITECTURE.md, as in Jepsen): 0 valid, 1 invalid, 2 unknown, 254 bad arguments
or input, 255 crash. Bad input never shows a traceback: `InputError` becomes
``wrack: error: FILE:LINE: message``. Set WRACK_DEBUG=1 to see tracebacks of crashes.
A `wrack` that seems stuck prints every thread's stack to stderr on SIGUSR1 (`kill -USR1 PID`)
and goes on.

Each subcommand lives in its own module with `add_parser(subparsers)` and
`run(args) -> int`; modules keep their top-level imports light so that `wrack check`
starts fast, and import heavy libraries inside `run`.
"""

from __future__ import annotations

import argparse
import faulthandler
import importlib
import os
import signal
import sys
import traceback

from contracts.errors import EXIT_BAD_INPUT, EXIT_CRASH, InputError

# name -> module implementing add_parser/run. Order is the order of `wrack --help`.
COMMANDS: dict[str, str] = {
    "check": "harness.cmd_check",
    "demo": "harness.cmd_demo",
    "cluster": "harness.cmd_cluster",
    "test": "harness.cmd_test",
    "rerun": "harness.cmd_rerun",
    "shrink": "harness.cmd_shrink",
    "analyze": "harness.cmd_analyze",
    "report": "harness.cmd_report",
    "campaign": "harness.cmd_campaign",
    "serve": "harness.cmd_serve",
    "pipeline": "harness.cmd_pipeline",
}


class _Parser(argparse.ArgumentParser):
    """argparse that exits 254 (bad arguments) instead of 2, with a one-line message."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        sys.stderr.write(f"{self.prog}: error: {message}\n")
        sys.exit(EXIT_BAD_INPUT)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The `wrack` parser; with `only` (a command name) just that command's subparser, so a
    command does not pay for importing the others' modules at start-up."""
    parser = _Parser(prog="wrack", description="Fault-injection testing for replicated logs.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for name, modname in COMMANDS.items():
        if only is not None and name != only:
            continue
        # lazy: registry (COMMANDS): `wrack CMD` imports only CMD's module (the docstring)
        mod = importlib.import_module(modname)
        mod.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser(argv[0] if argv and argv[0] in COMMANDS else None)
    args = parser.parse_args(argv)
    try:
        code = args.func(args)
    except InputError as e:
        sys.stderr.write(f"wrack: error: {e}\n")
        code = EXIT_BAD_INPUT
    except KeyboardInterrupt:
        sys.stderr.write("wrack: interrupted\n")
        code = 130
    except BrokenPipeError:
        code = 0
    except Exception as e:  # noqa: BLE001 - a crash: one line, traceback on request
        if os.environ.get("WRACK_DEBUG"):
            traceback.print_exc()
        sys.stderr.write(f"wrack: internal error: {type(e).__name__}: {e} (WRACK_DEBUG=1 shows the traceback)\n")
        code = EXIT_CRASH
    sys.stdout.flush()
    return code


def entry() -> None:
    """The `wrack` executable: `main` with SIGUSR1 printing every thread's stack."""
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    sys.exit(main())


if __name__ == "__main__":
    entry()
