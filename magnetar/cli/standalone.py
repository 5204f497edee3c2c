"""The broker processes: ``magnetar standalone`` (one broker with embedded storage and metadata, by default)
and ``magnetar broker`` (one broker of a cluster, Pulsar's ``pulsar broker``: ZooKeeper metadata through
``metadataStoreUrl``, ledgers in an object store through ``ledgerStoreUrl``, configured by ``--config
broker.conf``).

Their flags (``--data-dir``, ports, ``--config``, ``--set KEY=VALUE``), the settings they compose (through
``config``, the only reader of files and the environment), the process-wide tuning a broker wants, and the run.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import gc
import logging
import sys
from collections.abc import Coroutine
from pathlib import Path

from magnetar.app.settings import StandaloneSettings
from magnetar.app.standalone import StartupError, run_standalone
from magnetar.client.remote import RemoteProducers
from magnetar.config import ConfigError, build_settings, parse_overrides, port_number, read_file

__all__ = ["add_broker_parser", "add_standalone_parser", "run_broker_command", "run_standalone_command"]

#: what a cluster broker starts with unless its configuration says otherwise: the services that do not follow
#: bundle ownership yet (issue 32) are off
CLUSTER_DEFAULTS = {"transactionCoordinatorEnabled": "false", "topicTwoPhaseDeletionEnabled": "false"}


def _port(text: str) -> int:
    try:
        return port_number(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_standalone_parser(verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    sa = verbs.add_parser("standalone", help="run one broker with embedded storage and metadata")
    _add_process_flags(sa)


def add_broker_parser(verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    broker = verbs.add_parser(
        "broker", help="run one broker of a cluster (metadataStoreUrl=zk:..., ledgerStoreUrl=s3://...)")
    _add_process_flags(broker)


def _add_process_flags(sa: argparse.ArgumentParser) -> None:
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


def _standalone_settings(args: argparse.Namespace, *, cluster: bool = False) -> StandaloneSettings:
    values: dict[str, str] = dict(CLUSTER_DEFAULTS) if cluster else {}
    if args.config is not None:
        values.update(read_file(args.config))
    values.update(parse_overrides(args.set))
    settings = build_settings(values, StandaloneSettings(data_dir=args.data_dir, cluster_mode=cluster))
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


def run_standalone_command(args: argparse.Namespace) -> int:
    """0 after a clean shutdown, 1 when the broker cannot start, 2 on bad settings."""
    return _run_broker(args, cluster=False)


def run_broker_command(args: argparse.Namespace) -> int:
    """``magnetar broker``: as ``standalone``, as one broker of a cluster."""
    return _run_broker(args, cluster=True)


def _run_broker(args: argparse.Namespace, *, cluster: bool) -> int:
    logging.basicConfig(
        level=getattr(logging, args.log_level),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        settings = _standalone_settings(args, cluster=cluster)
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
