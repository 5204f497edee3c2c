"""Drive the broker with the official ``pulsar-client`` (imported lazily: only this driver needs it).

One thread per producer paces ``send_async`` and records send → receipt latency in the callback; one
thread per consumer loops on ``receive`` and records end-to-end latency from the payload stamp (or the
publish time). The C++ client does the I/O on its own threads.
"""

from __future__ import annotations

import functools
import threading
import time
from typing import Any

from magnetar.perf._flows import CUMULATIVE_ACK_EVERY, DRAIN_TIMEOUT_S, RECEIVE_POLL_MS, Flows, rate_share, share
from magnetar.perf._options import PerfOptions
from magnetar.perf._pacing import Pacer, filler, latency_us, stamped
from magnetar.perf._recorder import Recorder

_CONSUMER_TYPES = {"exclusive": "Exclusive", "shared": "Shared", "failover": "Failover", "key_shared": "KeyShared"}
_COMPRESSIONS = {"none": "NONE", "lz4": "LZ4", "zlib": "ZLib", "zstd": "ZSTD", "snappy": "SNAPPY"}


class _Outstanding:
    """Sends not yet answered, so the driver can wait (bounded) for the last receipts."""

    def __init__(self) -> None:
        self._count = 0
        self._zero = threading.Condition()

    def add(self) -> None:
        with self._zero:
            self._count += 1

    def done(self) -> None:
        with self._zero:
            self._count -= 1
            if self._count == 0:
                self._zero.notify_all()

    def wait(self, timeout_s: float) -> bool:
        with self._zero:
            return self._zero.wait_for(lambda: self._count == 0, timeout_s)


def run_official(options: PerfOptions, flows: Flows) -> None:
    import pulsar

    client = pulsar.Client(options.service_url, io_threads=options.io_threads,
                           logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
    try:
        consumers = _subscribe_all(pulsar, client, options) if options.verb != "produce" else []
        producers = _create_producers(pulsar, client, options) if options.verb != "consume" else []
        _warm_up(producers, options)
        threads = [threading.Thread(target=_consume_loop, args=(pulsar, c, options, flows), daemon=True)
                   for c in consumers]
        threads += [threading.Thread(target=_produce_loop, args=(pulsar, p, i, len(producers), options, flows),
                                     daemon=True) for i, p in enumerate(producers)]
        flows.started.set()
        flows.gate.wait()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        client.close()


def _subscribe_all(pulsar: Any, client: Any, options: PerfOptions) -> list[Any]:
    kind = getattr(pulsar.ConsumerType, _CONSUMER_TYPES[options.subscription_type])
    position = pulsar.InitialPosition.Earliest if options.initial_position == "earliest" else \
        pulsar.InitialPosition.Latest
    return [
        client.subscribe(topic, options.subscription, consumer_type=kind, initial_position=position,
                         receiver_queue_size=options.receiver_queue_size)
        for topic in options.topic_names() for _ in range(options.num_consumers)
    ]


def _create_producers(pulsar: Any, client: Any, options: PerfOptions) -> list[Any]:
    compression = getattr(pulsar.CompressionType, _COMPRESSIONS[options.compression])
    return [
        client.create_producer(
            topic, batching_enabled=options.batching, batching_max_messages=options.batch_max_messages,
            batching_max_allowed_size_in_bytes=options.batch_max_bytes,
            batching_max_publish_delay_ms=max(1, round(options.batch_delay_ms)),
            compression_type=compression, max_pending_messages=options.max_pending, block_if_queue_full=True,
        )
        for topic in options.topic_names() for _ in range(options.num_producers)
    ]


def _warm_up(producers: list[Any], options: PerfOptions) -> None:
    body = filler(options.size_bytes)
    for producer in producers:
        for _ in range(options.warmup_messages):
            producer.send_async(body, None)
        producer.flush()


def _produce_loop(pulsar: Any, producer: Any, index: int, count: int, options: PerfOptions, flows: Flows) -> None:
    limit = share(options.messages, count, index)
    pacer = Pacer(rate_share(options, count), time.perf_counter())
    body = filler(options.size_bytes)
    every = options.sample_every
    outstanding = _Outstanding()
    on_sent = functools.partial(_on_sent, pulsar.Result.Ok, flows.publish, options.size_bytes, outstanding)
    sent = unsampled = 0
    while (limit == 0 or sent < limit) and not flows.stop.is_set():
        wait_s = pacer.wait_s(time.perf_counter())
        if wait_s and flows.stop.wait(wait_s):
            break
        sent += 1
        if sent % every and sent != limit:
            producer.send_async(stamped(body), None)  # receipts come in order: the next sampled one counts it
            unsampled += 1
            continue
        outstanding.add()
        producer.send_async(stamped(body), functools.partial(on_sent, time.perf_counter_ns(), unsampled + 1))
        unsampled = 0
    producer.flush()
    if not outstanding.wait(DRAIN_TIMEOUT_S):
        flows.publish.error()
    if unsampled:  # stopped on time between samples: flush returned, so they are persisted
        flows.publish.record_many(unsampled, unsampled * options.size_bytes, [])


def _on_sent(ok: object, recorder: Recorder, size_bytes: int, outstanding: _Outstanding, sent_ns: int,
             messages: int, result: object, _msg_id: object) -> None:
    """Receipt of a sampled send: it also answers the ``messages - 1`` unsampled sends before it."""
    if result == ok:
        recorder.record_many(messages, messages * size_bytes, [(time.perf_counter_ns() - sent_ns) // 1000])
    else:
        recorder.error(messages)
    outstanding.done()


def _consume_loop(pulsar: Any, consumer: Any, options: PerfOptions, flows: Flows) -> None:
    recorder = flows.consume
    received = 0
    last: Any = None
    while not flows.stop.is_set() and not flows.consumed_enough(options):
        try:
            msg = consumer.receive(RECEIVE_POLL_MS)
        except pulsar.Timeout:
            continue
        last = msg
        data = msg.data()
        recorder.record(len(data), latency_us(data, msg.publish_timestamp(), time.time_ns()))
        received += 1
        if options.ack_mode == "individual":
            consumer.acknowledge(msg)
        elif options.ack_mode == "cumulative" and received % CUMULATIVE_ACK_EVERY == 0:
            consumer.acknowledge_cumulative(msg)
    if options.ack_mode == "cumulative" and last is not None:
        consumer.acknowledge_cumulative(last)
