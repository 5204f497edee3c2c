"""Producers and consumers over several topics: partitioned topics and multi-topic subscriptions.

``PartitionedProducer`` owns one ``Producer`` per partition and routes each message (``_routing``).
``MultiTopicConsumer`` owns one ``Consumer`` per (partition) topic sharing one ``ReceiveQueue``;
acks go to the child that delivered the message, found by the message's topic.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Mapping, Sequence

from magnetar.client._consumer import Consumer, ReceiveQueue
from magnetar.client._messages import Message, MessageId
from magnetar.client._producer import Producer, SendFuture
from magnetar.client._routing import Router
from magnetar.client._transaction import Transaction
from magnetar.client.errors import AlreadyClosed, InvalidConfiguration

__all__ = ["MultiTopicConsumer", "PartitionedProducer"]


class PartitionedProducer:
    def __init__(self, topic: str, producers: Sequence[Producer], routing: str) -> None:
        self.topic = topic
        self.producers = list(producers)
        self._router = Router(len(producers), routing, start=random.randrange(len(producers)))

    @property
    def producer_name(self) -> str:
        return self.producers[0].producer_name

    async def send(self, data: bytes, *, key: str | None = None, **options: object) -> MessageId:
        return await self.producers[self._router.choose(key)].send(data, key=key, **options)  # type: ignore[arg-type]

    def send_nowait(self, data: bytes, *, key: str | None = None, **options: object) -> SendFuture:
        producer = self.producers[self._router.choose(key)]
        return producer.send_nowait(data, key=key, **options)  # type: ignore[arg-type]

    async def flush(self) -> None:
        await asyncio.gather(*(p.flush() for p in self.producers))

    async def close(self) -> None:
        await asyncio.gather(*(p.close() for p in self.producers))

    async def __aenter__(self) -> PartitionedProducer:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()


class MultiTopicConsumer:
    def __init__(self, consumers: Sequence[Consumer], queue: ReceiveQueue) -> None:
        self.consumers = list(consumers)
        self._queue = queue
        self._by_topic: Mapping[str, Consumer] = {c.topic: c for c in consumers}

    def _child(self, message: Message | MessageId, topic: str | None = None) -> Consumer:
        if isinstance(message, Message):
            topic = message.topic
        elif topic is None:
            for c in self.consumers:
                if c.partition == message.partition:
                    return c
            raise InvalidConfiguration("acking a bare MessageId on a multi-topic consumer needs its partition")
        return self._by_topic[topic]

    async def receive(self, timeout_ms: float | None = None) -> Message:
        consumer, msg = await self._queue.get(timeout_ms)
        consumer.message_taken(msg)
        return msg

    def __aiter__(self) -> MultiTopicConsumer:
        return self

    async def __anext__(self) -> Message:
        try:
            return await self.receive()
        except AlreadyClosed:
            raise StopAsyncIteration from None

    async def acknowledge(self, message: Message | MessageId, *, txn: Transaction | None = None) -> None:
        await self._child(message).acknowledge(message, txn=txn)

    async def acknowledge_cumulative(self, message: Message | MessageId, *, txn: Transaction | None = None,
                                     receipt: bool = False) -> None:
        await self._child(message).acknowledge_cumulative(message, txn=txn, receipt=receipt)

    def negative_acknowledge(self, message: Message | MessageId) -> None:
        self._child(message).negative_acknowledge(message)

    def redeliver_unacknowledged_messages(self) -> None:
        for c in self.consumers:
            c.redeliver_unacknowledged_messages()

    async def seek(self, target: MessageId | int) -> None:
        await asyncio.gather(*(c.seek(target) for c in self.consumers))

    async def unsubscribe(self) -> None:
        await asyncio.gather(*(c.unsubscribe() for c in self.consumers))
        self._queue.close()

    async def close(self) -> None:
        await asyncio.gather(*(c.close() for c in self.consumers))
        self._queue.close()

    async def __aenter__(self) -> MultiTopicConsumer:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()
