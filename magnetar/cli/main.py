"""The ``magnetar`` command line: one parser, one verb per command module.

``standalone`` and ``broker`` (``cli/standalone.py``), ``admin`` and its verb families (``cli/admin/``), ``perf`` (the
``magnetar.perf`` package wires its own flags), ``tokens`` (``cli/tokens.py``), ``spark``
(``cli/spark.py``) and ``initialize-cluster-metadata`` (``cli/cluster_init.py``). A new command adds a
(parser, runner) pair to ``_COMMANDS``.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import Any

from magnetar import __version__
from magnetar.cli.admin import add_admin_parser, run_admin
from magnetar.cli.cluster_init import add_cluster_init_parser, run_cluster_init
from magnetar.cli.spark import add_spark_parser, run_spark
from magnetar.cli.standalone import (
    add_broker_parser,
    add_standalone_parser,
    run_broker_command,
    run_standalone_command,
)
from magnetar.cli.tokens import add_tokens_parser, run_tokens
from magnetar.perf import add_perf_parser, run_perf

__all__ = ["main"]

_COMMANDS: dict[str, tuple[Callable[[Any], object], Callable[[argparse.Namespace], int]]] = {
    "standalone": (add_standalone_parser, run_standalone_command),
    "broker": (add_broker_parser, run_broker_command),
    "admin": (add_admin_parser, run_admin),
    "perf": (add_perf_parser, run_perf),
    "tokens": (add_tokens_parser, run_tokens),
    "spark": (add_spark_parser, run_spark),
    "initialize-cluster-metadata": (add_cluster_init_parser, run_cluster_init),
}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="magnetar", description="A broker that speaks Pulsar's protocol.")
    parser.add_argument("--version", action="version", version=f"magnetar {__version__}")
    verbs = parser.add_subparsers(dest="verb", required=True)
    for add_parser, _ in _COMMANDS.values():
        add_parser(verbs)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    _, run = _COMMANDS[args.verb]
    return run(args)
