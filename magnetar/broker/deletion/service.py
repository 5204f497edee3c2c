"""PIP-186's second phase: the ``LedgerDeletionService`` deletes queued ledgers from storage.

One consumer loop per consumed deletion topic (every partition and the retry topic), on the durable cursor
``pulsar.ledger-deletion`` (a reserved name: not a subscription clients see). For each message:

- it does not decode → invalid: ack, count, log; nothing deleted;
- the owner says the ledger is still listed (:meth:`LedgerFactory.ledger_in_use`; a topic that is gone
  lists nothing) → in use: ack, nothing deleted (the next trim queues it again);
- an offloaded copy → deleted from the offload store in the message's context;
- storage no longer has it → already gone: ack;
- its storage custom metadata does not name the message's owner and component → mismatch (forged or
  stale): ack, nothing deleted;
- otherwise deleted. A failure goes to ``-RETRY`` with ``RECONSUMETIMES`` + 1 and a delivery time
  ``twoPhaseDeletionReconsumeLaterInSeconds`` later, or to ``-DLQ`` after ``twoPhaseDeletionMaxRetryDeleteCount``.

A message is acked only after its outcome is durable (deleted, or re-queued), so a crash at any point
repeats work (idempotently) and never loses a request.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from magnetar.broker.deletion.audit import AuditReport, References, audit
from magnetar.broker.deletion.config import DeletionConfig
from magnetar.broker.deletion.messages import DeletionMessage, InvalidDeletionMessage, decode
from magnetar.broker.deletion.topics import DeletionTopics, SystemTopicQueue
from magnetar.core.clock import Clock
from magnetar.ledger.api import Cursor, InitialPosition, ManagedLedger, ManagedLedgerError, RetentionPolicy
from magnetar.ledger.deletion import (
    COMPONENT_METADATA,
    DeletionQueue,
    LedgerComponent,
    LedgerType,
    PendingDeleteLedger,
    context_from,
)
from magnetar.ledger.factory import LedgerFactory
from magnetar.metadata.api import MetadataError, MetadataStore
from magnetar.storage.api import LedgerNotFound, LedgerStore, StorageError
from magnetar.storage.offload.api import OffloadStore

log = logging.getLogger("magnetar.broker.deletion")

CURSOR = "pulsar.ledger-deletion"
DLQ_CURSOR = "pulsar.ledger-deletion-dlq"  # holds the DLQ's messages for an operator (never acked)
READ_ENTRIES = 100
IDLE_POLL_MS = 1000  # a consumer with nothing to do also looks again this often (retry due times, restarts)
ERROR_BACKOFF_MS = 1000
CONSUMED_ONLY = RetentionPolicy(time_ms=0, size_bytes=0)  # the deletion topics keep nothing handled


class Outcome(enum.Enum):
    DELETED = "deleted"
    OFFLOAD_DELETED = "offload_deleted"
    IN_USE = "in_use"
    ALREADY_GONE = "already_gone"
    MISMATCH = "metadata_mismatch"
    INVALID = "invalid"
    RETRIED = "retried"
    DEAD_LETTERED = "dead_lettered"


@dataclass(slots=True)
class DeletionCounters:
    """PIP-186's counters; exported as ``pulsar_ledger_deletion_*``."""

    queued_ledgers: int = 0
    queued_offload_ledgers: int = 0
    received: int = 0
    outcomes: dict[Outcome, int] = field(default_factory=lambda: dict.fromkeys(Outcome, 0))
    delete_failures: int = 0
    offload_delete_failures: int = 0
    acked: int = 0


class OffloadedLedgers(Protocol):
    """Deletes an offloaded copy (tiered storage supplies it)."""

    async def delete_offloaded(self, ledger_id: int, context: Mapping[str, str]) -> None: ...


class DeleteFailed(Exception):
    pass


class NoOffloadStore(DeleteFailed):
    """The message names an offloaded copy and this broker has no offload store (or another driver)."""


class OffloadStoreDeleter:
    """Deletes offloaded copies through the broker's offload store, in the context the message names."""

    def __init__(self, store: OffloadStore) -> None:
        self.store = store

    async def delete_offloaded(self, ledger_id: int, context: Mapping[str, str]) -> None:
        try:
            target = context_from(ledger_id, context)
        except KeyError as exc:
            raise DeleteFailed(f"the offload context lacks {exc}") from None
        if target.driver != self.store.driver:
            raise NoOffloadStore(f"offloaded with driver {target.driver!r}; this broker's is {self.store.driver!r}")
        await self.store.delete(target)


