"""The tenants' and namespaces' records magnetar.resources caches follow a second writer of the same SQLite
file (another store object, another OS process): the cache is kept by the store's watch, which tells other
connections' commits within its poll interval. (The same over a real ZooKeeper server:
``tests/component/zookeeper/test_zk_resources.py``.)"""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
from pathlib import Path

from magnetar.broker.names import NamespaceName
from magnetar.metadata import EventKind, SqliteMetadataStore, WatchEvent
from magnetar.resources import MetadataResources, TenantInfo
from magnetar.resources.namespaces import namespace_key
from magnetar.resources.tenants import POLICIES_ROOT
from tests.zk_server import Events

NS = NamespaceName("acme", "app")
WAIT_S = 30.0
#: a second process: writes the namespace's policies through its own store on the same file
WRITER = """
import asyncio, sys
from magnetar.broker.names import NamespaceName
from magnetar.metadata import SqliteMetadataStore
from magnetar.resources import MetadataResources

async def main() -> None:
    store = SqliteMetadataStore(sys.argv[1])
    res = MetadataResources(store)
    ns = NamespaceName("acme", "app")
    current = await res.namespaces.get(ns)
    assert current is not None
    await res.namespaces.put(ns, {**current.value, "message_ttl_in_seconds": int(sys.argv[2])}, current.version)
    await res.close()
    await store.close()

asyncio.run(main())
"""


async def _told(events: Events, key: str, kind: EventKind) -> None:
    await events.until(lambda items: WatchEvent(key, kind) in items, WAIT_S)


async def test_a_cached_namespace_follows_another_store_on_the_same_sqlite_file(tmp_path: Path) -> None:
    path = tmp_path / "metadata.db"
    mine_store, their_store = SqliteMetadataStore(path, watch_poll_ms=20), SqliteMetadataStore(path)
    mine, theirs = MetadataResources(mine_store), MetadataResources(their_store)
    events = Events()
    mine_store.watch(POLICIES_ROOT, events)  # the prefix the cache watches: told in the same turn as the cache
    try:
        await theirs.tenants.create("acme", TenantInfo(allowed_clusters=("standalone",)))
        await theirs.namespaces.create(NS, {"message_ttl_in_seconds": 1})
        await _told(events, namespace_key(NS), EventKind.CREATED)
        assert (await mine.namespaces.policies(NS))["message_ttl_in_seconds"] == 1

        behind = sqlite3.connect(path, isolation_level=None)  # a write no store hears of: the cache keeps its copy
        behind.execute("UPDATE records SET value = ? WHERE key = ?", (b'{"message_ttl_in_seconds": 9}',
                                                                     namespace_key(NS)))
        behind.close()
        assert (await mine.namespaces.policies(NS))["message_ttl_in_seconds"] == 1  # read from memory

        events.items.clear()
        current = await theirs.namespaces.get(NS)
        assert current is not None
        await theirs.namespaces.put(NS, {"message_ttl_in_seconds": 2}, current.version)
        await _told(events, namespace_key(NS), EventKind.MODIFIED)
        assert (await mine.namespaces.policies(NS))["message_ttl_in_seconds"] == 2

        await theirs.namespaces.delete(NS)
        await _told(events, namespace_key(NS), EventKind.DELETED)
        assert not await mine.namespaces.exists(NS)
        await theirs.tenants.delete("acme")
        await _told(events, f"{POLICIES_ROOT}/acme", EventKind.DELETED)
        assert await mine.tenants.get("acme") is None
    finally:
        await mine.close()
        await theirs.close()
        await mine_store.close()
        await their_store.close()


async def test_a_cached_namespace_follows_another_process_writing_the_same_sqlite_file(tmp_path: Path) -> None:
    path = tmp_path / "metadata.db"
    store = SqliteMetadataStore(path, watch_poll_ms=20)
    res = MetadataResources(store)
    events = Events()
    store.watch(POLICIES_ROOT, events)
    try:
        await res.tenants.create("acme", TenantInfo())
        await res.namespaces.create(NS, {"message_ttl_in_seconds": 1})
        assert (await res.namespaces.policies(NS))["message_ttl_in_seconds"] == 1  # now cached
        events.items.clear()
        writer = await asyncio.create_subprocess_exec(sys.executable, "-c", WRITER, str(path), "7",
                                                      stderr=subprocess.PIPE)
        _, stderr = await asyncio.wait_for(writer.communicate(), WAIT_S)
        assert writer.returncode == 0, stderr.decode()
        await _told(events, namespace_key(NS), EventKind.MODIFIED)
        assert (await res.namespaces.policies(NS))["message_ttl_in_seconds"] == 7
    finally:
        await res.close()
        await store.close()
