"""Offload in the ledger layer over both drivers: the record's offload context, reads after the local copy
is gone, reopen, crash-interrupted offloads retried under a fresh uuid, faults as errors (never data), and
trimming/deleting the offloaded copies."""

from __future__ import annotations

import dataclasses

import pytest

from magnetar.core.clock import ManualClock
from magnetar.ledger.api import (
    EntryCorruptedError,
    InitialPosition,
    LedgerOffload,
    ManagedLedgerConfig,
    ManagedLedgerError,
    OffloadReadError,
    Position,
    RetentionPolicy,
)
from magnetar.ledger.factory import LedgerFactory
from magnetar.ledger.formats import decode_ledger, ledger_key
from magnetar.ledger.managed import ManagedLedgerImpl
from magnetar.ledger.offload import OffloadFailed
from magnetar.metadata.memory import MemoryMetadataStore
from magnetar.storage.api import LedgerNotFound
from magnetar.storage.memory import MemoryLedgerStore
from magnetar.storage.offload import BlockOffloadStore

NAME = "public/default/persistent/tiered"


class Parts:
    def __init__(self, offload: BlockOffloadStore) -> None:
        self.store = MemoryLedgerStore()
        self.metadata = MemoryMetadataStore()
        self.clock = ManualClock()
        self.offload = offload

    def factory(self) -> LedgerFactory:
        return LedgerFactory(self.store, self.metadata, config=ManagedLedgerConfig(max_entries_per_ledger=10),
                             clock=self.clock, offload_store=self.offload)

    async def record_ledgers(self):  # type: ignore[no-untyped-def]
        stored = await self.metadata.get(ledger_key(NAME))
        assert stored is not None
        return decode_ledger(stored.value, NAME).ledgers


async def filled(parts: Parts, count: int = 35) -> ManagedLedgerImpl:
    ml = await parts.factory().open(NAME)
    for i in range(count):
        await ml.add_entry(b"entry-%d" % i)
    return ml


async def read_all(ml: ManagedLedgerImpl) -> list[bytes]:
    cursor = ml.new_non_durable_cursor(ml.first_position(), "reader")
    out: list[bytes] = []
    for _ in range(100):
        batch = await cursor.read_entries(7)
        if not batch:
            return out
        out.extend(e.data for e in batch)
    raise AssertionError("reader did not finish")


EXPECTED = [b"entry-%d" % i for i in range(35)]


async def test_offload_release_and_read_back_after_reopen(offload_store: BlockOffloadStore) -> None:
    parts = Parts(offload_store)
    ml = await filled(parts)
    first = ml.ledgers()[0]
    done = await ml.offload_ledger(first.ledger_id)
    assert done.offloaded and done.offload is not None and not done.offload.local_deleted
    assert done.offload.context.driver == offload_store.driver
    recorded = (await parts.record_ledgers())[0]
    assert recorded.offload == done.offload, "the record holds the complete context"
    assert await ml.offload_ledger(first.ledger_id) == done, "idempotent"

    released = await ml.release_local(first.ledger_id)
    assert released.offload is not None and released.offload.local_deleted
    with pytest.raises(LedgerNotFound):
        await parts.store.info(first.ledger_id)
    assert await read_all(ml) == EXPECTED
    await ml.close()

    reopened = await parts.factory().open(NAME)
    assert reopened.ledgers()[0].offload == released.offload
    assert await read_all(reopened) == EXPECTED
    assert (await reopened.read_entry(Position(reopened.first_position().ledger_id, 3))).data == b"entry-3"


async def test_the_current_ledger_never_offloads(offload_store: BlockOffloadStore) -> None:
    ml = await filled(Parts(offload_store))
    with pytest.raises(OffloadFailed, match="current ledger"):
        await ml.offload_ledger(ml.ledgers()[-1].ledger_id)
    with pytest.raises(OffloadFailed, match="not offloaded"):
        await ml.release_local(ml.ledgers()[0].ledger_id)


async def test_an_interrupted_offload_is_retried_under_a_fresh_uuid(offload_store: BlockOffloadStore) -> None:
    parts = Parts(offload_store)
    ml = await filled(parts)
    first = ml.ledgers()[0]
    # a crash after step 1 and part of step 2: the record names an incomplete context whose data exists
    stale = offload_store.new_context(first.ledger_id)
    writer = await offload_store.blobs.writer(stale.data_key)
    await writer.write(b"half a block")
    await writer.commit()
    await ml.update_summary(dataclasses.replace(first, offload=LedgerOffload(stale, False, False, 0)))
    await ml.close()

    reopened = await parts.factory().open(NAME)
    pending = reopened.ledgers()[0]
    assert pending.offload is not None and not pending.offloaded, "an incomplete copy is not offloaded"
    assert await read_all(reopened) == EXPECTED, "reads stay local"
    done = await reopened.offload_ledger(first.ledger_id)
    assert done.offload is not None and done.offload.context.uuid != stale.uuid
    keys = await offload_store.blobs.list("")
    assert stale.data_key not in keys, "the partial object was cleaned"
    assert done.offload.context.index_key in keys


