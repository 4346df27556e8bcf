"""`flotilla broker`: start a broker from a properties file and overrides, as kafka-server-start."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys

from broker import bounded_logging
from broker.config import ConfigError, load_config


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", metavar="server.properties", help="broker configuration file (Kafka key names)")
    parser.add_argument("--override", action="append", default=[], metavar="key=value",
                        help="override one configuration key (repeatable)")
    parser.add_argument("--log-level", default="INFO", help="logging level (default INFO)")


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    bounded_logging.install()
    try:
        config = load_config(args.config, args.override)
    except ConfigError as e:
        print(f"flotilla broker: configuration error: {e}", file=sys.stderr)
        return 2
    from broker.server.broker import DuplicateNodeId, WrongCluster, run_broker

    try:
        return asyncio.run(run_broker(config, announce=lambda s: print(s, flush=True)))
    except DuplicateNodeId as e:
        print(f"flotilla broker: refusing to start: {e}", file=sys.stderr)
        return 3
    except WrongCluster as e:
        print(f"flotilla broker: refusing to start: {e}", file=sys.stderr)
        return 4
    except ConfigError as e:
        print(f"flotilla broker: configuration error: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"flotilla broker: cannot start: {e}", file=sys.stderr)
        return 1
