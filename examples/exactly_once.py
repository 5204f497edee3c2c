"""Exactly-once consume-transform-produce with transactions (magnetar.client; Pulsar's PIP-31).

Each input message is transformed and its result produced in the same transaction that acknowledges the
input. The commit makes both visible at once; an abort (or a crash, or the transaction's timeout) makes
neither happen, so the broker hands the input out again and it is processed anew. Whatever fails (this
process, the broker, the network), each input yields its output exactly once on the output topic.

    python examples/exactly_once.py --service-url pulsar://localhost:6650 --input orders --output totals

It stops once no input has arrived for ``--idle-ms``; run it again (or keep it running) to go on.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import sys

from magnetar.client import Client, Consumer, Message, MultiTopicConsumer, PartitionedProducer, Producer, errors

log = logging.getLogger("exactly_once")
RESTARTS_MAX = 30
RESTART_DELAY_S = 0.5


def transform(data: bytes) -> bytes:
    return data.upper()


async def process_one(client: Client, consumer: Consumer | MultiTopicConsumer, producer: Producer | PartitionedProducer,
                      msg: Message, txn_timeout_ms: int) -> bool:
    """One input in one transaction; True once committed (False: nothing of it happened, it comes back)."""
    try:
        async with client.transaction(timeout_ms=txn_timeout_ms) as txn:
            await producer.send(transform(msg.data), key=msg.key, properties={"source": str(msg.message_id)},
                                txn=txn)
            await consumer.acknowledge(msg, txn=txn)
        return True
    except errors.PulsarClientError as exc:
        # aborted, timed out, or undecided when the broker went away: the coordinator settles it; if it did
        # not commit, the input is redelivered (after the transaction's timeout at the latest)
        log.warning("transaction for %s did not commit here: %r", msg.message_id, exc)
        return False


async def run(service_url: str, source: str, sink: str, subscription: str, *, idle_ms: int,
              txn_timeout_ms: int) -> int:
    """Process until the input stays idle for ``idle_ms``; returns how many transactions committed."""
    committed = 0
    async with Client(service_url, operation_timeout_ms=30_000) as client:
        consumer = await client.subscribe(source, subscription, subscription_type="exclusive",
                                          initial_position="earliest")
        producer = await client.create_producer(sink)
        while True:  # ends when the input is idle
            try:
                msg = await consumer.receive(timeout_ms=idle_ms)
            except errors.OperationTimeout:
                return committed
            if await process_one(client, consumer, producer, msg, txn_timeout_ms):
                committed += 1
            else:
                # ask for what is unacknowledged again (a message still held by an open txn is not resent);
                # while reconnecting this refuses, and the broker resends everything unacknowledged anyway
                with contextlib.suppress(errors.PulsarClientError):
                    consumer.redeliver_unacknowledged_messages()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--service-url", default="pulsar://localhost:6650")
    parser.add_argument("--input", required=True, help="topic to consume")
    parser.add_argument("--output", required=True, help="topic to produce the results to")
    parser.add_argument("--subscription", default="exactly-once")
    parser.add_argument("--idle-ms", type=int, default=10_000, help="stop after this long without input")
    parser.add_argument("--txn-timeout-ms", type=int, default=5_000, help="a stuck transaction aborts after this")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    committed = asyncio.run(run_with_restarts(args.service_url, args.input, args.output, args.subscription,
                                              idle_ms=args.idle_ms, txn_timeout_ms=args.txn_timeout_ms))
    print(f"committed {committed} transactions", flush=True)
    return 0


async def run_with_restarts(service_url: str, source: str, sink: str, subscription: str, *, idle_ms: int,
                            txn_timeout_ms: int) -> int:
    """``run``, started again with a new client when the broker could not be reached (as a supervisor would)."""
    committed = 0
    for attempt in range(RESTARTS_MAX):
        try:
            return committed + await run(service_url, source, sink, subscription, idle_ms=idle_ms,
                                         txn_timeout_ms=txn_timeout_ms)
        except errors.PulsarClientError as exc:
            log.warning("attempt %d stopped (%r); starting again", attempt + 1, exc)
            await asyncio.sleep(RESTART_DELAY_S)
    raise SystemExit(f"gave up after {RESTARTS_MAX} attempts")


if __name__ == "__main__":
    sys.exit(main())
