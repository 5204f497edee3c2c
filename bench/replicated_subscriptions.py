"""Replicated subscriptions (PIP-33): duplicates after a failover and the snapshot overhead.

    .venv/bin/python bench/replicated_subscriptions.py [--rate 200] [--seconds 10] [--frequencies 1000,200]

For each snapshot frequency, two fresh ``magnetar standalone`` processes ``a`` and ``b`` replicating one
topic, driven by the official client: a producer in ``a`` sends ``--rate`` msg/s (unbatched) for
``--seconds`` s while a consumer in ``a`` with ``replicate_subscription_state_enabled`` receives and acks
each message. At 70 % of the run the consumer stops, waits two snapshot intervals (the update's travel),
and fails over to ``b`` with the same subscription name; it receives to the end. Printed side by side:

* duplicates: messages received in ``b`` that were already acknowledged in ``a``, beside the rate times
  the interval (what PIP-33 promises: about one interval of traffic); lost messages (must be 0);
* overhead: marker entries stored per second in the topic of ``a`` and of ``b`` (entries minus messages).

Wall-clock figures of this machine; not a timed test.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pulsar

from tests.integration.replication.geo import Clusters

RECEIVE_TIMEOUT_MS = 30_000


def client(url: str) -> pulsar.Client:
    return pulsar.Client(url, operation_timeout_seconds=30, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))


def subscribe(c: pulsar.Client, topic: str) -> pulsar.Consumer:
    return c.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest,
                       replicate_subscription_state_enabled=True)


def entries(geo: Clusters, cluster: str, path: str) -> int:
    return int(geo.internal_stats(cluster, path)["numberOfEntries"])


def run(frequency_ms: int, rate: int, seconds: int) -> dict[str, float]:
    root = Path(tempfile.mkdtemp(prefix="rsub-bench-"))
    geo = Clusters(root, ("a", "b"), "--set", f"replicatedSubscriptionsSnapshotFrequencyMillis={frequency_ms}")
    geo.start()
    try:
        ns = geo.namespace("bench", ["a", "b"])
        path = f"{ns}/t"
        topic = f"persistent://{path}"
        count, stop_at = rate * seconds, int(rate * seconds * 0.7)
        ca, cb = client(geo["a"].url), client(geo["b"].url)
        consumer = subscribe(ca, topic)
        acked: list[int] = []

        def consume() -> None:
            for _ in range(stop_at):
                msg = consumer.receive(timeout_millis=RECEIVE_TIMEOUT_MS)
                consumer.acknowledge(msg)
                acked.append(int(msg.data()))

        thread = threading.Thread(target=consume)
        thread.start()
        producer = ca.create_producer(topic, batching_enabled=False, block_if_queue_full=True)
        start = time.monotonic()
        for i in range(count):
            time.sleep(max(0.0, start + i / rate - time.monotonic()))  # pacing the producer
            producer.send_async(str(i).encode(), None)
        producer.flush()
        elapsed = time.monotonic() - start
        thread.join()
        consumer.close()
        time.sleep(2 * frequency_ms / 1000)  # the last update travels to b
        consumer = subscribe(cb, topic)
        got: list[int] = []
        while not got or got[-1] != count - 1:
            msg = consumer.receive(timeout_millis=RECEIVE_TIMEOUT_MS)
            consumer.acknowledge(msg)
            got.append(int(msg.data()))
        done = set(acked)
        markers_a = entries(geo, "a", path) - count
        markers_b = entries(geo, "b", path) - count
        ca.close()
        cb.close()
        return {
            "duplicates": float(len([m for m in got if m in done])),
            "lost": float(len(set(range(count)) - done - set(got))),
            "expected": rate * frequency_ms / 1000,
            "markers_a_per_s": markers_a / elapsed,
            "markers_b_per_s": markers_b / elapsed,
        }
    finally:
        geo.kill_all()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=int, default=200)
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--frequencies", default="1000,200")
    args = parser.parse_args()
    print(f"{args.rate} msg/s for {args.seconds} s, failover a -> b at 70 %")
    print("| snapshot frequency | duplicates | rate x interval | lost | marker entries/s in a | in b |")
    print("|---|---|---|---|---|---|")
    for frequency in (int(f) for f in args.frequencies.split(",")):
        r = run(frequency, args.rate, args.seconds)
        print(f"| {frequency} ms | {r['duplicates']:.0f} | {r['expected']:.0f} | {r['lost']:.0f} | "
              f"{r['markers_a_per_s']:.1f} | {r['markers_b_per_s']:.1f} |", flush=True)


if __name__ == "__main__":
    main()
