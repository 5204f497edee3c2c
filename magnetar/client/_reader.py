"""Readers: an Exclusive, non-durable consumer that starts at a given message id.

The broker starts the non-durable cursor at ``start`` (inclusive); the consumer drops ``start``
itself unless ``inclusive``. ``read_until`` decides when a bounded read has reached its end id.
Knows nothing of connections beyond its ``Consumer``.
"""

from __future__ import annotations

from magnetar.client._consumer import Consumer
from magnetar.client._messages import EARLIEST, LATEST, Message, MessageId
from magnetar.client.errors import AlreadyClosed

__all__ = ["Reader", "reached_end"]


def reached_end(msg: Message, end: MessageId) -> bool:
    """Whether ``msg`` is at or past ``end`` (an id from GET_LAST_MESSAGE_ID or the user)."""
    mid = msg.message_id
    if mid.entry != end.entry:
        return mid.entry > end.entry
    if end.batch_index < 0:
        return mid.batch_index < 0 or mid.batch_index >= msg.batch_size - 1
    return mid.batch_index >= end.batch_index


class Reader:
    def __init__(self, consumer: Consumer, start: MessageId) -> None:
        self._consumer = consumer
        self.topic = consumer.topic
        self.start = start
        self._last: MessageId | None = None

    async def read_next(self, timeout_ms: float | None = None) -> Message:
        msg = await self._consumer.receive(timeout_ms)
        self._last = msg.message_id
        return msg

    def __aiter__(self) -> Reader:
        return self

    async def __anext__(self) -> Message:
        try:
            return await self.read_next()
        except AlreadyClosed:
            raise StopAsyncIteration from None

    async def last_message_id(self) -> MessageId:
        return await self._consumer.get_last_message_id()

    async def has_message_available(self) -> bool:
        last = await self.last_message_id()
        if last.entry_id < 0:
            return False
        if self._last is not None:
            return last.entry > self._last.entry or (
                last.entry == self._last.entry and last.batch_index > self._last.batch_index
            )
        if self.start == LATEST:
            return False
        if self.start == EARLIEST:
            return True
        return last.entry >= self.start.entry

    async def seek(self, target: MessageId) -> None:
        await self._consumer.seek(target)
        self._last = None
        self.start = target

    async def close(self) -> None:
        await self._consumer.close()

    async def __aenter__(self) -> Reader:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()
