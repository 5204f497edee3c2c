"""The deletion system topics and the queue that writes them (phase 1's durable step).

``persistent://pulsar/system/__ledger_deletion`` is partitioned (``twoPhaseDeletionLedgerDeletionParallelism``)
and has two companions, ``__ledger_deletion-RETRY`` and ``__ledger_deletion-DLQ``. The queue appends one
message per request to the partition its ledger id hashes to, through managed ledgers the deletion service
holds open; a deletion topic dropping its own ledgers writes to another member of the family, never to
itself (it may be opening, and an open waits for its own recovery).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from magnetar.broker.deletion.messages import DeletionMessage, encode
from magnetar.core.clock import Clock
from magnetar.ledger.api import ManagedLedger, ManagedLedgerError
from magnetar.ledger.deletion import PendingDeleteLedger
from magnetar.storage.api import StorageError

log = logging.getLogger("magnetar.broker.deletion")

TOPIC = "__ledger_deletion"
NAMESPACE_PATH = "pulsar/system/persistent"
OPEN_TIMEOUT_S = 30.0


@dataclass(frozen=True, slots=True)
class DeletionTopics:
    """Managed-ledger names of the family (``tenant/ns/domain/local``, as the broker names topics)."""

    partitions: tuple[str, ...]
    retry: str
    dlq: str

    @classmethod
    def of(cls, parallelism: int) -> DeletionTopics:
        base = f"{NAMESPACE_PATH}/{TOPIC}"
        return cls(tuple(f"{base}-partition-{i}" for i in range(max(1, parallelism))), f"{base}-RETRY",
                   f"{base}-DLQ")

    @property
    def consumed(self) -> tuple[str, ...]:
        """The topics the service consumes: every partition, then the retry topic."""
        return (*self.partitions, self.retry)

    @property
    def all(self) -> tuple[str, ...]:
        return (*self.consumed, self.dlq)

    def target(self, ledger_id: int, requester: str) -> str:
        """Where a request for ``ledger_id`` goes when ``requester`` drops it: never back to itself."""
        chosen = self.partitions[ledger_id % len(self.partitions)]
        if chosen != requester:
            return chosen
        return self.retry if requester != self.retry else self.partitions[0]


class SystemTopicQueue:
    """Implements :class:`magnetar.ledger.deletion.DeletionQueue` over the deletion topics."""

    def __init__(
        self,
        topics: DeletionTopics,
        open_ledger: Callable[[str], Awaitable[ManagedLedger]],
        clock: Clock,
        on_queued: Callable[[str, int], None],
        on_request: Callable[[PendingDeleteLedger], None] = lambda _: None,
    ) -> None:
        self._topics = topics
        self._open = open_ledger
        self._clock = clock
        self._on_queued = on_queued  # (topic, count): wakes the consumer
        self._on_request = on_request  # a first-phase request was queued: counted
        self._sequence = itertools.count()

    async def append(self, topic: str, message: DeletionMessage) -> None:
        """Append one message to ``topic`` (raises ManagedLedgerError / StorageError when it fails)."""
        async with asyncio.timeout(OPEN_TIMEOUT_S):  # not wait_for: on 3.11 it can swallow a cancellation
            ledger = await self._open(topic)
        if ledger.writes_paused:
            ledger.resume_writes()  # we own this topic's appends: after a failed one, the next starts a new ledger
        entry = encode(message, publish_time_ms=self._clock.now_ms(), sequence_id=next(self._sequence))
        await ledger.add_entry(entry)
        self._on_queued(topic, 1)

    async def enqueue(self, requests: Sequence[PendingDeleteLedger]) -> set[int]:
        async def one(request: PendingDeleteLedger) -> bool:
            try:
                await self.append(self._topics.target(request.ledger_id, request.topic), DeletionMessage(request))
            except (ManagedLedgerError, StorageError, TimeoutError) as exc:
                log.warning("could not queue ledger %d of %s for deletion: %s", request.ledger_id, request.topic,
                            exc)
                return False
            self._on_request(request)
            return True

        done = await asyncio.gather(*(one(r) for r in requests))
        queued: dict[int, bool] = {}
        for request, ok in zip(requests, done, strict=True):
            queued[request.ledger_id] = queued.get(request.ledger_id, True) and ok
        return {ledger_id for ledger_id, ok in queued.items() if ok}
