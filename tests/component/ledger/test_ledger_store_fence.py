"""A fence raised by the ledger store itself (a shared store's seal by another writer) fences the managed
ledger exactly as a ledger sealed by another opener does: FENCED, later writes refused, reads still served."""

from __future__ import annotations

import pytest
from ledger_world import NAME, World

from magnetar.ledger.api import ManagedLedgerFenced
from magnetar.ledger.states import LedgerState
from magnetar.storage.api import LedgerFenced
from magnetar.storage.memory import MemoryLedgerStore


class FencingStore(MemoryLedgerStore):
    """Appends succeed until ``fence`` is set, then fail as a shared store's fenced PUT does."""

    fence = False

    async def append(self, ledger_id: int, data: bytes | memoryview) -> int:
        if self.fence:
            raise LedgerFenced(f"ledger {ledger_id}: sealed by another writer", ledger_id=ledger_id)
        return await super().append(ledger_id, data)


async def test_a_store_fence_moves_the_managed_ledger_to_fenced() -> None:
    world = World()
    store = FencingStore(clock=world.clock)
    world.store = store
    ml = await world.factory().open(NAME)
    first = await ml.add_entry(b"kept")
    store.fence = True
    with pytest.raises(ManagedLedgerFenced):
        await ml.add_entry(b"refused")
    assert ml.state is LedgerState.FENCED
    with pytest.raises(ManagedLedgerFenced):
        await ml.add_entry(b"later")
    assert (await ml.read_entry(first)).data == b"kept"
