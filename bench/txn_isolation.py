"""What transaction isolation costs a plain consumer, and how fast a topic's transaction buffer recovers.

    .venv/bin/python bench/txn_isolation.py [--messages 5000] [--txn-size 10] [--repeats 2]

One ``magnetar standalone``; three topics with the same number of messages: all plain; all in committed
transactions of ``--txn-size`` messages (a commit marker after each); half the transactions aborted (their
messages and markers are read and dropped by the broker). Each topic is drained by an official-client
consumer from the earliest message (best of ``--repeats`` fresh subscriptions), side by side. Then the
broker is SIGKILLed and restarted, and each topic's buffer recovery time (``recoverEndTime -
recoverStartTime`` in transactionBufferStats, loading the topic) is read. Prints a table and JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import pulsar  # noqa: E402

from magnetar.client import Client  # noqa: E402
from tests.integration.admin.http import call  # noqa: E402
from tests.integration.broker_process import BrokerProcess  # noqa: E402

TXNS_IN_FLIGHT = 16
RECEIVE_MS = 30_000


async def fill(url: str, topic: str, messages: int, txn_size: int, abort_every: int) -> None:
    """``messages`` messages; with ``txn_size`` > 0, in transactions (every ``abort_every``-th aborted)."""
    async with Client(url, operation_timeout_ms=30_000) as client:
        producer = await client.create_producer(topic)
        if txn_size <= 0:
            await asyncio.gather(*(producer.send(b"m%d" % i) for i in range(messages)))
            return

        async def one(index: int) -> None:
            txn = await client.new_transaction(timeout_ms=120_000)
            await asyncio.gather(*(producer.send(b"t%d-%d" % (index, i), txn=txn) for i in range(txn_size)))
            await (txn.abort() if abort_every and index % abort_every == 0 else txn.commit())

        count = messages // txn_size
        for start in range(0, count, TXNS_IN_FLIGHT):  # bounded: count / TXNS_IN_FLIGHT rounds
            await asyncio.gather(*(one(i) for i in range(start, min(start + TXNS_IN_FLIGHT, count))))


def drain(url: str, topic: str, expected: int) -> float:
    """Messages per second an official consumer receives from the earliest message."""
    client = pulsar.Client(url, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
    try:
        consumer = client.subscribe(topic, f"bench-{uuid.uuid4().hex[:6]}",
                                    initial_position=pulsar.InitialPosition.Earliest, receiver_queue_size=1000)
        began = time.perf_counter()
        for _ in range(expected):
            consumer.acknowledge(consumer.receive(timeout_millis=RECEIVE_MS))
        elapsed = time.perf_counter() - began
        consumer.close()
        return expected / elapsed
    finally:
        client.close()


def recovery_ms(broker: BrokerProcess, topic: str) -> int:
    local = topic.replace("persistent://", "")
    status, stats = call(broker.web_url, "GET", f"/admin/v3/transactions/transactionBufferStats/{local}")
    assert status == 200, stats
    return int(stats["recoverEndTime"]) - int(stats["recoverStartTime"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=5000)
    parser.add_argument("--txn-size", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    workloads = {"plain": (0, 0), "committed txns": (args.txn_size, 0), "half aborted": (args.txn_size, 2)}
    with tempfile.TemporaryDirectory() as data:
        broker = BrokerProcess(Path(data)).start()
        try:
            topics = {name: f"persistent://public/default/bench-iso-{uuid.uuid4().hex[:6]}" for name in workloads}
            for name, (size, abort_every) in workloads.items():
                asyncio.run(fill(broker.url, topics[name], args.messages, size, abort_every))
            visible = {name: args.messages // (2 if abort_every else 1) for name, (_, abort_every) in workloads.items()}
            rates = {name: max(drain(broker.url, topics[name], visible[name]) for _ in range(args.repeats))
                     for name in workloads}
            broker.kill()
            broker.start()
            recovered = {name: recovery_ms(broker, topics[name]) for name in workloads}
        finally:
            broker.kill()
    rows: list[dict[str, Any]] = [
        {"workload": name, "messages": args.messages, "delivered": visible[name],
         "deliveredPerSecond": round(rates[name]), "recoveryMsAfterSigkill": recovered[name]}
        for name in workloads
    ]
    print(f"{'workload':<16}{'stored':>8}{'delivered':>11}{'msg/s delivered':>17}{'TB recovery ms':>16}")
    for r in rows:
        print(f"{r['workload']:<16}{r['messages']:>8}{r['delivered']:>11}{r['deliveredPerSecond']:>17}"
              f"{r['recoveryMsAfterSigkill']:>16}")
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
