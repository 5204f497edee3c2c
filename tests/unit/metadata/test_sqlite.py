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
from magnetar.metadata import sqlite as sqlite_store
from tests.zk_server import Events


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


async def test_another_connections_writes_are_told_in_order_and_this_stores_own_once(tmp_path: Path) -> None:
    watched = SqliteMetadataStore(tmp_path / "m.db", watch_poll_ms=10)
    other = SqliteMetadataStore(tmp_path / "m.db")  # another process would be the same: another connection
    events = Events()
    watched.watch("/ns", events)
    await watched.put("/ns/mine", b"1")  # told inside the write
    await other.put("/ns/x", b"1")
    await other.put("/ns/x", b"2")
    await other.put("/elsewhere", b"1")  # not below the prefix
    await other.delete("/ns/x")
    await events.until(lambda items: WatchEvent("/ns/x", EventKind.DELETED) in items)
    await watched.put("/ns/mine", b"2")
    assert events.items == [
        WatchEvent("/ns/mine", EventKind.CREATED),
        WatchEvent("/ns/x", EventKind.CREATED),
        WatchEvent("/ns/x", EventKind.MODIFIED),
        WatchEvent("/ns/x", EventKind.DELETED),
        WatchEvent("/ns/mine", EventKind.MODIFIED),
    ]
    await other.close()
    await watched.close()


async def test_a_store_that_fell_behind_the_kept_changes_is_told_at_each_watched_prefix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_store, "CHANGES_KEPT", 3)
    monkeypatch.setattr(sqlite_store, "_TRIM_EVERY", 1)
    watched = SqliteMetadataStore(tmp_path / "m.db", watch_poll_ms=3_600_000)  # looks only when told to here
    other = SqliteMetadataStore(tmp_path / "m.db")
    events = Events()
    watched.watch("/ns", events)
    for i in range(10):
        await other.put(f"/ns/k{i}", b"v")
    watched.tell_other_writes()
    assert events.items == [WatchEvent("/ns", EventKind.MODIFIED)] + [
        WatchEvent(f"/ns/k{i}", EventKind.CREATED) for i in (7, 8, 9)]  # the three rows still kept
    watched.tell_other_writes()  # nothing new: nothing told
    assert len(events.items) == 4
    await other.close()
    await watched.close()
