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
import signal
import sys
import threading
from typing import TextIO

from magnetar.perf._flows import Flows
from magnetar.perf._options import OptionsError, PerfOptions, add_perf_parser, options_from
from magnetar.perf._run import PerfError, create_partitions, measure

__all__ = ["OptionsError", "PerfError", "PerfOptions", "add_perf_parser", "options_from", "run", "run_perf"]


def run(options: PerfOptions, *, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    """Measure as the options say; print progress and the summary. Returns the exit code."""
    if options.partitions:
        create_partitions(options)
    flows = Flows()
    # Ctrl-C asks the driver to stop and the run ends as on its count: the client is closed before the
    # interpreter exits (a KeyboardInterrupt raised mid-run left the C++ client's threads to std::terminate)
    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, lambda *_: flows.stop.set()) if main else None
    try:
        if options.processes > 1:
            from magnetar.perf._processes import measure_processes  # multiprocessing: only when asked

            return measure_processes(options, flows, out, err)
        return measure(options, flows, out, err)
    finally:
        if main:
            signal.signal(signal.SIGINT, previous)



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
