"""Direct tests of the SQLite metadata store: durability across reopen, WAL mode, CAS, watches."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from magnetar.metadata import (
    NEW_KEY,
    BadVersion,
    EventKind,
    MetadataStoreClosed,
    SqliteMetadataStore,
    WatchEvent,
)


async def test_records_survive_reopen_with_versions(tmp_path: Path) -> None:
    store = SqliteMetadataStore(tmp_path / "m.db")
    await store.put("/ml/t", b"v0", NEW_KEY)
    await store.put("/ml/t", b"v1", 0)
    await store.close()
    reopened = SqliteMetadataStore(tmp_path / "m.db")
    record = await reopened.get("/ml/t")
    assert record is not None and (record.value, record.version) == (b"v1", 1)
    with pytest.raises(BadVersion):
        await reopened.put("/ml/t", b"v2", 0)
    await reopened.close()


async def test_uses_wal_journal(tmp_path: Path) -> None:
    store = SqliteMetadataStore(tmp_path / "m.db")
    await store.put("/a", b"")
    check = sqlite3.connect(tmp_path / "m.db")
    assert check.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    check.close()
    await store.close()


async def test_commit_is_visible_to_another_connection_before_close(tmp_path: Path) -> None:
    # What a SIGKILL leaves behind is what another process sees: the committed WAL content.
    store = SqliteMetadataStore(tmp_path / "m.db")
    await store.put("/a/b", b"x")
    other = SqliteMetadataStore(tmp_path / "m.db")
    assert await other.children("/a") == ["b"]
    await other.close()
    await store.close()


async def test_failed_cas_writes_nothing_and_notifies_nobody(tmp_path: Path) -> None:
    store = SqliteMetadataStore(tmp_path / "m.db")
    events: list[WatchEvent] = []
    store.watch("/a", events.append)
    await store.put("/a", b"1")
    with pytest.raises(BadVersion):
        await store.put("/a", b"2", 7)
    record = await store.get("/a")
    assert record is not None and record.value == b"1"
    assert events == [WatchEvent("/a", EventKind.CREATED)]
    await store.close()
    with pytest.raises(MetadataStoreClosed):
        await store.exists("/a")


async def test_ephemeral_records_go_with_their_session_and_a_dead_ones_are_purged(tmp_path: Path) -> None:
    from magnetar.metadata.coordination import Ownership

    alive = SqliteMetadataStore(tmp_path / "m.db")
    await alive.create("/loadbalance/leader", b"me", ephemeral=True)
    await alive.create("/namespace/b", b"me", ephemeral=True)
    await alive.close()
    assert await _reopened_get(tmp_path, "/loadbalance/leader") is None, "a closed session's keys go"

    died = SqliteMetadataStore(tmp_path / "m.db")
    await died.create("/namespace/b", b"me", ephemeral=True)  # and its process is SIGKILLed: never closed
    restarted = SqliteMetadataStore(tmp_path / "m.db")
    found = await restarted.get_owned("/namespace/b")
    assert found is not None and found[1] is Ownership.OTHER_SESSION
    await restarted.purge_other_sessions()
    assert await restarted.get("/namespace/b") is None
    await restarted.close()


async def _reopened_get(tmp_path: Path, key: str) -> object:
    store = SqliteMetadataStore(tmp_path / "m.db")
    try:
        return await store.get(key)
    finally:
        await store.close()
