"""``Client``: the entry point that owns connections and creates producers, consumers and readers.

It pickles as its configuration only (URL and options); an unpickled client opens its own
connections on first use. Topic discovery (partitions, lookup) goes through ``_lookup``; each
producer/consumer manages its own reconnects. Knows nothing of frames.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncGenerator, Sequence
from dataclasses import replace
from typing import Any, Literal

from magnetar.client._config import BatchingConfig, ClientConfig, ConsumerConfig, DeadLetterPolicy, ProducerConfig
from magnetar.client._consumer import Consumer, ReceiveQueue
from magnetar.client._context import ClientContext
from magnetar.client._lookup import partition_count, topics_of_namespace
from magnetar.client._messages import EARLIEST, LATEST, Message, MessageId, full_topic_name, partition_name
from magnetar.client._partitioned import MultiTopicConsumer, PartitionedProducer
from magnetar.client._pool import ConnectionPool
from magnetar.client._producer import Producer
from magnetar.client._reader import Reader, reached_end
from magnetar.client._transaction import Coordinators, Transaction, TransactionScope
from magnetar.client.errors import AlreadyClosed, InvalidConfiguration
from magnetar.core.clock import Clock, SystemClock

__all__ = ["Client"]

StartAt = MessageId | Literal["earliest", "latest"]
DEFAULT_TXN_TIMEOUT_MS = 60_000


def _start_id(start: StartAt) -> MessageId:
    if isinstance(start, MessageId):
        return start
    if start == "earliest":
        return EARLIEST
    if start == "latest":
        return LATEST
    raise InvalidConfiguration(f"start must be a MessageId, 'earliest' or 'latest', not {start!r}")


class Client:
    """``async with Client("pulsar://localhost:6650") as client: ...``"""

    def __init__(self, service_url: str, *, clock: Clock | None = None, **options: Any) -> None:
        self.config = ClientConfig(service_url=service_url, **options)
        self._clock = clock or SystemClock()
        self._ctx: ClientContext | None = None
        self._closeables: list[Producer | PartitionedProducer | Consumer | MultiTopicConsumer | Reader] = []
        self._closed = False
        self._coordinators: Coordinators | None = None

    # ------------------------------------------------------------ pickling: configuration only

    def __getstate__(self) -> dict[str, Any]:
        return {"config": self.config}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.config = state["config"]
        self._clock = SystemClock()
        self._ctx = None
        self._closeables = []
        self._closed = False
        self._coordinators = None

    @property
    def _context(self) -> ClientContext:
        if self._closed:
            raise AlreadyClosed("client is closed")
        if self._ctx is None:
            self._ctx = ClientContext(self.config, ConnectionPool(self.config), self._clock)
        return self._ctx

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._closed:
            return
        for item in reversed(self._closeables):
            await item.close()
        self._closeables.clear()
        self._closed = True
        if self._ctx is not None:
            await self._ctx.pool.close()

    # ------------------------------------------------------------ transactions

    async def new_transaction(self, timeout_ms: int = DEFAULT_TXN_TIMEOUT_MS) -> Transaction:
        """Open a transaction; the coordinator aborts it if it is not ended within ``timeout_ms``."""
        ctx = self._context
        if self._coordinators is None:
            self._coordinators = Coordinators(ctx)
        return await self._coordinators.new_transaction(timeout_ms)

    async def transaction_of(self, txn_id: tuple[int, int], timeout_ms: int = DEFAULT_TXN_TIMEOUT_MS) -> Transaction:
        """A handle on a transaction opened elsewhere (another process), to commit or abort it by its id."""
        return Transaction(await self._coordinators_found(), txn_id, timeout_ms)

    async def transactions_available(self) -> bool:
        """Whether the broker runs transaction coordinators (``transactionCoordinatorEnabled``); asks once,
        without the retries that opening a transaction makes."""
        ctx = self._context
        if self._coordinators is None:
            self._coordinators = Coordinators(ctx)
        return await self._coordinators.available()

    async def _coordinators_found(self) -> Coordinators:
        ctx = self._context
        if self._coordinators is None:
            self._coordinators = Coordinators(ctx)
        await self._coordinators.discover()
        return self._coordinators

    def transaction(self, timeout_ms: int = DEFAULT_TXN_TIMEOUT_MS) -> TransactionScope:
        """``async with client.transaction() as txn:`` commits on a clean exit, aborts on an exception."""
        return TransactionScope(lambda: self.new_transaction(timeout_ms))

    # ------------------------------------------------------------ discovery

    async def get_topic_partitions(self, topic: str) -> list[str]:
        full = full_topic_name(topic)
        count = await partition_count(self._context.pool, self.config.service_url, full)
        return [partition_name(full, i) for i in range(count)] if count else [full]

    async def get_topics_of_namespace(self, namespace: str) -> list[str]:
        """Every persistent topic of ``tenant/namespace`` (partitions listed one by one)."""
        return await topics_of_namespace(self._context.pool, self.config.service_url, namespace)

    # ------------------------------------------------------------ producers

    async def create_producer(
        self,
        topic: str,
        *,
        batching: bool | BatchingConfig = False,
        batching_max_messages: int = 1000,
        batching_max_bytes: int = 128 * 1024,
        batching_max_delay_ms: int = 10,
        **options: Any,
    ) -> Producer | PartitionedProducer:
        """A producer; a ``PartitionedProducer`` (same API) when the topic has partitions."""
        if isinstance(batching, BatchingConfig):
            batch_config: BatchingConfig | None = batching
        elif batching:
            batch_config = BatchingConfig(
                max_messages=batching_max_messages, max_bytes=batching_max_bytes, max_delay_ms=batching_max_delay_ms
            )
        else:
            batch_config = None
        if "properties" in options:
            options["properties"] = tuple(dict(options["properties"]).items())
        full = full_topic_name(topic)
        config = ProducerConfig(topic=full, batching=batch_config, **options)
        ctx = self._context
        count = await partition_count(ctx.pool, self.config.service_url, full)
        if count == 0:
            producer = Producer(ctx, full, config)
            await producer.start()
            self._closeables.append(producer)
            return producer
        children = [Producer(ctx, partition_name(full, i), config, partition=i) for i in range(count)]
        try:
            for child in children:
                await child.start()
        except BaseException:
            for child in children:
                await child.close()
            raise
        partitioned = PartitionedProducer(full, children, config.routing)
        self._closeables.append(partitioned)
        return partitioned

    async def create_entry_producer(self, topic: str, **options: Any) -> Producer:
        """A producer on exactly ``topic`` (a partition's name stays a partition; no batching) whose
        ``send_entry`` sends stored entries as they are: the geo-replicator's producer. The caller closes it."""
        config = ProducerConfig(topic=full_topic_name(topic), batching=None, **options)
        producer = Producer(self._context, config.topic, config)
        await producer.start()
        return producer

    async def _dlq_producer(self, topic: str, initial_subscription: str | None) -> Producer | PartitionedProducer:
        return await self.create_producer(topic, initial_subscription_name=initial_subscription)

    # ------------------------------------------------------------ consumers

    async def subscribe(
        self,
        topic: str | Sequence[str],
        subscription: str,
        *,
        dead_letter_policy: DeadLetterPolicy | None = None,
        **options: Any,
    ) -> Consumer | MultiTopicConsumer:
        """A consumer; a ``MultiTopicConsumer`` (same API) for several topics or a partitioned one."""
        if "properties" in options:
            options["properties"] = tuple(dict(options["properties"]).items())
        config = ConsumerConfig(subscription=subscription, dead_letter_policy=dead_letter_policy, **options)
        if config.consumer_name is None:
            config = _with_name(config)
        topics = [topic] if isinstance(topic, str) else list(topic)
        targets: list[tuple[str, int]] = []
        for t in topics:
            full = full_topic_name(t)
            count = await partition_count(self._context.pool, self.config.service_url, full)
            targets += [(partition_name(full, i), i) for i in range(count)] if count else [(full, -1)]
        if len(targets) == 1 and isinstance(topic, str) and targets[0][1] < 0:
            consumer = await self._start_consumer(targets[0][0], config)
            self._closeables.append(consumer)
            return consumer
        queue = ReceiveQueue()
        children: list[Consumer] = []
        try:
            for name, index in targets:
                children.append(await self._start_consumer(name, config, partition=index, queue=queue))
        except BaseException:
            for child in children:
                await child.close()
            raise
        multi = MultiTopicConsumer(children, queue)
        self._closeables.append(multi)
        return multi

    async def _start_consumer(
        self, topic: str, config: ConsumerConfig, *, partition: int = -1, queue: ReceiveQueue | None = None,
        start: MessageId | None = None,
    ) -> Consumer:
        consumer = Consumer(
            self._context, topic, config, partition=partition, queue=queue, start_message_id=start,
            make_producer=self._dlq_producer,
        )
        await consumer.start()
        return consumer

    # ------------------------------------------------------------ readers

    async def create_reader(
        self, topic: str, start: StartAt = "earliest", *, inclusive: bool = False, receiver_queue_size: int = 1000
    ) -> Reader:
        full = full_topic_name(topic)
        start_id = _start_id(start)
        config = ConsumerConfig(
            subscription=f"reader-{secrets.token_hex(5)}", subscription_type="exclusive", durable=False,
            consumer_name="", start_message_inclusive=inclusive, receiver_queue_size=receiver_queue_size,
        )
        consumer = await self._start_consumer(full, config, start=start_id)
        reader = Reader(consumer, start_id)
        self._closeables.append(reader)
        return reader

    async def read(
        self, topic: str, *, start: StartAt = "earliest", end: StartAt | None = "latest", inclusive: bool = False,
        timeout_ms: float | None = None,
    ) -> AsyncGenerator[Message, None]:
        """Messages from ``start`` up to and including ``end`` (``"latest"``: the last one when called)."""
        reader = await self.create_reader(topic, start, inclusive=inclusive)
        try:
            end_id = None
            if end is not None and end != LATEST:
                end_id = await reader.last_message_id() if end == "latest" else _start_id(end)
                if end_id.entry_id < 0:
                    return
            while True:  # ends at ``end`` or on the timeout
                msg = await reader.read_next(timeout_ms)
                yield msg
                if end_id is not None and reached_end(msg, end_id):
                    return
        finally:
            await reader.close()


def _with_name(config: ConsumerConfig) -> ConsumerConfig:
    return replace(config, consumer_name=secrets.token_hex(5))
