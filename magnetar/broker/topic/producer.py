"""A producer attached to a topic: identity, ordered publish receipts and statistics.

Receipts must reach the client in SEND order (facts §4.4), while appends complete asynchronously; the
producer keeps its in-flight publishes in a bounded FIFO and answers from its head only. It knows the
wire format of receipts but nothing of sockets.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections import deque
from collections.abc import Awaitable
from dataclasses import dataclass, field

from magnetar import protocol as proto
from magnetar.broker.endpoint import Endpoint
from magnetar.broker.errors import BrokerError, PersistenceError
from magnetar.ledger.api import Position
from magnetar.protocol.receipt_frame import send_receipt_frame

log = logging.getLogger("magnetar.broker.producer")


class AccessMode(enum.IntEnum):
    SHARED = 0
    EXCLUSIVE = 1
    WAIT_FOR_EXCLUSIVE = 2
    EXCLUSIVE_WITH_FENCING = 3

    @property
    def label(self) -> str:
        return {0: "Shared", 1: "Exclusive", 2: "WaitForExclusive", 3: "ExclusiveWithFencing"}[self.value]


async def failed_publish(exc: Exception) -> Position:
    """An awaitable that fails at once: a publish refused before it reached storage, still answered in order."""
    raise exc


@dataclass(slots=True)
class _InFlight:
    sequence_id: int
    highest_sequence_id: int | None
    future: asyncio.Future[Position]


@dataclass(eq=False, slots=True)
class Producer:
    endpoint: Endpoint
    producer_id: int
    name: str
    topic_name: str
    partition: int
    epoch: int
    access_mode: AccessMode
    user_provided_name: bool
    created_ms: int
    metadata: dict[str, str] = field(default_factory=dict)
    topic_epoch: int | None = None
    msg_in_counter: int = 0
    bytes_in_counter: int = 0
    closed: bool = False
    fenced: bool = False
    ready: bool = False  # admitted (PIP-68): a queued WaitForExclusive producer may not publish yet
    # the broker is closing it (an unload, a move): sends from now on are dropped unanswered, not stored, so
    # nothing is receipted after its CLOSE_PRODUCER; the client resends them where it reconnects
    closing: bool = False
    _in_flight: deque[_InFlight] = field(default_factory=deque)

    @property
    def topic_epoch_known(self) -> bool:
        """Shared producers have no epoch; an exclusive one has it once admitted."""
        return self.access_mode is AccessMode.SHARED or self.topic_epoch is not None

    @property
    def pending_count(self) -> int:
        return len(self._in_flight)

    def track(
        self, sequence_id: int, highest_sequence_id: int | None, work: Awaitable[Position]
    ) -> asyncio.Future[Position]:
        """Register a publish; its receipt is sent when it and every earlier publish have completed."""
        # a publish already is a future (ensure_future's checks cost more than this one, once per SEND)
        future = work if isinstance(work, asyncio.Future) else asyncio.ensure_future(work)
        self._in_flight.append(_InFlight(sequence_id, highest_sequence_id, future))
        future.add_done_callback(self._answer_completed)
        return future

    def _answer_completed(self, _: object = None) -> None:
        while self._in_flight and self._in_flight[0].future.done():
            item = self._in_flight.popleft()
            self._answer(item)

    def _answer(self, item: _InFlight) -> None:
        if not self.endpoint.is_open:
            return
        exc = item.future.exception() if not item.future.cancelled() else PersistenceError("cancelled")
        if exc is None:
            pos = item.future.result()
            frame = send_receipt_frame(
                self.producer_id, item.sequence_id, pos.ledger_id, pos.entry_id, item.highest_sequence_id
            )
        else:
            code = exc.server_error if isinstance(exc, BrokerError) else PersistenceError.server_error
            if not isinstance(exc, BrokerError):
                log.error("publish on %s failed: %r", self.topic_name, exc)
            frame = proto.encode_command(
                proto.commands.send_error(self.producer_id, item.sequence_id, code, str(exc) or type(exc).__name__)
            )
        self.endpoint.send_frame(frame)

    async def wait_pending(self) -> None:
        """Wait for every in-flight publish to finish (close finishes pending sends first)."""
        if self._in_flight:
            await asyncio.gather(*(i.future for i in list(self._in_flight)), return_exceptions=True)
        self._answer_completed()


class ProducerNames:
    """Names for producers that did not choose one: ``{cluster}-0-{n}``, as Pulsar's standalone names them."""

    def __init__(self, cluster: str) -> None:
        self._cluster = cluster
        self._next = 0

    def next(self) -> str:
        name = f"{self._cluster}-0-{self._next}"
        self._next += 1
        return name
