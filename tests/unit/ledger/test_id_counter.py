"""Ledger ids from a counter in the metadata store: unique across brokers and ascending in the order handed out."""

from __future__ import annotations

import asyncio

import pytest

from magnetar.ledger.id_counter import COUNTER_KEY, MetadataLedgerIdAllocator
from magnetar.metadata import MemoryMetadataStore
from magnetar.storage.api import StorageIOError


async def test_ids_ascend_across_brokers_in_the_order_handed_out() -> None:
    store = MemoryMetadataStore()
    brokers = [MetadataLedgerIdAllocator(store), MetadataLedgerIdAllocator(store.another_session())]
    handed: list[int] = []

    async def allocate(allocator: MetadataLedgerIdAllocator) -> None:
        for _ in range(50):
            handed.append(await allocator.next_id())

    await asyncio.gather(*(allocate(b) for b in brokers))
    assert handed == list(range(1, 101)), "unique, dense, and each above every id handed out before it"
    assert (await store.get(COUNTER_KEY)).value == b"100"  # type: ignore[union-attr]


async def test_floor_and_a_corrupt_counter() -> None:
    store = MemoryMetadataStore()
    assert await MetadataLedgerIdAllocator(store, floor=500).next_id() == 500
    assert await MetadataLedgerIdAllocator(store, floor=10).next_id() == 501
    await store.put(COUNTER_KEY, b"not a number")
    with pytest.raises(StorageIOError, match="does not hold a ledger id"):
        await MetadataLedgerIdAllocator(store).next_id()
