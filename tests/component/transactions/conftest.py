"""Fixtures for the topic side of transactions: a stand-in coordinator and a broker that asks it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from magnetar.app.standalone import Standalone
from magnetar.metadata.memory import MemoryMetadataStore
from magnetar.storage.memory import MemoryLedgerStore
from tests.component.transactions.helpers import broker
from tests.txn_fakes import FakeRegistry


@pytest.fixture
def registry() -> FakeRegistry:
    return FakeRegistry()


@pytest.fixture
async def txn_standalone(tmp_path: Path, registry: FakeRegistry) -> AsyncIterator[Standalone]:
    """An in-process broker whose transactional SENDs and ACKs are checked by ``registry``."""
    async with broker(tmp_path, MemoryMetadataStore(), MemoryLedgerStore(), registry) as sa:
        yield sa