async def test_faults_are_errors_never_data(offload_store: BlockOffloadStore) -> None:
    parts = Parts(offload_store)
    ml = await filled(parts)
    a, b = ml.ledgers()[0], ml.ledgers()[1]
    for summary in (a, b):
        await ml.offload_ledger(summary.ledger_id)
        await ml.release_local(summary.ledger_id)
    context_a = ml.ledgers()[0].offload.context  # type: ignore[union-attr]
    context_b = ml.ledgers()[1].offload.context  # type: ignore[union-attr]
    await offload_store.blobs.delete([context_a.data_key])  # deleted behind the broker's back
    with pytest.raises(ManagedLedgerError, match="not found"):
        await ml.read_range(a.ledger_id, 0, 2)
    good = await offload_store.read(context_b, 0, b.entries - 1)
    blob = bytearray(b"".join([await offload_store.blobs.read(context_b.data_key, 0, 1 << 20)]))
    blob[40] ^= 0x55
    writer = await offload_store.blobs.writer(context_b.data_key)
    await writer.write(bytes(blob))
    await writer.commit()
    other = BlockOffloadStore(offload_store.blobs, dataclasses.replace(offload_store._settings))  # no cache
    ml.offload_store = other
    with pytest.raises(EntryCorruptedError):
        await ml.read_range(b.ledger_id, 0, b.entries - 1)
    assert good == EXPECTED[10:20]


async def test_release_refuses_when_the_copy_is_unreadable(offload_store: BlockOffloadStore) -> None:
    parts = Parts(offload_store)
    ml = await filled(parts)
    first = await ml.offload_ledger(ml.ledgers()[0].ledger_id)
    assert first.offload is not None
    await offload_store.blobs.delete([first.offload.context.index_key])
    with pytest.raises(OffloadFailed, match="local copy is kept"):
        await ml.release_local(first.ledger_id)
    assert (await parts.store.info(first.ledger_id)).entries == 10
    assert await read_all(ml) == EXPECTED


async def test_trim_and_delete_remove_offloaded_copies(offload_store: BlockOffloadStore) -> None:
    parts = Parts(offload_store)
    ml = await filled(parts)
    cursor = await ml.open_cursor("sub", InitialPosition.EARLIEST)
    contexts = []
    for summary in ml.ledgers()[:3]:
        done = await ml.offload_ledger(summary.ledger_id)
        assert done.offload is not None
        contexts.append(done.offload.context)
    await ml.release_local(ml.ledgers()[0].ledger_id)
    cursor.acknowledge_cumulative(Position(ml.ledgers()[1].ledger_id, 9))
    result = await ml.trim(RetentionPolicy())
    assert len(result.trimmed) == 2
    keys = await offload_store.blobs.list("")
    assert contexts[0].index_key not in keys and contexts[1].index_key not in keys
    assert contexts[2].index_key in keys
    await ml.delete()
    assert await offload_store.blobs.list("") == []


async def test_a_released_ledger_without_an_offload_store_is_a_clear_error(offload_store: BlockOffloadStore) -> None:
    ml = await filled(Parts(offload_store))
    first = ml.ledgers()[0].ledger_id
    await ml.offload_ledger(first)
    await ml.release_local(first)
    ml.offload_store = None  # the operator removed managedLedgerOffloadDriver
    with pytest.raises(ManagedLedgerError, match="no offload store is configured"):
        await ml.read_range(first, 0, 0)


async def test_read_failures_are_counted_and_cleared_by_a_good_read(offload_store: BlockOffloadStore) -> None:
    parts = Parts(offload_store)
    ml = await filled(parts)
    first = ml.ledgers()[0]
    await ml.offload_ledger(first.ledger_id)
    await ml.release_local(first.ledger_id)
    context = ml.ledgers()[0].offload.context  # type: ignore[union-attr]
    saved = await offload_store.blobs.read(context.data_key, 0, 1 << 20)
    await offload_store.blobs.delete([context.data_key])
    with pytest.raises(OffloadReadError, match=f"offloaded ledger {first.ledger_id}") as caught:
        await ml.read_range(first.ledger_id, 0, 2)
    assert caught.value.ledger_id == first.ledger_id and not caught.value.retryable  # gone: not by retrying
    reads = ml.offload_reads
    assert (reads.errors, reads.failing_ledger) == (1, first.ledger_id) and "not found" in reads.last_error
    writer = await offload_store.blobs.writer(context.data_key)  # restored
    await writer.write(saved)
    await writer.commit()
    assert await ml.read_range(first.ledger_id, 0, 2) == EXPECTED[:3]
    assert not reads.failing and reads.errors == 1
