"""Offloading a managed ledger's sealed ledgers, and releasing their local copies (tiered storage).

The order of an offload makes a crash at any point safe (Pulsar's order):

1. the record gets the ledger's new offload context with ``complete=false`` (compare-and-set): the uuid is
   known before any object exists, so a crash leaves objects a later attempt can find and delete;
2. the blocks, then the index, go to the offload store;
3. the copy is read back and checked (index, size, every block's checksum);
4. the record says ``complete=true``. Only a complete copy is ever read.

An attempt that finds an incomplete context deletes that context's objects and starts again under a fresh
uuid, so the ledger list never points at an incomplete object as if it were whole.

Releasing the local copy: the offloaded copy's index and size are checked again, then the record says
``local_deleted`` (Pulsar's ``bookkeeperDeleted``), then the local ledger is deleted. A crash between the
last two leaves a local ledger nobody reads; its custom metadata names its owner.

Knows nothing of policies or the broker: it does what it is asked, once.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from typing import Protocol

from magnetar.core.clock import Clock
from magnetar.ledger.api import LedgerOffload, LedgerSummary, ManagedLedgerError, OffloadReadError, OffloadReadHealth
from magnetar.ledger.deletion import DeletionQueue, LedgerType, PendingDeleteLedger, context_of
from magnetar.ledger.ledger_list import LedgerList
from magnetar.storage.api import EntryCorrupted, LedgerNotFound, LedgerStore, StorageError
from magnetar.storage.offload.api import OffloadError, OffloadStore

log = logging.getLogger("magnetar.ledger.offload")


class OffloadingLedger(Protocol):
    """What an offload needs of its managed ledger (``ManagedLedgerImpl`` has it)."""

    @property
    def name(self) -> str: ...

    @property
    def clock(self) -> Clock: ...

    @property
    def ledger_list(self) -> LedgerList: ...

    offload_store: OffloadStore | None
    offload_lock: asyncio.Lock
    offload_reads: OffloadReadHealth
    deletion_queue: DeletionQueue | None

    async def read_range(self, ledger_id: int, first_entry: int, last_entry: int) -> list[bytes]: ...

    async def update_summary(self, summary: LedgerSummary) -> None: ...

    async def delete_ledgers_quietly(self, ledger_ids: list[int]) -> None: ...


class OffloadFailed(ManagedLedgerError):
    """An offload or a release did not happen; the message says why (the store's error is the cause)."""


def _store(ml: OffloadingLedger) -> OffloadStore:
    store = ml.offload_store
    if store is None:
        raise OffloadFailed(f"{ml.name}: no offload store is configured (managedLedgerOffloadDriver)")
    return store


def _sealed(ml: OffloadingLedger, ledger_id: int) -> LedgerSummary:
    summary = ml.ledger_list.get(ledger_id)
    if summary is None:
        raise OffloadFailed(f"{ml.name}: no ledger {ledger_id}")
    if ledger_id == ml.ledger_list.current.ledger_id:
        raise OffloadFailed(f"{ml.name}: ledger {ledger_id} is the current ledger; only sealed ones offload")
    return summary


async def discard_copy(ml: OffloadingLedger, offload: LedgerOffload) -> None:
    """Delete one copy's objects (a failed or superseded attempt, a trimmed ledger): queued for two-phase
    deletion when a queue is set, else best effort here."""
    if ml.deletion_queue is not None:
        request = PendingDeleteLedger(ml.name, offload.context.ledger_id, ledger_type=LedgerType.OFFLOAD_LEDGER,
                                      offload_context=context_of(offload.context))
        if offload.context.ledger_id in await ml.deletion_queue.enqueue([request]):
            return
    store = ml.offload_store
    if store is None:
        log.warning("%s: cannot delete offloaded copy %s of ledger %d: no offload store", ml.name,
                    offload.context.uuid, offload.context.ledger_id)
        return
    try:
        await store.delete(offload.context)
    except StorageError as exc:
        log.warning("%s: offloaded copy %s of ledger %d not deleted: %s", ml.name, offload.context.uuid,
                    offload.context.ledger_id, exc)


async def offload_ledger(ml: OffloadingLedger, ledger_id: int, now_ms: int) -> LedgerSummary:
    async with ml.offload_lock:
        return await _offload_ledger(ml, ledger_id, now_ms)


async def _offload_ledger(ml: OffloadingLedger, ledger_id: int, now_ms: int) -> LedgerSummary:
    store = _store(ml)
    summary = _sealed(ml, ledger_id)
    if summary.offload is not None and summary.offload.complete:
        return summary
    if summary.offload is not None:
        stale = summary.offload.context
        log.info("%s: ledger %d: cleaning interrupted offload %s", ml.name, ledger_id, stale.uuid)
        try:
            await store.delete(stale)
        except StorageError as exc:  # the record keeps naming it until it is gone: nothing is orphaned
            raise OffloadFailed(
                f"{ml.name}: ledger {ledger_id}: the interrupted offload {stale.uuid} cannot be cleaned yet: {exc}"
            ) from exc
    context = store.new_context(ledger_id)
    pending = LedgerOffload(context, complete=False, local_deleted=False, timestamp_ms=now_ms)
    await ml.update_summary(dataclasses.replace(summary, offload=pending))
    try:
        metadata = {"pulsar/managed-ledger": ml.name, "application": "magnetar", "component": "managed-ledger"}

        async def read(first: int, last: int) -> list[bytes]:
            return await ml.read_range(ledger_id, first, last)

        await store.write_ledger(context, summary.entries, read, metadata)
        copied = await store.verify(context, summary.entries)
    except (StorageError, ManagedLedgerError) as exc:
        await discard_copy(ml, pending)
        raise OffloadFailed(f"{ml.name}: offload of ledger {ledger_id} failed: {exc}") from exc
    done = dataclasses.replace(pending, complete=True, timestamp_ms=ml.clock.now_ms())
    current = ml.ledger_list.get(ledger_id)
    if current is None:
        await discard_copy(ml, pending)
        raise OffloadFailed(f"{ml.name}: ledger {ledger_id} was trimmed during its offload; the copy is deleted")
    result = dataclasses.replace(current, offload=done)
    try:
        await ml.update_summary(result)
    except ManagedLedgerError:
        if ml.ledger_list.get(ledger_id) is None:  # trimmed meanwhile: the copy has no owner left
            await discard_copy(ml, pending)
        raise  # otherwise the record may hold it (an ambiguous metadata failure): the next attempt cleans it
    log.info("%s: offloaded ledger %d (%d entries, %d bytes, %d blocks) to %s %s as %s", ml.name, ledger_id,
             copied.entries, copied.size_bytes, copied.blocks, context.driver, context.bucket, context.uuid)
    return result


async def release_local(ml: OffloadingLedger, ledger_id: int) -> LedgerSummary:
    async with ml.offload_lock:
        return await _release_local(ml, ledger_id)


async def _release_local(ml: OffloadingLedger, ledger_id: int) -> LedgerSummary:
    store = _store(ml)
    summary = _sealed(ml, ledger_id)
    offload = summary.offload
    if offload is None or not offload.complete:
        raise OffloadFailed(f"{ml.name}: ledger {ledger_id} is not offloaded; its local copy stays")
    if offload.local_deleted:
        return summary
    try:
        await store.verify(offload.context, summary.entries)
    except StorageError as exc:
        raise OffloadFailed(
            f"{ml.name}: ledger {ledger_id}: the offloaded copy {offload.context.uuid} is not readable ({exc}); "
            "the local copy is kept"
        ) from exc
    released = dataclasses.replace(summary, offload=dataclasses.replace(offload, local_deleted=True))
    await ml.update_summary(released)
    await ml.delete_ledgers_quietly([ledger_id])
    log.info("%s: deleted the local copy of offloaded ledger %d", ml.name, ledger_id)
    return released


async def read_stored(
    ml: OffloadingLedger, local: LedgerStore, ledger_id: int, first_entry: int, last_entry: int
) -> list[bytes]:
    """Entries from the local store while it has the ledger, from the offload store once a complete copy
    is all there is."""
    summary = ml.ledger_list.get(ledger_id)
    offload = summary.offload if summary is not None else None
    if offload is None or not offload.complete:
        return await local.read(ledger_id, first_entry, last_entry)
    store = ml.offload_store
    if store is None:
        if offload.local_deleted:
            c = offload.context
            raise StorageError(f"ledger {ledger_id} is only in the offload store ({c.driver} {c.bucket!r}), "
                               "and no offload store is configured (managedLedgerOffloadDriver)", ledger_id)
        return await local.read(ledger_id, first_entry, last_entry)
    if not offload.local_deleted:
        try:
            return await local.read(ledger_id, first_entry, last_entry)
        except LedgerNotFound:
            pass  # deleted by a release whose record write was not seen: the offloaded copy is complete
    try:
        entries = await store.read(offload.context, first_entry, last_entry)
    except (OffloadError, EntryCorrupted) as exc:  # the store failed: counted, shown in stats, never data
        c = offload.context
        ml.offload_reads.failed(ledger_id, f"ledger {ledger_id} ({c.driver} {c.bucket!r} {c.uuid}): {exc}",
                                ml.clock.now_ms())
        if isinstance(exc, EntryCorrupted):
            raise  # the managed ledger's corrupted-entry rules apply
        raise OffloadReadError(f"{ml.name}: reading offloaded ledger {ledger_id} entries {first_entry}.."
                               f"{last_entry} from {c.driver} {c.bucket!r} failed: {exc}", ledger_id,
                               retryable=exc.retryable) from exc
    ml.offload_reads.succeeded(ledger_id)
    return entries
