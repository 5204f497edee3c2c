"""Direct tests of the in-memory ledger store's contract."""

from __future__ import annotations

import asyncio

import pytest

from magnetar.core.clock import ManualClock
from magnetar.storage import (
    EntryNotFound,
    LedgerNotFound,
    LedgerSealed,
    MemoryLedgerStore,
    StoreClosed,
)


async def test_append_read_info_seal() -> None:
    store = MemoryLedgerStore(clock=ManualClock(start_ms=42))
    info = await store.create_ledger({"component": "managed-ledger"})
    assert (info.ledger_id, info.entries, info.created_ms) == (1, 0, 42)
    assert [await store.append(info.ledger_id, d) for d in (b"a", memoryview(b"bc"))] == [0, 1]
    assert await store.read(info.ledger_id, 0, 1) == [b"a", b"bc"]
    sealed = await store.seal(info.ledger_id)
    assert (sealed.entries, sealed.size_bytes, sealed.sealed) == (2, 3, True)
    assert await store.seal(info.ledger_id) == sealed
    assert sealed.custom_metadata == {"component": "managed-ledger"}
    with pytest.raises(LedgerSealed):
        await store.append(info.ledger_id, b"x")


async def test_concurrent_appends_get_consecutive_ids_in_call_order() -> None:
    store = MemoryLedgerStore()
    ledger_id = (await store.create_ledger({})).ledger_id
    ids = await asyncio.gather(*(store.append(ledger_id, bytes([i])) for i in range(20)))
    assert ids == list(range(20))
    assert await store.read(ledger_id, 0, 19) == [bytes([i]) for i in range(20)]


@pytest.mark.parametrize(("first", "last"), [(-1, 0), (1, 0), (0, 2), (5, 9)])
async def test_out_of_range_reads(first: int, last: int) -> None:
    store = MemoryLedgerStore()
    ledger_id = (await store.create_ledger({})).ledger_id
    await store.append(ledger_id, b"a")
    await store.append(ledger_id, b"b")
    with pytest.raises(EntryNotFound):
        await store.read(ledger_id, first, last)


async def test_ids_are_never_reused_and_listed_ascending() -> None:
    store = MemoryLedgerStore()
    ids = [(await store.create_ledger({})).ledger_id for _ in range(3)]
    await store.delete(ids[2])
    assert (await store.create_ledger({})).ledger_id == 4
    assert await store.list_ledgers() == [1, 2, 4]
    with pytest.raises(LedgerNotFound):
        await store.delete(ids[2])
    await store.close()
    with pytest.raises(StoreClosed):
        await store.info(1)
