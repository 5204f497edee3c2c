"""``magnetar perf``: measure a broker as ``pulsar-perf`` does (produce, consume, end to end).

It sits at the command-line level: it drives a broker through a client (the official ``pulsar-client`` by
default, or ``magnetar.client``), both imported only when a run needs them, and never touches broker
internals. Latency comes from a log-bucketed histogram, never from averages.

    magnetar perf produce  [topic] --rate 0 --size 1024 --messages 100000 [--no-batching] [--json]
    magnetar perf consume  [topic] --initial-position earliest --messages 100000
    magnetar perf e2e      [topic] --rate 1000 --no-batching --test-duration 30
    magnetar perf txn      [topic] --concurrency 8 --transactions 2000
"""

from __future__ import annotations

import argparse
import sys

from magnetar.perf._options import OptionsError, PerfOptions, add_perf_parser, options_from
from magnetar.perf._run import PerfError, run

__all__ = ["OptionsError", "PerfError", "PerfOptions", "add_perf_parser", "options_from", "run", "run_perf"]


def run_perf(args: argparse.Namespace) -> int:
    """The ``perf`` verb of the CLI: 0 on success, 2 on bad flags, 1 when the run failed."""
    if args.perf_verb == "txn":
        return _run_txn(args)
    try:
        options = options_from(args)
    except OptionsError as exc:
        print(f"magnetar perf: {exc}", file=sys.stderr)
        return 2
    try:
        return run(options)
    except PerfError as exc:
        print(f"magnetar perf: {exc}", file=sys.stderr)
        return 1


def _run_txn(args: argparse.Namespace) -> int:
    from magnetar.perf._txn import run_txn, txn_options

    try:
        options = txn_options(args)
    except ValueError as exc:
        print(f"magnetar perf: {exc}", file=sys.stderr)
        return 2
    return run_txn(options)
