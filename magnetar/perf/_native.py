"""Drive the broker with ``magnetar.client`` on its own event loop (uvloop when installed) in the driver thread.

One task per producer paces ``send_nowait`` inside a window of ``max_pending`` and records send → receipt
latency as each future completes; one task per consumer awaits ``receive`` and records end-to-end latency.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from typing import Any

from magnetar.client import Client
from magnetar.client.errors import OperationTimeout
from magnetar.perf._flows import CUMULATIVE_ACK_EVERY, DRAIN_TIMEOUT_S, RECEIVE_POLL_MS, Flows, rate_share, share
from magnetar.perf._options import PerfOptions
from magnetar.perf._pacing import Pacer, filler, latency_us, stamped
from magnetar.perf._recorder import Recorder


def run_native(options: PerfOptions, flows: Flows) -> None:
    try:
        import uvloop
    except ImportError:
        asyncio.run(_main(options, flows))
    else:
        uvloop.run(_main(options, flows))


async def _main(options: PerfOptions, flows: Flows) -> None:
    async with Client(options.service_url) as client:
        consumers = [
            await client.subscribe(topic, options.subscription, subscription_type=options.subscription_type,
                                   initial_position=options.initial_position,
                                   receiver_queue_size=options.receiver_queue_size)
            for topic in options.topic_names() for _ in range(options.num_consumers)
        ] if options.verb != "produce" else []
        producers = [
            await client.create_producer(
                topic, batching=options.batching, batching_max_messages=options.batch_max_messages,
                batching_max_bytes=options.batch_max_bytes, batching_max_delay_ms=max(1, round(options.batch_delay_ms)),
                compression=options.compression, max_pending_messages=options.max_pending,
            )
            for topic in options.topic_names() for _ in range(options.num_producers)
        ] if options.verb != "consume" else []
        for producer in producers:
            await _warm_up(producer, options)
        flows.started.set()
        await asyncio.to_thread(flows.gate.wait)
        tasks = [_consume(c, options, flows) for c in consumers]
        tasks += [_produce(p, i, len(producers), options, flows) for i, p in enumerate(producers)]
        await asyncio.gather(*tasks)


async def _warm_up(producer: Any, options: PerfOptions) -> None:
    body = filler(options.size_bytes)
    for _ in range(options.warmup_messages):
        await producer.send(body) if producer.pending_messages >= options.max_pending else producer.send_nowait(body)
    await producer.flush()


async def _produce(producer: Any, index: int, count: int, options: PerfOptions, flows: Flows) -> None:
    limit = share(options.messages, count, index)
    pacer = Pacer(rate_share(options, count), time.perf_counter())
    body = filler(options.size_bytes)
    every = options.sample_every
    recorder = flows.publish
    window: deque[tuple[asyncio.Future[Any], int, int]] = deque()  # (future, sent ns, messages it answers)
    sent = unsampled = 0
    while (limit == 0 or sent < limit) and not flows.stop.is_set():
        wait_s = pacer.wait_s(time.perf_counter())
        if wait_s:
            await asyncio.sleep(wait_s)
        if producer.pending_messages >= options.max_pending and window:
            await asyncio.wait([window[0][0]])
        _settle(window, recorder, options.size_bytes)
        sent += 1
        sent_ns = time.perf_counter_ns()
        future = producer.send_nowait(stamped(body))
        if sent % every and sent != limit:
            unsampled += 1
            continue
        window.append((future, sent_ns, unsampled + 1))
        unsampled = 0
    await producer.flush()
    if window:
        await asyncio.wait([f for f, _, _ in window], timeout=DRAIN_TIMEOUT_S)
    _settle(window, recorder, options.size_bytes)
    recorder.error(len(window))
    if unsampled:
        recorder.record_many(unsampled, unsampled * options.size_bytes, [])


def _settle(window: deque[tuple[asyncio.Future[Any], int, int]], recorder: Recorder, size_bytes: int) -> None:
    """Record the sampled sends answered so far, in send order (receipts arrive in that order)."""
    while window and window[0][0].done():
        future, sent_ns, messages = window.popleft()
        if future.cancelled() or future.exception() is not None:
            recorder.error(messages)
        else:
            recorder.record_many(messages, messages * size_bytes, [(time.perf_counter_ns() - sent_ns) // 1000])


async def _consume(consumer: Any, options: PerfOptions, flows: Flows) -> None:
    recorder = flows.consume
    received = 0
    last: Any = None
    while not flows.stop.is_set() and not flows.consumed_enough(options):
        try:
            msg = await consumer.receive(RECEIVE_POLL_MS)
        except OperationTimeout:
            continue
        last = msg
        recorder.record(len(msg.data), latency_us(msg.data, msg.publish_time_ms, time.time_ns()))
        received += 1
        if options.ack_mode == "individual":
            await consumer.acknowledge(msg)
        elif options.ack_mode == "cumulative" and received % CUMULATIVE_ACK_EVERY == 0:
            await consumer.acknowledge_cumulative(msg)
    if options.ack_mode == "cumulative" and last is not None:
        await consumer.acknowledge_cumulative(last)
