"""Broker CPU per consumed message from a backlog, by ack mode, with the official client.

    .venv/bin/python bench/consume_acks.py [--messages 200000] [--repeats 3] [--modes cumulative individual]
                                           [--batching/--no-batching]

One ``magnetar standalone`` (fresh data directory, fsync on); for every run a fresh topic gets a backlog of
``--messages`` 1 KiB messages (``magnetar perf produce``, batched unless ``--no-batching``), then one
Exclusive consumer reads it all from the earliest position with ``magnetar perf consume --ack-mode MODE``
(``individual`` is the perf tool's default: ``consumer.acknowledge(msg)`` per message, which the official
client groups into ACK commands carrying many message ids). Only the consume phase is measured: broker
user+system CPU from ``/proc/<pid>/stat`` divided by the messages consumed. Modes alternate run by run, so
load from other jobs on the machine spreads over all of them; the table shows every run and the median.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.suite import cpu_s, perf  # noqa: E402
from tests.integration.broker_process import BrokerProcess  # noqa: E402


def consume_once(broker: BrokerProcess, topic: str, mode: str, messages: int, batching: bool) -> tuple[float, float]:
    """(broker CPU µs per consumed message, consumed msg/s) for one backlog consumed with ``mode``."""
    assert broker.proc is not None
    count = str(messages)
    perf(broker, "consume", topic, "-m", "1", "--test-duration", "0.5")  # the subscription keeps the backlog
    produce = ["-m", count, "-s", "1024", "--sample-every", "100", "--max-pending", "5000"]
    perf(broker, "produce", topic, *produce, *([] if batching else ["--no-batching"]))
    before = cpu_s(broker.proc.pid)
    document = perf(broker, "consume", topic, "-m", count, "--initial-position", "earliest",
                    "--ack-mode", mode, "-q", "5000")
    used = cpu_s(broker.proc.pid) - before
    flow = document["totals"]["consume"]
    return used / flow["messages"] * 1e6, flow["msg_per_s"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--modes", nargs="+", default=["cumulative", "individual"])
    parser.add_argument("--batching", action=argparse.BooleanOptionalAction, default=True)
    args = parser.parse_args()
    results: dict[str, list[tuple[float, float]]] = {m: [] for m in args.modes}
    with tempfile.TemporaryDirectory(prefix="magnetar-consume-acks-") as tmp:
        broker = BrokerProcess(Path(tmp) / "data").start()
        try:
            for run in range(args.repeats):
                for mode in args.modes:
                    figures = consume_once(broker, f"acks-{mode}-{run}", mode, args.messages, args.batching)
                    results[mode].append(figures)
                    print(f"{mode} run {run + 1}: {figures[0]:.2f} µs/msg broker CPU, {figures[1]:,.0f} msg/s",
                          flush=True)
        finally:
            broker.kill()
    print(f"\n{args.messages:,} x 1 KiB, {'batched' if args.batching else 'unbatched'} backlog, official client")
    print("| ack mode | broker CPU µs/msg (median) | runs | msg/s (median) |")
    print("|---|---|---|---|")
    for mode, runs in results.items():
        cpu = [r[0] for r in runs]
        print(f"| {mode} | {statistics.median(cpu):.2f} | {', '.join(f'{c:.2f}' for c in cpu)} "
              f"| {statistics.median(r[1] for r in runs):,.0f} |")


if __name__ == "__main__":
    main()
