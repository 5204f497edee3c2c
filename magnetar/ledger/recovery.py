"""Opening a managed ledger: recover the ledger list from metadata and storage, claim it, load cursors.

Owns the recovery order: read the record; seal the previous writer's last ledger in storage and take its
real entry count from there (the record's count of the last ledger is only as of its last rollover or
close); drop ledgers left empty; create the new current ledger eagerly (so ``last_confirmed`` always names
a ledger, as Pulsar does); write the record with compare-and-set (the claim: a conflict means another
opener won, ``ManagedLedgerFenced``); then restore durable cursors, rewriting each record to claim it too.
A brand-new managed ledger also clears cursor records a crashed delete may have left under its key.
Knows nothing of the broker.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from urllib.parse import unquote

from magnetar.core.clock import Clock
from magnetar.ledger.acks import AckState
from magnetar.ledger.api import LedgerSummary, ManagedLedgerConfig, ManagedLedgerError, ManagedLedgerFenced
from magnetar.ledger.cursor import CursorPersistence, ManagedCursor, SleepMs
from magnetar.ledger.deletion import DeletionQueue
from magnetar.ledger.formats import LedgerRecord, cursors_key, decode_cursor, decode_ledger, ledger_key
from magnetar.ledger.ledger_list import LedgerList
from magnetar.ledger.managed import ManagedLedgerImpl
from magnetar.metadata.api import NEW_KEY, BadVersion, MetadataError, MetadataStore, NotFound
from magnetar.storage.api import LedgerNotFound, LedgerStore, StorageError
from magnetar.storage.offload.api import OffloadStore

log = logging.getLogger("magnetar.ledger")


async def open_managed_ledger(
    name: str,
    store: LedgerStore,
    metadata: MetadataStore,
    *,
    config: ManagedLedgerConfig,
    clock: Clock,
    sleep_ms: SleepMs,
    on_closed: Callable[[ManagedLedgerImpl], None],
    offload_store: OffloadStore | None = None,
    deletion_queue: DeletionQueue | None = None,
) -> ManagedLedgerImpl:
    ledger = ManagedLedgerImpl(
        name, store, metadata, config=config, clock=clock, sleep_ms=sleep_ms, on_closed=on_closed,
        offload_store=offload_store,
    )
    ledger.deletion_queue = deletion_queue
    try:
        await _recover(ledger, store, metadata)
    except BaseException:
        ledger.abandon()
        raise
    return ledger


async def _recover(ledger: ManagedLedgerImpl, store: LedgerStore, metadata: MetadataStore) -> None:
    name = ledger.name
    try:
        stored = await metadata.get(ledger_key(name))
    except MetadataError as exc:
        raise ManagedLedgerError(f"{name}: reading the record failed: {exc}") from exc
    record = LedgerRecord(()) if stored is None else decode_ledger(stored.value, ledger_key(name))
    version = NEW_KEY if stored is None else stored.version
    recovered = await _seal_last(name, store, list(record.ledgers))
    empty = [x.ledger_id for x in recovered if x.entries == 0]
    ledgers = LedgerList(x for x in recovered if x.entries > 0)
    current = await ledger.create_ledger()
    ledgers.append(current)
    try:
        version = await ledger.claim(ledgers, record.properties, version)
    except ManagedLedgerError:
        await ledger.delete_ledgers_quietly([current.ledger_id])
        raise
    await ledger.delete_ledgers_quietly(empty)
    if stored is None:
        await _clear_stale_cursors(name, metadata)
        cursors: list[ManagedCursor] = []
    else:
        cursors = await _load_cursors(ledger, metadata, ledgers)
    ledger.install(ledgers, record.properties, version, cursors)
    # a new or empty ledger opening is routine (thousands at topic creation): only recoveries of data are news
    level = logging.INFO if ledgers.total_entries() or cursors else logging.DEBUG
    log.log(level, "%s: opened with %d ledgers, %d entries, %d cursors; current ledger %d", name, len(ledgers),
            ledgers.total_entries(), len(cursors), current.ledger_id)


async def _seal_last(name: str, store: LedgerStore, ledgers: list[LedgerSummary]) -> list[LedgerSummary]:
    """Seal the previous writer's current ledger and take its real size from storage."""
    if not ledgers:
        return ledgers
    last = ledgers[-1]
    try:
        info = await store.seal(last.ledger_id)
    except LedgerNotFound:
        log.warning("%s: ledger %d is in the record but not in storage; dropped", name, last.ledger_id)
        return ledgers[:-1]
    except StorageError as exc:
        raise ManagedLedgerError(f"{name}: sealing ledger {last.ledger_id} failed: {exc}") from exc
    ledgers[-1] = dataclasses.replace(last, entries=info.entries, size_bytes=info.size_bytes)
    return ledgers


async def _cursor_names(name: str, metadata: MetadataStore) -> list[str]:
    try:
        return await metadata.children(cursors_key(name))
    except MetadataError as exc:
        raise ManagedLedgerError(f"{name}: listing cursors failed: {exc}") from exc


async def _clear_stale_cursors(name: str, metadata: MetadataStore) -> None:
    for child in await _cursor_names(name, metadata):
        try:
            await metadata.delete(f"{cursors_key(name)}/{child}")
        except NotFound:
            pass
        except MetadataError as exc:
            raise ManagedLedgerError(f"{name}: clearing a stale cursor failed: {exc}") from exc


async def _load_cursors(
    ledger: ManagedLedgerImpl, metadata: MetadataStore, ledgers: LedgerList
) -> list[ManagedCursor]:
    """Restore durable cursors; a corrupt cursor record fails the open (CorruptMetadata)."""
    cursors = []
    for child in await _cursor_names(ledger.name, metadata):
        key = f"{cursors_key(ledger.name)}/{child}"
        try:
            stored = await metadata.get(key)
        except MetadataError as exc:
            raise ManagedLedgerError(f"{ledger.name}: reading {key} failed: {exc}") from exc
        if stored is None:
            continue
        record = decode_cursor(stored.value, key)
        acks = AckState(ledgers, record.mark_delete)
        acks.restore(record.ranges, record.batches)
        version = await _claim_cursor(ledger.name, metadata, key, stored.value, stored.version)
        persistence = CursorPersistence(metadata, key, version, ledger.sleep_ms)
        cursors.append(ledger.make_cursor(unquote(child), acks, persistence, record.properties))
    return cursors


async def _claim_cursor(name: str, metadata: MetadataStore, key: str, value: bytes, version: int) -> int:
    """Rewrite the record unchanged, so a previous owner's late cursor write fails its compare-and-set
    (fencing it) instead of succeeding and then fencing us."""
    try:
        return (await metadata.put(key, value, version)).version
    except (BadVersion, NotFound) as exc:
        raise ManagedLedgerFenced(f"{name}: {key} changed while opening") from exc
    except MetadataError as exc:
        raise ManagedLedgerError(f"{name}: claiming {key} failed: {exc}") from exc
