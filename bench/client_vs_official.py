"""magnetar.client against the official pulsar-client: produce and consume throughput on one fresh broker.

    .venv/bin/python bench/client_vs_official.py [--messages 20000] [--size 1024] [--batching/--no-batching]

One ``magnetar standalone`` (fresh data directory, fsync off so the client, not the disk, is measured)
serves both clients, each on its own topic. Produce: pipelined sends (send_nowait / send_async), then
flush. Consume: a backlog of the same size read with receive + individual ack.
Figures: msg/s and MB/s for each side, side by side.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import threading
import time
from pathlib import Path

import pulsar

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from magnetar.client import Client, MessageId, Producer
from tests.integration.broker_process import BrokerProcess

RECEIVE_TIMEOUT_MS = 30_000


async def magnetar_run(url: str, topic: str, messages: int, size: int, batching: bool) -> tuple[float, float]:
    payload = b"x" * size
    async with Client(url) as client:
        consumer = await client.subscribe(topic, "bench", initial_position="earliest")
        producer = await client.create_producer(topic, batching=batching, max_pending_messages=5000)
        assert isinstance(producer, Producer)
        start = time.perf_counter()
        window: list[asyncio.Future[MessageId]] = []
        for _ in range(messages):
            if producer.pending_messages >= 4000:  # stay under max_pending_messages
                await asyncio.wait(window)
                window = []
            window.append(producer.send_nowait(payload))
        await producer.flush()
        produce_s = time.perf_counter() - start
        start = time.perf_counter()
        for _ in range(messages):
            msg = await consumer.receive(RECEIVE_TIMEOUT_MS)
            await consumer.acknowledge(msg)
        consume_s = time.perf_counter() - start
    return produce_s, consume_s


def official_run(url: str, topic: str, messages: int, size: int, batching: bool) -> tuple[float, float]:
    payload = b"x" * size
    client = pulsar.Client(url, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
    try:
        consumer = client.subscribe(topic, "bench", initial_position=pulsar.InitialPosition.Earliest)
        producer = client.create_producer(
            topic, batching_enabled=batching, max_pending_messages=5000, block_if_queue_full=True
        )
        done = threading.Event()
        acked = [0]

        def on_sent(_res: object, _mid: object) -> None:
            acked[0] += 1
            if acked[0] == messages:
                done.set()

        start = time.perf_counter()
        for _ in range(messages):
            producer.send_async(payload, on_sent)
        producer.flush()
        done.wait(60)
        produce_s = time.perf_counter() - start
        start = time.perf_counter()
        for _ in range(messages):
            consumer.acknowledge(consumer.receive(RECEIVE_TIMEOUT_MS))
        consume_s = time.perf_counter() - start
    finally:
        client.close()
    return produce_s, consume_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--batching", action=argparse.BooleanOptionalAction, default=True)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        broker = BrokerProcess(Path(tmp), extra_args=("--set", "journalSyncData=false")).start()
        try:
            results = {
                "magnetar.client": asyncio.run(
                    magnetar_run(broker.url, "bench-magnetar", args.messages, args.size, args.batching)
                ),
                "pulsar-client 3.13": official_run(broker.url, "bench-official", args.messages, args.size,
                                                   args.batching),
            }
        finally:
            broker.kill()
    mb = args.messages * args.size / 1e6
    print(f"{args.messages} messages of {args.size} B, batching={'on' if args.batching else 'off'}")
    print(f"{'client':<20} {'produce msg/s':>14} {'produce MB/s':>13} {'consume msg/s':>14} {'consume MB/s':>13}")
    for name, (produce_s, consume_s) in results.items():
        print(f"{name:<20} {args.messages / produce_s:>14,.0f} {mb / produce_s:>13.1f} "
              f"{args.messages / consume_s:>14,.0f} {mb / consume_s:>13.1f}")


if __name__ == "__main__":
    main()
