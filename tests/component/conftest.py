"""In-process brokers on port 0 over in-memory metadata and ledger stores: one (``standalone``), or two sharing
one metadata store and one ledger store (``two_brokers``, the seam the cluster work builds on: what one
broker writes, the other reads; a topic one unloads, the other can load)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from magnetar.app.settings import StandaloneSettings
from magnetar.app.standalone import Standalone
from magnetar.broker.config import BrokerConfig
from magnetar.broker.deletion.config import DeletionConfig
from magnetar.metadata.memory import MemoryMetadataStore
from magnetar.storage.memory import MemoryLedgerStore

#: each broker's own ledger-deletion topics would live in the one shared store: ledgers are deleted directly
SHARED_STORE_CONFIG = BrokerConfig(ledger_deletion=DeletionConfig(enabled=False))


@pytest.fixture
async def standalone(tmp_path: Path) -> AsyncIterator[Standalone]:
    settings = StandaloneSettings(data_dir=tmp_path, bind_address="127.0.0.1", broker_port=0, web_port=0)
    sa = Standalone(settings, metadata=MemoryMetadataStore(), store=MemoryLedgerStore())
    await sa.start()
    try:
        yield sa
    finally:
        await sa.stop()


@pytest.fixture
async def two_brokers(tmp_path: Path) -> AsyncIterator[tuple[Standalone, Standalone]]:
    """Brokers ``a`` and ``b`` in this process over one metadata store and one ledger store. Each owns every
    topic (LocalOwnership) until the cluster work gives them an ownership to share."""
    metadata, store = MemoryMetadataStore(), MemoryLedgerStore()
    brokers: list[Standalone] = []
    try:
        for name in ("a", "b"):
            settings = StandaloneSettings(data_dir=tmp_path / name, bind_address="127.0.0.1", broker_port=0,
                                          web_port=0, broker=SHARED_STORE_CONFIG)
            broker = Standalone(settings, metadata=metadata, store=store)
            brokers.append(broker)
            await broker.start()
        yield brokers[0], brokers[1]
    finally:
        for broker in brokers:
            await broker.stop()
