"""What a command handler sees of its connection: the :class:`Session`, never the connection class.

A handler takes ``(session, command, payload)`` and either acts at once (returns None: SEND, FLOW, ACK keep
their order on the wire) or returns an awaitable the connection runs as a request task. Through the
session it reaches the broker's parts, the connection's authentication, the producers and consumers this
connection created, and the frames it sends; the connection (``connection.py``) implements it, a test may
implement it in memory.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol

from magnetar import protocol as proto
from magnetar.broker.endpoint import Endpoint
from magnetar.broker.parts import Broker
from magnetar.broker.subscription.consumer import Consumer
from magnetar.broker.topic.producer import Producer
from magnetar.broker.transactions.api import TxnId
from magnetar.core.clock import Clock
from magnetar.server.auth import ConnectionAuth


class Session(Endpoint, Protocol):
    @property
    def broker(self) -> Broker: ...

    @property
    def auth(self) -> ConnectionAuth: ...

    @property
    def clock(self) -> Clock: ...

    @property
    def producers(self) -> dict[int, Producer]:
        """This connection's producers by id (a handler adds and removes them)."""
        ...

    @property
    def consumers(self) -> dict[int, Consumer]: ...

    @property
    def open_txns(self) -> set[TxnId]:
        """The transactions this connection opened that may still be open (``maxOpenTransactionsPerConnection``)."""
        ...

    @property
    def max_message_size(self) -> int: ...

    @property
    def local_address(self) -> tuple[str, int]:
        """The address and port the client reached (lookups answer with them)."""
        ...

    @property
    def awaiting_connect(self) -> bool:
        """No CONNECT was accepted yet."""
        ...

    def handshake_done(self, client_version: str, protocol_version: int) -> None: ...

    def publish_started(self) -> None:
        """A SEND was accepted: counts towards the connection's back-pressure on publishes."""
        ...

    def publish_finished(self, _: object = None) -> None: ...

    async def detach_producer(self, producer: Producer) -> None:
        """The producer leaves this connection and its topic."""
        ...

    async def detach_consumer(self, consumer: Consumer) -> None: ...

    async def close(self) -> None: ...


Handler = Callable[[Session, proto.pb.BaseCommand, memoryview | None], Awaitable[None] | None]
