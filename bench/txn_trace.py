"""Where a transaction's milliseconds go in the broker: timed spans along the transaction path.

    .venv/bin/python bench/txn_trace.py [--batched] [--concurrency 1] [--transactions 300] [--no-fsync]

Starts ``magnetar standalone`` through this script's ``serve`` mode, which wraps the transaction path's
steps with timers before the broker starts (the product has no tracing of its own; the wrappers live here),
runs ``magnetar perf txn`` against it (open → produce 1 → consume + ack 1 → commit), stops the broker with
SIGTERM and prints, per span, how many times it ran per transaction and its p50 / mean / p99 in milliseconds
(wall time; the spans marked CPU are on the thread's CPU clock).
Spans nest (an END_TXN holds its log appends and the participants' ends), so at 1 in flight they read as a
breakdown. ``docs/transactions-path.md`` is written from these figures.
"""

from __future__ import annotations

import argparse
import atexit
import functools
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

READY = re.compile(r"ready: broker pulsar://[^:]+:(\d+) web http://[^:]+:(\d+)")
START_TIMEOUT_S = 60
SPANS: dict[str, list[float]] = defaultdict(list)


def _timed_coroutine(owner: Any, attr: str, span: str) -> None:
    original: Callable[..., Awaitable[Any]] = getattr(owner, attr)

    @functools.wraps(original)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        began = time.perf_counter()
        try:
            return await original(*args, **kwargs)
        finally:
            SPANS[span].append((time.perf_counter() - began) * 1000)

    setattr(owner, attr, wrapper)


def _timed_call(owner: Any, attr: str, span: str) -> None:
    """A plain method, timed on the thread's CPU clock: what the call costs, not the time the broker waited
    for a core during it (a call that wakes another thread or process is where a loaded machine takes the core
    away)."""
    original: Callable[..., Any] = getattr(owner, attr)

    @functools.wraps(original)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        began = time.thread_time()
        try:
            return original(*args, **kwargs)
        finally:
            SPANS[span].append((time.thread_time() - began) * 1000)

    setattr(owner, attr, wrapper)


def _timed_future(owner: Any, attr: str, span: str) -> None:
    """A method returning a future: the span ends when the future settles."""
    original: Callable[..., Any] = getattr(owner, attr)

    @functools.wraps(original)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        began = time.perf_counter()
        future = original(*args, **kwargs)
        future.add_done_callback(lambda _: SPANS[span].append((time.perf_counter() - began) * 1000))
        return future

    setattr(owner, attr, wrapper)


def _timed_answer() -> None:
    """The coordinator's commands, named by their type (NEW_TXN, ADD_PARTITION_TO_TXN, ..., END_TXN)."""
    from magnetar.protocol import pb
    from magnetar.server.binary.handlers import transactions

    original = transactions._answer

    async def answer(conn: Any, request_type: int, *args: Any) -> None:
        began = time.perf_counter()
        try:
            await original(conn, request_type, *args)
        finally:
            name = pb.BaseCommand.Type.Name(request_type)
            SPANS[f"wire {name}"].append((time.perf_counter() - began) * 1000)

    transactions._answer = answer  # type: ignore[assignment]


