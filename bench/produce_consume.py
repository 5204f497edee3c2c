"""Produce/consume throughput and publish latency against a fresh ``magnetar standalone``, driven by
the official ``pulsar-client``, for several configurations side by side in one run.

    .venv/bin/python bench/produce_consume.py [--messages 20000] [--size 1024]

Each configuration starts its own broker (fresh data directory) so runs do not disturb each other.
Figures: publish msg/s and MB/s, publish latency p50/p99/p999 (send → receipt, per message), consume
msg/s from a backlog, broker RSS after the run.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pulsar

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.integration.broker_process import BrokerProcess

RECEIVE_TIMEOUT_MS = 30_000


@dataclass(frozen=True)
class Workload:
    name: str
    batching: bool
    sync_data: bool


WORKLOADS = [
    Workload("batched, fsync", batching=True, sync_data=True),
    Workload("batched, no fsync", batching=True, sync_data=False),
    Workload("unbatched, fsync", batching=False, sync_data=True),
    Workload("unbatched, no fsync", batching=False, sync_data=False),
]


def percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    index = min(len(sorted_values) - 1, int(q * len(sorted_values)))
    return sorted_values[index]


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def run(workload: Workload, messages: int, size: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        args = ("--set", f"journalSyncData={str(workload.sync_data).lower()}")
        broker = BrokerProcess(Path(tmp) / "data", extra_args=args)
        broker.start()
        try:
            return measure(broker, workload, messages, size)
        finally:
            broker.kill()


def measure(broker: BrokerProcess, workload: Workload, messages: int, size: int) -> dict[str, float]:
    client = pulsar.Client(broker.url, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
    topic = "bench-topic"
    consumer = client.subscribe(topic, "bench", initial_position=pulsar.InitialPosition.Earliest,
                                receiver_queue_size=5000)
    producer = client.create_producer(
        topic,
        batching_enabled=workload.batching,
        batching_max_messages=1000,
        batching_max_publish_delay_ms=5,
        max_pending_messages=5000,
        block_if_queue_full=True,
    )
    payload = b"x" * size
    latencies: list[float] = []
    done = threading.Event()
    lock = threading.Lock()
    acked = [0]

    def sent(started: float):  # type: ignore[no-untyped-def]
        def callback(result: pulsar.Result, _msg_id: pulsar.MessageId) -> None:
            elapsed = time.perf_counter() - started
            with lock:
                latencies.append(elapsed)
                acked[0] += 1
                if acked[0] == messages:
                    done.set()
        return callback

    t0 = time.perf_counter()
    for _ in range(messages):
        producer.send_async(payload, sent(time.perf_counter()))
    producer.flush()
    if not done.wait(120):
        raise RuntimeError("not every send was acknowledged")
    publish_s = time.perf_counter() - t0

    t1 = time.perf_counter()
    for _ in range(messages):
        msg = consumer.receive(RECEIVE_TIMEOUT_MS)
        consumer.acknowledge(msg)
    consume_s = time.perf_counter() - t1
    assert broker.proc is not None
    rss = rss_mib(broker.proc.pid)
    client.close()
    latencies.sort()
    return {
        "publish msg/s": messages / publish_s,
        "publish MB/s": messages * size / publish_s / 1e6,
        "p50 ms": percentile(latencies, 0.50) * 1000,
        "p99 ms": percentile(latencies, 0.99) * 1000,
        "p999 ms": percentile(latencies, 0.999) * 1000,
        "consume msg/s": messages / consume_s,
        "broker RSS MiB": rss,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--size", type=int, default=1024)
    args = parser.parse_args()
    results = [(w, run(w, args.messages, args.size)) for w in WORKLOADS]
    columns = list(results[0][1])
    print(f"\n{args.messages} messages of {args.size} bytes, official pulsar-client, one producer, one consumer")
    print(f"{'workload':<22}" + "".join(f"{c:>16}" for c in columns))
    for workload, figures in results:
        print(f"{workload.name:<22}" + "".join(f"{figures[c]:>16.2f}" for c in columns))


if __name__ == "__main__":
    main()
