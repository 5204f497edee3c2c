"""An in-process broker on port 0 over in-memory metadata and ledger stores."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from magnetar.metadata.memory import MemoryMetadataStore
from magnetar.server.standalone import Standalone, StandaloneSettings
from magnetar.storage.memory import MemoryLedgerStore


@pytest.fixture
async def standalone(tmp_path: Path) -> AsyncIterator[Standalone]:
    settings = StandaloneSettings(data_dir=tmp_path, bind_address="127.0.0.1", broker_port=0, web_port=0)
    sa = Standalone(settings, metadata=MemoryMetadataStore(), store=MemoryLedgerStore())
    await sa.start()
    try:
        yield sa
    finally:
        await sa.stop()
