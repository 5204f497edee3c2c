"""Geo-replication throughput and delay between two clusters on loopback (separate processes).

    .venv/bin/python bench/replication.py [--messages 20000] [--size 100] [--rate 1000] [--seconds 10]

Two ``magnetar standalone`` processes, ``a`` and ``b`` (each its own data dir and clusterName), registered
with each other; a namespace replicating to both. Driven by the official client. One run, side by side:

* live A→B, unbatched and batched: produce ``--messages`` in ``a`` as fast as the client goes while a
  consumer on ``b`` receives; msg/s from the first send to the last receive on ``b``;
* backlog drain, unbatched and batched: ``b`` is SIGKILLed, ``--messages`` are produced in ``a`` (the
  replication cursor holds them), ``b`` restarts; msg/s from the replicator's reconnection to an empty
  replication cursor, polling ``a``'s topic stats every 20 ms (pure replication: read, send, receipts);
* delay at ``--rate`` msg/s for ``--seconds`` s (unbatched): per message, receive time on ``b`` minus publish
  time in ``a`` (one machine, one clock): p50 / p99 / max, beside the same messages' local delay to a
  consumer on ``a`` (the baseline, measured at the same moment).

Wall-clock figures of this machine; not a timed test.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pulsar

from tests.integration.replication.geo import Clusters

RECEIVE_TIMEOUT_MS = 60_000
POLL_S = 0.02
BATCH_MESSAGES = 100  # messages per batch entry in the batched runs
BATCHED_FACTOR = 5  # the batched runs send this many times --messages (entries are what replicate)


def client(url: str) -> pulsar.Client:
    return pulsar.Client(url, operation_timeout_seconds=30, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))


def produce(url: str, topic: str, count: int, size: int, batched: bool) -> None:
    c = client(url)
    try:
        producer = c.create_producer(topic, batching_enabled=batched, batching_max_messages=BATCH_MESSAGES,
                                     batching_max_publish_delay_ms=5, max_pending_messages=5000,
                                     block_if_queue_full=True)
        body = b"x" * size
        for _ in range(count):
            producer.send_async(body, None)
        producer.flush()
    finally:
        c.close()


def drain(consumer: pulsar.Consumer, count: int) -> None:
    for _ in range(count):
        consumer.acknowledge(consumer.receive(timeout_millis=RECEIVE_TIMEOUT_MS))


def live(geo: Clusters, ns: str, count: int, size: int, batched: bool) -> float:
    topic = f"persistent://{ns}/live-{'batched' if batched else 'single'}"
    cb = client(geo["b"].url)
    try:
        consumer = cb.subscribe(topic, "bench", initial_position=pulsar.InitialPosition.Earliest,
                                receiver_queue_size=5000)
        start = time.perf_counter()
        produce(geo["a"].url, topic, count, size, batched)
        drain(consumer, count)
        return count / (time.perf_counter() - start)
    finally:
        cb.close()


def backlog(geo: Clusters, ns: str, count: int, size: int, batched: bool) -> float:
    topic = f"persistent://{ns}/backlog-{'batched' if batched else 'single'}"
    cb = client(geo["b"].url)
    cb.subscribe(topic, "bench", initial_position=pulsar.InitialPosition.Earliest).close()
    cb.close()
    geo["b"].kill()
    produce(geo["a"].url, topic, count, size, batched)
    geo["b"].start()
    path = topic.removeprefix("persistent://")

    def replication() -> dict[str, Any]:
        return dict(geo.stats("a", path)["replication"]["b"])

    deadline = time.monotonic() + RECEIVE_TIMEOUT_MS / 1000
    while not replication()["connected"] and time.monotonic() < deadline:  # the reconnect backoff runs out
        time.sleep(POLL_S)
    start = time.perf_counter()  # from the replicator's reconnection to an empty cursor: pure replication
    while replication()["replicationBacklog"] > 0 and time.monotonic() < deadline:
        time.sleep(POLL_S)
    return count / (time.perf_counter() - start)


def _take(consumer: pulsar.Consumer, into: list[float], timeout_ms: int) -> bool:
    try:
        msg = consumer.receive(timeout_millis=timeout_ms)
    except pulsar.Timeout:
        return False
    into.append(time.time() * 1000 - msg.publish_timestamp())
    consumer.acknowledge(msg)
    return True


def delay(geo: Clusters, ns: str, rate: int, seconds: int, size: int) -> tuple[list[float], list[float]]:
    """Per message: receive time minus publish time on ``b`` (replicated) and on ``a`` (local, the baseline
    measured at the same moment)."""
    topic = f"persistent://{ns}/delay"
    total = rate * seconds
    ca, cb = client(geo["a"].url), client(geo["b"].url)
    try:
        remote = cb.subscribe(topic, "bench", initial_position=pulsar.InitialPosition.Earliest)
        local = ca.subscribe(topic, "bench", initial_position=pulsar.InitialPosition.Earliest)
        producer = ca.create_producer(topic, batching_enabled=False, max_pending_messages=5000)
        body = b"x" * size
        start = time.perf_counter()
        remote_ms: list[float] = []
        local_ms: list[float] = []
        for sent in range(total):  # paced by the clock
            due = start + sent / rate
            now = time.perf_counter()
            if now < due:
                time.sleep(due - now)  # pacing the producer, not synchronisation
            producer.send_async(body, None)
            while _take(remote, remote_ms, 0) or _take(local, local_ms, 0):  # what has arrived, no waiting
                pass
        producer.flush()
        while len(remote_ms) < total:
            assert _take(remote, remote_ms, RECEIVE_TIMEOUT_MS), "replicated messages missing"
        while len(local_ms) < total:
            assert _take(local, local_ms, RECEIVE_TIMEOUT_MS), "local messages missing"
        return remote_ms, local_ms
    finally:
        ca.close()
        cb.close()


def _percentiles(values: list[float]) -> str:
    ordered = sorted(values)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return f"p50 {statistics.median(ordered):.1f} ms, p99 {p99:.1f} ms, max {ordered[-1]:.1f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--size", type=int, default=100, help="message bytes")
    parser.add_argument("--rate", type=int, default=1000, help="msg/s for the delay run")
    parser.add_argument("--seconds", type=int, default=10, help="length of the delay run")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="magnetar-geo-bench-") as tmp:
        geo = Clusters(Path(tmp), ("a", "b")).start()
        try:
            ns = geo.namespace("bench", ["a", "b"])
            rows = []
            for batched in (False, True):
                label = f"batched ({BATCH_MESSAGES}/entry)" if batched else "unbatched"
                count = args.messages * (BATCHED_FACTOR if batched else 1)
                rows.append((f"live A->B, {label}", count, live(geo, ns, count, args.size, batched)))
                rows.append((f"backlog drain, {label}", count, backlog(geo, ns, count, args.size, batched)))
            remote_ms, local_ms = delay(geo, ns, args.rate, args.seconds, args.size)
        finally:
            geo.kill_all()
    print(f"geo-replication on loopback, messages of {args.size} B (load average {os.getloadavg()[0]:.1f})")
    print(f"{'workload':<40} {'messages':>9} {'msg/s':>10}")
    for name, count, value in rows:
        print(f"{name:<40} {count:>9} {value:>10,.0f}")
    print(f"at {args.rate} msg/s for {args.seconds} s ({len(remote_ms)} messages), publish to receive:")
    print(f"  replicated, consumer on b:     {_percentiles(remote_ms)}")
    print(f"  local baseline, consumer on a: {_percentiles(local_ms)}")


if __name__ == "__main__":
    main()
