"""The ledger-id allocator port: the one-process counter, and the fence error's place in the error tree."""

from __future__ import annotations

import asyncio

import pytest

from magnetar.storage import CountingLedgerIdAllocator, LedgerFenced, LedgerIdAllocator, LedgerSealed, StorageError


async def test_the_counter_hands_out_each_id_once_in_order() -> None:
    allocator: LedgerIdAllocator = CountingLedgerIdAllocator(start=7)
    ids = await asyncio.gather(*(allocator.next_id() for _ in range(50)))
    assert ids == list(range(7, 57))


def test_ids_start_at_one_or_above() -> None:
    with pytest.raises(ValueError):
        CountingLedgerIdAllocator(start=0)


def test_a_fenced_ledger_is_a_sealed_one_for_its_callers() -> None:
    error = LedgerFenced("ledger 3 sealed by another writer", ledger_id=3)
    assert isinstance(error, LedgerSealed) and isinstance(error, StorageError)
    assert error.ledger_id == 3
