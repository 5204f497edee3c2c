"""The managed ledger over the real embedded ledger store and SQLite metadata, across a process restart."""

from __future__ import annotations

import asyncio
from pathlib import Path

from ledger_world import NAME

from magnetar.ledger.api import InitialPosition, ManagedLedgerConfig
from magnetar.ledger.factory import LedgerFactory
from magnetar.metadata.sqlite import SqliteMetadataStore
from magnetar.storage.embedded import EmbeddedLedgerStore

CONFIG = ManagedLedgerConfig(max_entries_per_ledger=7)


async def test_concurrent_adds_and_acks_survive_an_unclean_restart(tmp_path: Path) -> None:
    store = await EmbeddedLedgerStore.open(tmp_path / "ledgers")
    metadata = SqliteMetadataStore(tmp_path / "metadata.db")
    ml = await LedgerFactory(store, metadata, config=CONFIG).open(NAME)
    cursor = await ml.open_cursor("sub", InitialPosition.EARLIEST)
    positions = await asyncio.gather(*(ml.add_entry(b"%d" % i) for i in range(50)))
    assert list(positions) == sorted(positions) and len(set(positions)) == 50
    cursor.acknowledge(positions[:10])
    cursor.acknowledge(positions[20:25])
    await cursor.flush()
    await store.close()  # the process ends without closing the managed ledger
    await metadata.close()

    store = await EmbeddedLedgerStore.open(tmp_path / "ledgers")
    metadata = SqliteMetadataStore(tmp_path / "metadata.db")
    factory = LedgerFactory(store, metadata, config=CONFIG)
    again = await factory.open(NAME)
    assert again.number_of_entries() == 50
    restored = again.cursors["sub"]
    assert restored.mark_delete_position == positions[9] and restored.backlog_entries() == 35
    read = [e.data for e in await restored.read_entries(100)]
    assert read == [b"%d" % i for i in [*range(10, 20), *range(25, 50)]]
    assert (await again.add_entry(b"after")) > positions[-1]
    await factory.close()
    await store.close()
    await metadata.close()
