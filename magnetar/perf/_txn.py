"""``magnetar perf txn``: transactions per second for the consume-transform-produce step.

Each of ``--concurrency`` workers loops: open a transaction, produce 1 message to the output topic in it,
consume 1 message from the input topic and acknowledge it in it, commit. The input topic is filled before the
clock starts (one message per transaction to run). Reports txn/s and the latency of a whole transaction
(open → committed) and of its commit alone (END_TXN sent → answered) from log-bucketed histograms, and the
client's own CPU time per transaction (so a benchmark can tell the broker's share from the client's). Uses
``magnetar.client`` (the official Python client has no transactions).

    magnetar perf txn --concurrency 8 --transactions 2000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
import uuid
from dataclasses import asdict, dataclass
from typing import Any, TextIO

from magnetar.perf._histogram import Histogram

FILL_WINDOW = 1000  # sends in flight while filling the input topic
PROGRESS_EVERY_S = 1.0


@dataclass(frozen=True, slots=True, kw_only=True)
class TxnOptions:
    service_url: str
    topic: str
    concurrency: int
    transactions: int
    size_bytes: int
    timeout_ms: int
    json: bool
    progress: bool


def add_txn_parser(kinds: Any, fmt: type[argparse.HelpFormatter]) -> None:
    p = kinds.add_parser("txn", help="transactions/s: open, produce 1, consume+ack 1, commit", formatter_class=fmt)
    p.add_argument("topic", nargs="?", default="persistent://public/default/perf-txn",
                   help="topic name prefix (NAME-in and NAME-out are used; fresh names per run)")
    p.add_argument("-u", "--service-url", default="pulsar://localhost:6650", help="broker URL")
    p.add_argument("-c", "--concurrency", type=int, default=1, help="transactions in flight at once")
    p.add_argument("-m", "--transactions", type=int, default=1000, help="transactions to run")
    p.add_argument("-s", "--size", dest="size_bytes", type=int, default=100, help="message bytes")
    p.add_argument("--txn-timeout-ms", dest="timeout_ms", type=int, default=60_000, help="each txn's timeout")
    p.add_argument("--json", action="store_true", help="print the summary as JSON on stdout")
    p.add_argument("--no-progress", dest="progress", action="store_false", help="no per-second line on stderr")


def txn_options(args: argparse.Namespace) -> TxnOptions:
    options = TxnOptions(
        service_url=args.service_url, topic=args.topic, concurrency=args.concurrency,
        transactions=args.transactions, size_bytes=args.size_bytes, timeout_ms=args.timeout_ms,
        json=args.json, progress=args.progress,
    )
    if not (1 <= options.concurrency <= 10_000 and 1 <= options.transactions <= 10_000_000):
        raise ValueError("--concurrency must be within 1..10000 and --transactions within 1..10000000")
    if options.size_bytes < 1 or options.timeout_ms < 1:
        raise ValueError("--size and --txn-timeout-ms must be >= 1")
    return options


def run_txn(options: TxnOptions, *, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    summary = asyncio.run(_run(options, err))
    if options.json:
        print(json.dumps(summary, indent=2), file=out)
    else:
        print(f"magnetar perf txn: {summary['transactions']} transactions, concurrency {options.concurrency}: "
              f"{summary['txn_per_s']:,.1f} txn/s, latency p50 {summary['p50_ms']:.2f} p99 {summary['p99_ms']:.2f} "
              f"p999 {summary['p999_ms']:.2f} ms, commit p50 {summary['commit_p50_ms']:.2f} ms, "
              f"errors {summary['errors']}", file=out)
    return 0 if summary["errors"] == 0 else 1


async def _run(options: TxnOptions, err: TextIO) -> dict[str, Any]:
    from magnetar.client import Client  # only when a run needs it

    run_id = uuid.uuid4().hex[:8]
    source, sink = f"{options.topic}-{run_id}-in", f"{options.topic}-{run_id}-out"
    payload = b"x" * options.size_bytes
    async with Client(options.service_url) as client:
        filler = await client.create_producer(source, batching=True)
        for start in range(0, options.transactions, FILL_WINDOW):  # bounded window of sends in flight
            count = min(FILL_WINDOW, options.transactions - start)
            await asyncio.gather(*(filler.send_nowait(payload) for _ in range(count)))
        consumer = await client.subscribe(source, "perf-txn", subscription_type="shared",
                                          initial_position="earliest")
        producer = await client.create_producer(sink)
        histogram, commits, counts = Histogram(), Histogram(), {"done": 0, "errors": 0}
        todo = iter(range(options.transactions))
        start_s, start_cpu_s = time.perf_counter(), time.process_time()
        reporter = asyncio.create_task(_progress(counts, start_s, err)) if options.progress else None

        async def worker() -> None:
            for _ in todo:  # shared iterator: each transaction runs once
                if counts["errors"]:
                    return  # the first failure ends the run (it is reported, and the exit code says so)
                began = time.perf_counter()
                try:
                    txn = await client.new_transaction(options.timeout_ms)
                    await producer.send(payload, txn=txn)
                    msg = await consumer.receive(timeout_ms=30_000)
                    await consumer.acknowledge(msg, txn=txn)
                    committing = time.perf_counter()
                    await txn.commit()
                except Exception as exc:
                    counts["errors"] += 1
                    print(f"magnetar perf txn: {type(exc).__name__}: {exc}", file=err)
                    continue
                ended = time.perf_counter()
                histogram.record(int((ended - began) * 1_000_000))
                commits.record(int((ended - committing) * 1_000_000))
                counts["done"] += 1

        await asyncio.gather(*(worker() for _ in range(options.concurrency)))
        elapsed_s = time.perf_counter() - start_s
        cpu_s = time.process_time() - start_cpu_s
        if reporter is not None:
            reporter.cancel()
    summary, commit = histogram.summary(), commits.summary()
    return {
        "options": asdict(options),
        "transactions": counts["done"],
        "errors": counts["errors"],
        "elapsed_s": round(elapsed_s, 3),
        "txn_per_s": round(counts["done"] / elapsed_s, 1) if elapsed_s > 0 else 0.0,
        "p50_ms": summary.p50_ms,
        "p99_ms": summary.p99_ms,
        "p999_ms": summary.p999_ms,
        "commit_p50_ms": commit.p50_ms,
        "commit_p99_ms": commit.p99_ms,
        "client_cpu_us_per_txn": round(cpu_s * 1_000_000 / counts["done"], 1) if counts["done"] else 0.0,
    }


async def _progress(counts: dict[str, int], start_s: float, err: TextIO) -> None:
    last = 0
    while True:  # ends when the run cancels it
        await asyncio.sleep(PROGRESS_EVERY_S)
        done = counts["done"]
        print(f"[{time.perf_counter() - start_s:6.1f}s] txn {done - last:,.0f} txn/s "
              f"(total {done:,}, errors {counts['errors']})", file=err, flush=True)
        last = done
