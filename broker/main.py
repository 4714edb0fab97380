"""`wrack-broker`: the Kafka-compatible broker (and/or controller) process.

    wrack-broker [--config FILE | FILE] [--override key=value ...]

Properties use Kafka's names (see broker/config.py and docs/broker.md); `--override`
wins over the file, as with kafka-server-start. Logs go to stderr and to `wrack.log.file`
(default: wrack-broker.log in the first log dir), with timestamps.

Exit codes: 0 after a clean shutdown (SIGTERM/SIGINT), 254 for bad configuration or a
listener that cannot be opened (one line on stderr), 255 for a crash.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import logging
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from contracts.errors import EXIT_BAD_INPUT, EXIT_CRASH, InputError

if TYPE_CHECKING:  # broker.config imports kio: see hide_hypothesis
    from broker.config import BrokerSettings

LOG_FORMAT = "%(asctime)s.%(msecs)03d %(levelname)s [node %(node)s] %(name)s: %(message)s"
DATE_FORMAT = "%Y-%m-%d %H:%M:%S"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        sys.stderr.write(f"wrack-broker: error: {message}\n")
        sys.exit(EXIT_BAD_INPUT)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="wrack-broker",
        description="A Kafka-compatible broker (and controller) implementing the seed replication protocol.",
        epilog="Example: wrack-broker --override node.id=0 --override listeners=PLAINTEXT://127.0.0.1:9092 "
        "--override log.dirs=/tmp/x",
    )
    p.add_argument("config_file", nargs="?", metavar="FILE", help="a Kafka-style properties file (same as --config)")
    p.add_argument("--config", dest="config", metavar="FILE", help="a Kafka-style properties file")
    p.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                   help="set a property (repeatable; wins over the file)")
    return p


class _NodeFilter(logging.Filter):
    def __init__(self, node: int) -> None:
        super().__init__()
        self.node = node

    def filter(self, record: logging.LogRecord) -> bool:
        record.node = self.node
        return True


def setup_logging(settings: BrokerSettings) -> logging.Logger:
    logger = logging.getLogger("wrack.broker")
    logger.setLevel(settings.log_level)
    logger.propagate = False
    fmt = logging.Formatter(LOG_FORMAT, DATE_FORMAT)
    flt = _NodeFilter(settings.node_id)
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    path = settings.log_file if settings.log_file is not None else str(Path(settings.log_dirs[0]) / "wrack-broker.log")
    if path:
        try:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            handlers.append(logging.FileHandler(path))
        except OSError as e:
            raise InputError(f"cannot open the log file: {e.strerror}", path) from None
    for h in handlers:
        h.setFormatter(fmt)
        h.addFilter(flt)
        logger.addHandler(h)
    return logger


def hide_hypothesis() -> None:
    """Keep kio from registering hypothesis strategies in the broker process.

    kio's phantom types call `hypothesis.strategies.register_type_strategy` for every
    type at import when hypothesis is importable (module `kio.static._phantom`); its `text()`
    strategy builds hypothesis's Unicode tables, cached in `.hypothesis/` under the
    working directory. In a fresh directory (every node of a test) that took 4-7 s of
    CPU per broker start, 0.4 s even with the cache. The broker never generates test
    data, so the console entry point makes `import hypothesis` fail before kio is
    imported (a None entry in sys.modules is the documented way); an in-process caller
    (tests) that already imported hypothesis keeps it."""
    if "hypothesis" not in sys.modules:
        sys.modules["hypothesis"] = None  # type: ignore[assignment]


def main(argv: list[str] | None = None) -> int:
    # lazy: broker.config imports kio, which must come after hide_hypothesis() (entry); 20 ms that --help skips
    from broker.config import load_settings

    args = build_parser().parse_args(argv)
    if args.config and args.config_file:
        sys.stderr.write("wrack-broker: error: give the config file once (FILE or --config FILE)\n")
        return EXIT_BAD_INPUT
    try:
        settings = load_settings(args.config or args.config_file, args.override)
        logger = setup_logging(settings)
    except InputError as e:
        sys.stderr.write(f"wrack-broker: error: {e}\n")
        return EXIT_BAD_INPUT
    # lazy: imports kio (after hide_hypothesis(), as above); 0.5 s that a bad configuration or --help skips
    from broker.server.node import Node, StartupError

    node = Node(settings, logger)
    profile = os.environ.get("WRACK_BROKER_PROFILE")  # cProfile output file (bench/broker.py --profile)
    try:
        if profile:
            prof = cProfile.Profile()
            try:
                return prof.runcall(asyncio.run, node.run())
            finally:
                prof.dump_stats(profile)
        return asyncio.run(node.run())
    except (StartupError, InputError, ValueError) as e:
        # ValueError: a bad line in the metadata log (it names path:line)
        logger.error("%s", e)
        sys.stderr.flush()
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        return 0
    except Exception:
        logger.exception("crashed")
        return EXIT_CRASH


def entry() -> None:
    hide_hypothesis()
    sys.exit(main())


if __name__ == "__main__":
    entry()
