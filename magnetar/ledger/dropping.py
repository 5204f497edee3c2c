"""Dropping a managed ledger's ledgers: trimming what retention lets go, deleting the whole managed ledger,
and deleting ledgers the record no longer lists - in one phase here, or through PIP-186's deletion queue
(two phases: queued first, unlisted after, deleted by the deletion service).

:class:`LedgerDropping` is part of :class:`~magnetar.ledger.managed.ManagedLedgerImpl` (its base class,
kept in its own module for size): it works on the managed ledger's state and locks, declared below, and
keeps the order that makes a crash at any point safe (metadata first, storage second).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping

from magnetar.core import crashpoints
from magnetar.core.clock import Clock
from magnetar.ledger.api import (
    LedgerOffload,
    LedgerSummary,
    ManagedLedgerError,
    ManagedLedgerFenced,
    RetentionPolicy,
    TrimResult,
)
from magnetar.ledger.cursor import ManagedCursor
from magnetar.ledger.deletion import (
    DeletionQueue,
    DropsInFlight,
    LedgerType,
    PendingDeleteLedger,
    copy_listed,
    drop_requests,
)
from magnetar.ledger.formats import cursor_key
from magnetar.ledger.ledger_list import LedgerList
from magnetar.ledger.states import LedgerState
from magnetar.ledger.trim import ledgers_to_trim
from magnetar.metadata.api import BadVersion, MetadataError, MetadataStore, NotFound
from magnetar.storage.api import LedgerNotFound, LedgerStore, StorageError

log = logging.getLogger("magnetar.ledger")

#: Dropped-but-never-listed ledger ids remembered per managed ledger (so the owner answers "not in use").
UNLISTED_TRACKED_MAX = 10_000


class LedgerDropping:
    # the managed ledger's state this part reads and changes (set by ManagedLedgerImpl.__init__)
    _name: str
    _key: str
    _store: LedgerStore
    _metadata: MetadataStore
    _clock: Clock
    _state: LedgerState
    _ledgers: LedgerList
    _properties: dict[str, str]
    _version: int
    _cursors: dict[str, ManagedCursor]
    _admit_lock: asyncio.Lock
    _meta_lock: asyncio.Lock
    _trim_lock: asyncio.Lock
    _drops: DropsInFlight
    _record_deleted: bool
    _unlisted: set[int]
    _background: set[asyncio.Task[None]]
    deletion_queue: DeletionQueue | None

    def _require_writable(self) -> None:
        raise NotImplementedError

    def _transition_to(self, new: LedgerState) -> None:
        raise NotImplementedError

    def _closed(self) -> None:
        """Tell the factory this managed ledger is closed (or deleted)."""
        raise NotImplementedError

    async def _settled(self) -> None:
        raise NotImplementedError

    async def _write_record(self, ledgers: list[LedgerSummary], properties: Mapping[str, str]) -> None:
        raise NotImplementedError

    async def _delete_cursor_key(self, key: str) -> None:
        raise NotImplementedError

    async def _discard_offloaded(self, copy: LedgerOffload) -> None:
        raise NotImplementedError

    async def trim(self, retention: RetentionPolicy) -> TrimResult:
        """One phase: the record without the trimmed ledgers (compare-and-set), then the storage deletes.

        Holds the admission lock so no rollover writes an older ledger list over ours. With a deletion
        queue, two phases instead (:meth:`_trim_two_phase`)."""
        self._require_writable()
        if self.deletion_queue is not None:
            return await self._trim_two_phase(self.deletion_queue, retention)
        async with self._admit_lock:
            self._require_writable()
            mark_deletes = [c.mark_delete_position for c in self._cursors.values()]
            chosen = ledgers_to_trim(self._ledgers.summaries(), mark_deletes, retention, self._clock.now_ms())
            if not chosen:
                return TrimResult()
            gone = {x.ledger_id for x in chosen}
            async with self._meta_lock:
                kept = [x for x in self._ledgers.summaries() if x.ledger_id not in gone]
                await self._write_record(kept, self._properties)
            for ledger_id in sorted(gone):
                self._ledgers.remove(ledger_id)
        crashpoints.reached("trim.recorded", self._name)
        failed = await self._delete_trimmed(sorted(gone))
        for summary in chosen:
            if summary.offload is not None:
                await self._discard_offloaded(summary.offload)
        result = TrimResult(tuple(chosen), tuple(failed))
        log.info("%s: trimmed %d ledgers (%d entries, %d bytes): %s", self._name, len(chosen), result.entries,
                 result.size_bytes, sorted(gone))
        return result

    async def _trim_two_phase(self, queue: DeletionQueue, retention: RetentionPolicy) -> TrimResult:
        """Queue the ledgers to trim, then write the record without those queued, in one update. No lock
        is held while queuing (the queue appends to other managed ledgers, which may be trimming too)."""
        async with self._trim_lock:
            async with self._admit_lock:
                self._require_writable()
                mark_deletes = [c.mark_delete_position for c in self._cursors.values()]
                chosen = ledgers_to_trim(self._ledgers.summaries(), mark_deletes, retention, self._clock.now_ms())
            if not chosen:
                return TrimResult()
            ids = [x.ledger_id for x in chosen]

            async def queue_then_unlist() -> set[int]:
                queued = await queue.enqueue([r for x in chosen for r in drop_requests(self._name, x)])
                crashpoints.reached("trim.queued", self._name)
                if queued & set(ids):
                    await self._remove_listed(queued & set(ids))
                    crashpoints.reached("trim.recorded", self._name)
                return queued

            queued = await self._drops.run_holding(ids, queue_then_unlist())
            dropped = [x for x in chosen if x.ledger_id in queued]
        result = TrimResult(tuple(dropped), tuple(i for i in ids if i not in queued))
        log.info("%s: trimmed %d ledgers (%d entries, %d bytes), queued for deletion: %s; kept, not queued: %s",
                 self._name, len(dropped), result.entries, result.size_bytes, sorted(queued & set(ids)),
                 list(result.delete_failed))
        return result

    async def _remove_listed(self, gone: set[int]) -> None:
        async with self._admit_lock:
            self._require_writable()
            async with self._meta_lock:
                kept = [x for x in self._ledgers.summaries() if x.ledger_id not in gone]
                await self._write_record(kept, self._properties)
            for ledger_id in sorted(gone):
                self._ledgers.remove(ledger_id)

    async def ledger_in_use(self, request: PendingDeleteLedger) -> bool:
        """PIP-186's owner check: does the record still use this copy, once no drop holds it mid-way?"""
        ledger_id = request.ledger_id
        await self._drops.settled(ledger_id)
        if self._state is LedgerState.DELETED or self._record_deleted:
            return False
        if request.ledger_type is LedgerType.LEDGER and ledger_id in self._unlisted:
            return False
        summaries = self._ledgers.summaries()
        if summaries and ledger_id > summaries[-1].ledger_id and self._state is LedgerState.OPEN:
            return True  # newer than the current ledger: a rollover is creating it (ids only grow)
        return copy_listed(self._ledgers.get(ledger_id), request)

    async def _delete_trimmed(self, ledger_ids: list[int]) -> list[int]:
        failed: list[int] = []
        for index, ledger_id in enumerate(ledger_ids):
            if index:
                crashpoints.reached("trim.deleting", self._name)
            try:
                await self._store.delete(ledger_id)
            except LedgerNotFound:
                pass
            except StorageError as exc:
                log.warning("%s: trimmed ledger %d could not be deleted from storage: %s", self._name, ledger_id,
                            exc)
                failed.append(ledger_id)
        return failed

    async def delete_ledgers_quietly(self, ledger_ids: list[int]) -> None:
        """Drop ledgers the record does not list: queued for two-phase deletion when a queue is set, else
        best effort here (a ledger left behind carries custom metadata naming its owner, for the audit)."""
        if self.deletion_queue is not None and ledger_ids:
            # queued in the background: callers may hold the admission lock (rollover), and the queue appends
            # to deletion topics whose own rollovers may be queuing here; a crash before it is queued leaves
            # an unlisted ledger, which the startup audit reclaims
            if len(self._unlisted) > UNLISTED_TRACKED_MAX:
                self._unlisted.clear()  # bounded; a forgotten one is reclaimed by the audit at the next start
            self._unlisted.update(ledger_ids)
            task = asyncio.ensure_future(self._queue_unlisted(self.deletion_queue, list(ledger_ids)))
            self._background.add(task)
            task.add_done_callback(self._background.discard)
            return
        await self._delete_now(ledger_ids)

    async def _queue_unlisted(self, queue: DeletionQueue, ledger_ids: list[int]) -> None:
        queued = await queue.enqueue([PendingDeleteLedger(self._name, i) for i in ledger_ids])
        await self._delete_now([i for i in ledger_ids if i not in queued])

    async def _delete_now(self, ledger_ids: list[int]) -> None:
        for ledger_id in ledger_ids:
            try:
                await self._store.delete(ledger_id)
            except LedgerNotFound:
                pass
            except StorageError as exc:
                log.warning("%s: could not delete ledger %d: %s", self._name, ledger_id, exc)

    async def _queue_then_delete(self, queue: DeletionQueue, summaries: list[LedgerSummary]) -> None:
        queued = await queue.enqueue([r for s in summaries for r in drop_requests(self._name, s)])
        missing = [x.ledger_id for x in summaries if x.ledger_id not in queued]
        if missing:
            raise ManagedLedgerError(f"{self._name}: ledgers {missing} could not be queued for deletion; "
                                     "the managed ledger is kept")
        await self._delete_record_and_cursors()

    async def _delete_record_and_cursors(self) -> None:
        async with self._meta_lock:
            try:
                await self._metadata.delete(self._key, self._version)
            except (BadVersion, NotFound) as exc:
                raise ManagedLedgerFenced(f"{self._name}: the record changed under us") from exc
            except MetadataError as exc:
                raise ManagedLedgerError(f"{self._name}: deleting the record failed: {exc}") from exc
        self._record_deleted = True
        for name, cursor in list(self._cursors.items()):
            await cursor.discard()
            await self._delete_cursor_key(cursor_key(self._name, name))
        self._cursors.clear()

    async def delete(self) -> None:
        """Metadata first (the record by compare-and-set, then the cursors), storage second. With a deletion
        queue every ledger is queued before the record goes; if one cannot be, nothing is deleted."""
        self._require_writable()
        self._transition_to(LedgerState.DELETING)
        try:
            async with self._admit_lock:
                await self._settled()
            summaries = self._ledgers.summaries()
            ids = [x.ledger_id for x in summaries]
            if self.deletion_queue is None:
                await self._delete_record_and_cursors()
                await self.delete_ledgers_quietly(ids)
                for summary in summaries:
                    if summary.offload is not None:
                        await self._discard_offloaded(summary.offload)
            else:
                await self._drops.run_holding(ids, self._queue_then_delete(self.deletion_queue, summaries))
        except BaseException:
            self._transition_to(LedgerState.CLOSED)
            self._closed()
            raise
        self._transition_to(LedgerState.DELETED)
        self._closed()