class LedgerDeletionService:
    def __init__(
        self,
        factory: LedgerFactory,
        store: LedgerStore,
        clock: Clock,
        config: DeletionConfig,
        offloaded: OffloadedLedgers | None = None,
        *,
        references: Sequence[References] = (),
        sleep_ms: Callable[[int], Awaitable[None]] | None = None,
        idle_poll_ms: int | None = IDLE_POLL_MS,
    ) -> None:
        """``references``: the audit's sources of ledgers kept outside the managed-ledger records
        (compaction's). ``sleep_ms`` (error back-off) and ``idle_poll_ms`` (None: only :meth:`poke` or a new
        message wakes an idle consumer) are injected by the simulator, whose time is manual."""
        self._references = tuple(references)
        self._sleep_ms = sleep_ms or _asyncio_sleep_ms
        self._idle_poll_ms = idle_poll_ms
        self._factory = factory
        self._store = store
        self._clock = clock
        self.config = config
        self.offloaded = offloaded
        self.topics = DeletionTopics.of(config.parallelism)
        self.counters = DeletionCounters()
        self._ledgers: dict[str, ManagedLedger] = {}
        self._wake: dict[str, asyncio.Event] = {name: asyncio.Event() for name in self.topics.consumed}
        self._tasks: list[asyncio.Task[None]] = []
        self._progress = asyncio.Condition()  # notified after every consumer pass
        self.queue = SystemTopicQueue(self.topics, self._open, clock, self._queued, self._count_request)
        self._family = frozenset(self.topics.all)

    # ---- lifecycle ------------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Open the family, then route every managed ledger's drops through the queue."""
        for name in self.topics.all:
            await self._open(name)
        self._factory.set_deletion_queue(self.queue_for)
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._consume(name), name=f"ledger-deletion {name}")
                       for name in self.topics.consumed]

    def queue_for(self, name: str) -> DeletionQueue | None:
        return self.queue

    async def audit(self, metadata: MetadataStore, *, fix: bool) -> AuditReport:
        """The ledger audit on the live broker; ``fix`` queues the orphans it finds for deletion."""
        copies = self.offloaded.store if isinstance(self.offloaded, OffloadStoreDeleter) else None
        return await audit(metadata, self._store, self._factory, live=True, fix=self.queue if fix else None,
                           offload=copies, references=self._references)

    async def reclaim_orphans(self, metadata: MetadataStore) -> None:
        """At startup: queue ledgers a crash left behind (created, never recorded), logging what it did."""
        try:
            report = await self.audit(metadata, fix=True)
        except (ManagedLedgerError, StorageError, MetadataError) as exc:
            log.warning("ledger audit at startup failed: %s", exc)
            return
        if report.orphans or report.dangling:
            log.warning("ledger audit at startup: %d orphans (%d queued for deletion), %d dangling references %s",
                        len(report.orphans), report.fixed, len(report.dangling), report.dangling[:10])

    async def close(self) -> None:
        self._factory.set_deletion_queue(lambda _: None)
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []

    async def _open(self, name: str) -> ManagedLedger:
        """The family member ``name``, opened again if something closed it (an unload, an error)."""
        ledger = await self._factory.open(name)
        self._ledgers[name] = ledger
        cursor = CURSOR if name != self.topics.dlq else DLQ_CURSOR
        if cursor not in ledger.cursors:
            await ledger.open_cursor(cursor, InitialPosition.EARLIEST)
        return ledger

    def poke(self) -> None:
        """Wake every consumer now (time moved: retries may be due)."""
        for event in self._wake.values():
            event.set()

    def _count_request(self, request: PendingDeleteLedger) -> None:
        if request.ledger_type is LedgerType.OFFLOAD_LEDGER:
            self.counters.queued_offload_ledgers += 1
        else:
            self.counters.queued_ledgers += 1

    def _queued(self, topic: str, count: int) -> None:
        event = self._wake.get(topic)
        if event is not None:
            event.set()

    # ---- the consumers --------------------------------------------------------------------------------------

    async def _consume(self, name: str) -> None:
        wake = self._wake[name]
        while True:  # until cancelled; every pass handles entries or waits (bounded by IDLE_POLL_S)
            wake.clear()  # before reading: a message queued during the pass wakes the next one
            try:
                ledger = await self._open(name)
                handled = await self._consume_batch(name, ledger.cursors[CURSOR])
                if handled:
                    await ledger.trim(CONSUMED_ONLY)  # what was handled leaves, through the queue
            except (ManagedLedgerError, StorageError) as exc:
                log.warning("ledger deletion on %s paused: %s", name, exc)
                with contextlib.suppress(ManagedLedgerError, StorageError, KeyError):
                    (await self._open(name)).cursors[CURSOR].rewind()  # unacked messages are read again
                await self._sleep_ms(ERROR_BACKOFF_MS)
                continue
            async with self._progress:
                self._progress.notify_all()
            if not handled:  # wait for a new message, or look again after a while (retry due times)
                timer = None
                if self._idle_poll_ms is not None:
                    timer = asyncio.get_running_loop().call_later(self._idle_poll_ms / 1000, wake.set)
                try:
                    await wake.wait()
                finally:
                    if timer is not None:
                        timer.cancel()

    async def _consume_batch(self, name: str, cursor: Cursor) -> bool:
        entries = await cursor.read_entries(READ_ENTRIES)
        for index, entry in enumerate(entries):
            try:
                message = decode(entry.data)
            except InvalidDeletionMessage as exc:
                self._count(Outcome.INVALID)
                log.warning("ledger deletion: invalid message at %s on %s acked, nothing deleted: %s",
                            entry.position, name, exc)
                cursor.acknowledge([entry.position])
                self.counters.acked += 1
                continue
            if message.deliver_at_ms is not None and message.deliver_at_ms > self._clock.now_ms():
                cursor.seek(entry.position)  # not due: read it again later, after everything before it
                return index > 0
            await self.handle(message)
            cursor.acknowledge([entry.position])
            self.counters.acked += 1
        if entries:
            log.info("ledger deletion on %s: %d messages handled; in flight now %d", name, len(entries),
                     sum(self.inflight().values()))
        return bool(entries)

    # ---- one message ----------------------------------------------------------------------------------------

    async def handle(self, message: DeletionMessage, *, requeue: bool = True) -> Outcome:
        """Act on one message and return what was done; raises only if re-queuing a failure failed, or, with
        ``requeue=False`` (the admin API's synchronous delete), the failure itself (DeleteFailed)."""
        self.counters.received += 1
        try:
            outcome = await self._delete(message)
        except DeleteFailed as exc:
            if not requeue:
                raise
            outcome = await self._requeue(message, str(exc))
        self._count(outcome)
        return outcome

    async def _delete(self, message: DeletionMessage) -> Outcome:
        request = message.request
        try:
            if await self._factory.ledger_in_use(request):
                return Outcome.IN_USE
        except ManagedLedgerError as exc:
            raise DeleteFailed(f"asking the owner of {request.topic} failed: {exc}") from exc
        if request.ledger_type is LedgerType.OFFLOAD_LEDGER:
            return await self._delete_offloaded(message)
        try:
            info = await self._store.info(request.ledger_id)
        except LedgerNotFound:
            return Outcome.ALREADY_GONE
        except StorageError as exc:
            self.counters.delete_failures += 1
            raise DeleteFailed(f"reading ledger {request.ledger_id} failed: {exc}") from exc
        if not _owned_by(info.custom_metadata, request.topic, request.component):
            log.warning("ledger deletion: ledger %d is not %s's %s (custom metadata %s); acked, not deleted",
                        request.ledger_id, request.topic, request.component.value, dict(info.custom_metadata))
            return Outcome.MISMATCH
        try:
            await self._store.delete(request.ledger_id)
        except LedgerNotFound:
            return Outcome.ALREADY_GONE
        except StorageError as exc:
            self.counters.delete_failures += 1
            raise DeleteFailed(f"deleting ledger {request.ledger_id} failed: {exc}") from exc
        return Outcome.DELETED

    async def _delete_offloaded(self, message: DeletionMessage) -> Outcome:
        request = message.request
        if self.offloaded is None or request.offload_context is None:
            self.counters.offload_delete_failures += 1
            raise NoOffloadStore(f"no offload store can delete offloaded ledger {request.ledger_id}")
        try:
            await self.offloaded.delete_offloaded(request.ledger_id, request.offload_context)
        except Exception as exc:  # any offload store failure is retried later
            self.counters.offload_delete_failures += 1
            raise DeleteFailed(f"deleting offloaded ledger {request.ledger_id} failed: {exc}") from exc
        return Outcome.OFFLOAD_DELETED

    async def _requeue(self, message: DeletionMessage, why: str) -> Outcome:
        times = message.reconsume_times + 1
        if times > self.config.max_retry_count:
            await self.queue.append(self.topics.dlq, DeletionMessage(message.request, times))
            log.error("ledger deletion: ledger %d of %s dead-lettered after %d tries: %s", message.request.ledger_id,
                      message.request.topic, times - 1, why)
            return Outcome.DEAD_LETTERED
        due_ms = self._clock.now_ms() + int(self.config.reconsume_later_s * 1000)
        await self.queue.append(self.topics.retry, DeletionMessage(message.request, times, due_ms))
        log.warning("ledger deletion: ledger %d of %s retried later (try %d): %s", message.request.ledger_id,
                    message.request.topic, times, why)
        return Outcome.RETRIED

    def _count(self, outcome: Outcome) -> None:
        self.counters.outcomes[outcome] += 1

    # ---- observability --------------------------------------------------------------------------------------

    async def drained(self, *, include_retry: bool = True) -> None:
        """Return once the consumed deletion topics have no backlog (the caller bounds the wait)."""
        names = self.topics.consumed if include_retry else self.topics.partitions
        async with self._progress:
            await self._progress.wait_for(lambda: all(self.inflight()[n] == 0 for n in names))

    def inflight(self) -> dict[str, int]:
        """Estimated in-flight deletions: the backlog of each consumed deletion topic."""
        out: dict[str, int] = {}
        for name in self.topics.consumed:
            ledger = self._ledgers.get(name)
            cursor = ledger.cursors.get(CURSOR) if ledger is not None else None
            out[name] = cursor.backlog_entries() if cursor is not None else 0
        return out


async def _asyncio_sleep_ms(delay_ms: int) -> None:
    await asyncio.sleep(delay_ms / 1000)


def _owned_by(custom: Mapping[str, str], topic: str, component: LedgerComponent) -> bool:
    if custom.get("application") != "magnetar" or custom.get("component") != COMPONENT_METADATA[component]:
        return False
    return custom.get("pulsar/managed-ledger") == topic