def install_probes() -> None:
    from magnetar.broker.topic.persistent import PersistentTopic
    from magnetar.broker.transactions.buffer import TransactionBuffer
    from magnetar.broker.transactions.participants import BrokerParticipants
    from magnetar.broker.transactions.pending_ack import PendingAckStore
    from magnetar.broker.transactions.pending_ack_log import ManagedLedgerAckLog
    from magnetar.broker.transactions.txn_log import TxnLog
    from magnetar.ledger.cursor import ManagedCursor
    from magnetar.ledger.managed import ManagedLedgerImpl
    from magnetar.metadata.sqlite import SqliteMetadataStore
    from magnetar.server.binary.connection import ServerConnection
    from magnetar.server.binary.handlers import txn_topic
    from magnetar.storage._group_commit import GroupCommit

    _timed_answer()
    _timed_coroutine(txn_topic, "on_txn_ack", "wire ACK (in a txn)")
    _timed_future(PersistentTopic, "publish", "topic SEND append (txn and plain)")
    _timed_coroutine(TxnLog, "append", "coordinator log record")
    _timed_coroutine(BrokerParticipants, "end_txn_on_partition", "end on partition (commit marker)")
    _timed_coroutine(BrokerParticipants, "end_txn_on_subscription", "end on subscription (pending acks)")
    _timed_coroutine(TransactionBuffer, "end", "buffer marker append")
    _timed_coroutine(PendingAckStore, "acknowledge", "pending-ack store ack")
    _timed_coroutine(PendingAckStore, "end", "pending-ack store end")
    _timed_coroutine(ManagedLedgerAckLog, "append", "pending-ack log record")
    _timed_future(ManagedLedgerImpl, "add_entry_future", "managed-ledger entry append (any ledger)")
    _timed_call(GroupCommit, "_start_round", "storage round started (CPU: write + hand-off)")
    _timed_call(ServerConnection, "_flush_out", "socket write (CPU: a connection's frames of one pass)")
    _timed_coroutine(ManagedCursor, "_persist", "cursor persist (metadata put)")
    _timed_coroutine(SqliteMetadataStore, "put", "metadata put")
    _timed_coroutine(SqliteMetadataStore, "get", "metadata get")


def serve(out: Path, argv: list[str]) -> int:
    install_probes()
    atexit.register(lambda: out.write_text(json.dumps(SPANS)))
    from magnetar.cli import main

    return main(["standalone", *argv])


def run(batched: bool, concurrency: int, transactions: int, fsync: bool) -> dict[str, Any]:
    on = "true" if batched else "false"
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "spans.json"
        cmd = [sys.executable, __file__, "serve", str(out), "--data-dir", str(Path(tmp) / "data"),
               "--bind-address", "127.0.0.1", "--broker-port", "0", "--web-port", "0",
               "--set", f"transactionLogBatchedWriteEnabled={on}",
               "--set", f"transactionPendingAckBatchedWriteEnabled={on}",
               "--set", f"journalSyncData={'true' if fsync else 'false'}"]
        broker = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            assert broker.stderr is not None
            deadline = time.monotonic() + START_TIMEOUT_S
            port = None
            while port is None and time.monotonic() < deadline:  # bounded by the start timeout
                line = broker.stderr.readline()
                if not line:
                    raise RuntimeError("the broker exited during start")
                match = READY.search(line)
                port = match.group(1) if match else None
            if port is None:
                raise RuntimeError("the broker did not become ready")
            perf = [sys.executable, "-m", "magnetar.cli", "perf", "txn", "-u", f"pulsar://127.0.0.1:{port}",
                    "-c", str(concurrency), "-m", str(transactions), "--json", "--no-progress"]
            summary = json.loads(subprocess.run(perf, capture_output=True, text=True, check=True, timeout=900).stdout)
            broker.send_signal(signal.SIGTERM)
            broker.communicate(timeout=60)
        finally:
            if broker.poll() is None:
                broker.kill()
                broker.wait(60)
        spans = json.loads(out.read_text())
    return {"summary": summary, "spans": spans}


def report(result: dict[str, Any], transactions: int) -> None:
    summary = result["summary"]
    print(f"{summary['txn_per_s']:.1f} txn/s; whole transaction p50 {summary['p50_ms']:.2f} ms; commit p50 "
          f"{summary['commit_p50_ms']:.2f} ms; client CPU {summary['client_cpu_us_per_txn']:.0f} µs/txn")
    print(f"{'span':<46} | {'per txn':>7} | {'p50 ms':>7} | {'mean ms':>7} | {'p99 ms':>7}")
    for span, values in sorted(result["spans"].items()):
        values.sort()
        p99 = values[min(len(values) - 1, int(len(values) * 0.99))]
        print(f"{span:<46} | {len(values) / transactions:7.2f} | {statistics.median(values):7.3f} | "
              f"{statistics.fmean(values):7.3f} | {p99:7.3f}")


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "serve":
        sys.exit(serve(Path(sys.argv[2]), sys.argv[3:]))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batched", action="store_true", help="batch both logs (PIP-160)")
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--transactions", type=int, default=300)
    parser.add_argument("--no-fsync", action="store_true")
    args = parser.parse_args()
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    result = run(args.batched, args.concurrency, args.transactions, not args.no_fsync)
    report(result, args.transactions)


if __name__ == "__main__":
    main()
