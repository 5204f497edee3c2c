"""The ``magnetar`` command line: ``magnetar standalone``, ``magnetar admin``, ``magnetar perf``,
``magnetar tokens``, ``magnetar spark`` (more verbs join as their issues land)."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import gc
import logging
import sys
from collections.abc import Coroutine, Sequence
from pathlib import Path

from magnetar import __version__
from magnetar.admin_cli import add_admin_parser, run_admin
from magnetar.client.remote import RemoteProducers
from magnetar.config import ConfigError, build_settings, parse_overrides, port_number, read_file
from magnetar.perf import add_perf_parser, run_perf
from magnetar.server.standalone import StandaloneSettings, StartupError, run_standalone
from magnetar.spark_cli import add_spark_parser, run_spark
from magnetar.tokens_cli import add_tokens_parser, run_tokens


def _port(text: str) -> int:
    try:
        return port_number(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="magnetar", description="A broker that speaks Pulsar's protocol.")
    parser.add_argument("--version", action="version", version=f"magnetar {__version__}")
    verbs = parser.add_subparsers(dest="verb", required=True)
    sa = verbs.add_parser("standalone", help="run one broker with embedded storage and metadata")
    sa.add_argument("--data-dir", type=Path, default=Path("data"), help="where data lives (default ./data)")
    sa.add_argument("--broker-port", type=_port, default=None,
                    help="binary protocol port (default 6650; 0 = any free port)")
    sa.add_argument("--web-port", type=_port, default=None,
                    help="HTTP port for admin and /metrics (default 8080; 0 = any free port)")
    sa.add_argument("--bind-address", default=None, help="address to listen on (default 0.0.0.0)")
    sa.add_argument("--config", type=Path, default=None, help="magnetar.conf (properties or .toml)")
    sa.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="override a setting by its broker.conf name, e.g. --set journalSyncData=false")
    sa.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    add_admin_parser(verbs)
    add_perf_parser(verbs)
    add_tokens_parser(verbs)
    add_spark_parser(verbs)
    return parser


def _standalone_settings(args: argparse.Namespace) -> StandaloneSettings:
    values: dict[str, str] = {}
    if args.config is not None:
        values.update(read_file(args.config))
    values.update(parse_overrides(args.set))
    settings = build_settings(values, StandaloneSettings(data_dir=args.data_dir))
    flags = {"broker_port": args.broker_port, "web_port": args.web_port, "bind_address": args.bind_address}
    return dataclasses.replace(settings, **{k: v for k, v in flags.items() if v is not None})


#: The broker makes a few short-lived container objects per message (protobuf messages, futures, handles); at
#: Python's default first-generation threshold (700) the cyclic collector ran every few hundred messages and
#: took about 8 % of the broker's time in a profile of unbatched publishing. Nearly all of them are freed by
#: reference counting; a larger threshold makes collections rarer (a few MB of garbage cycles at most).
GC_GEN0_THRESHOLD = 10_000


def _tune_gc() -> None:
    _, gen1, gen2 = gc.get_threshold()
    gc.set_threshold(GC_GEN0_THRESHOLD, gen1, gen2)


def _run(main_coroutine: Coroutine[object, object, None]) -> None:
    """Run on uvloop when it is installed (faster), else on asyncio's own loop."""
    try:
        import uvloop
    except ImportError:
        asyncio.run(main_coroutine)
    else:
        uvloop.run(main_coroutine)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.verb == "admin":
        return run_admin(args)
    if args.verb == "perf":
        return run_perf(args)
    if args.verb == "tokens":
        return run_tokens(args)
    if args.verb == "spark":
        return run_spark(args)
    logging.basicConfig(
        level=getattr(logging, args.log_level),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    if args.verb == "standalone":
        try:
            settings = _standalone_settings(args)
        except ConfigError as exc:
            print(f"magnetar: {exc}", file=sys.stderr)
            return 2
        _tune_gc()
        try:
            _run(run_standalone(settings, RemoteProducers()))
        except StartupError as exc:
            print(f"magnetar: cannot start: {exc}", file=sys.stderr)
            return 1
        return 0
    return 2


if __name__ == "__main__":
    sys.exit(main())
