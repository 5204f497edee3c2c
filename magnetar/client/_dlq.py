"""Dead-letter policy, entirely client-side: messages redelivered too often go to ``<topic>-<sub>-DLQ``.

A message arriving with ``redelivery_count >= max_redeliver_count`` is remembered; when it is
nacked again it is published to the dead-letter topic (original properties plus
``ORIGIN_MESSAGE_ID`` and ``REAL_TOPIC``, same key) and then acked instead of redelivered. One
arriving with a count above the limit is dead-lettered without being shown. Remembered entries are
bounded by ``REMEMBERED_ENTRIES_MAX``. Knows nothing of connections; producers come from a factory.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Callable, Coroutine
from typing import Any, Final

from magnetar.client._config import DeadLetterPolicy
from magnetar.client._messages import Message, MessageId

__all__ = ["DeadLetterSink", "dead_letter_topic"]

REMEMBERED_ENTRIES_MAX: Final = 10_000
MakeProducer = Callable[[str, str | None], Coroutine[Any, Any, Any]]


def dead_letter_topic(topic: str, subscription: str, policy: DeadLetterPolicy) -> str:
    return policy.dead_letter_topic or f"{topic}-{subscription}-DLQ"


class DeadLetterSink:
    def __init__(self, topic: str, subscription: str, policy: DeadLetterPolicy, make_producer: MakeProducer) -> None:
        self.topic = topic
        self.dlq_topic = dead_letter_topic(topic, subscription, policy)
        self._policy = policy
        self._make_producer = make_producer
        self._producer: Any = None
        self._lock = asyncio.Lock()
        self._candidates: OrderedDict[tuple[int, int], list[Message]] = OrderedDict()

    def deliver(self, msg: Message) -> bool:
        """Whether the application should see ``msg``; remembers those at the limit."""
        limit = self._policy.max_redeliver_count
        if msg.redelivery_count > limit:
            return False
        if msg.redelivery_count >= limit:
            self._candidates.setdefault(msg.message_id.entry, []).append(msg)
            while len(self._candidates) > REMEMBERED_ENTRIES_MAX:  # bounded
                self._candidates.popitem(last=False)
        return True

    def forget(self, mid: MessageId) -> None:
        msgs = self._candidates.get(mid.entry)
        if msgs is None:
            return
        msgs[:] = [m for m in msgs if m.message_id != mid]
        if not msgs:
            del self._candidates[mid.entry]

    def split_due(self, entries: list[tuple[int, int]]) -> tuple[list[Message], list[tuple[int, int]]]:
        """Of the entries due for redelivery: the messages to dead-letter, and the entries to redeliver."""
        dead: list[Message] = []
        rest: list[tuple[int, int]] = []
        for entry in entries:
            msgs = self._candidates.pop(entry, None)
            if msgs:
                dead.extend(msgs)
            else:
                rest.append(entry)
        return dead, rest

    async def publish(self, messages: list[Message]) -> None:
        producer = await self._get_producer()
        futures = []
        for msg in messages:
            props = dict(msg.properties)
            props["ORIGIN_MESSAGE_ID"] = str(msg.message_id)
            props["REAL_TOPIC"] = self.topic
            futures.append(producer.send_nowait(msg.data, key=msg.key, ordering_key=msg.ordering_key,
                                                properties=props, event_time_ms=msg.event_time_ms))
        await asyncio.gather(*futures)

    async def _get_producer(self) -> Any:
        async with self._lock:
            if self._producer is None:
                self._producer = await self._make_producer(self.dlq_topic, self._policy.initial_subscription_name)
            return self._producer

    async def close(self) -> None:
        if self._producer is not None:
            await self._producer.close()
