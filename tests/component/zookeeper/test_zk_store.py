"""The ZooKeeper store against a real server: Pulsar's layout, parents, the size limit, watches across a
reconnection and a session expiry, and a server restart under a store."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from kazoo.client import KazooClient

from magnetar.metadata import NEW_KEY, BadVersion, EventKind, MetadataError, ValueTooLarge, WatchEvent
from magnetar.metadata.coordination import SessionEvent
from magnetar.metadata.zookeeper import ZooKeeperMetadataStore
from tests.zk_server import Events, TcpProxy, ZooKeeperServer, unique_chroot

WAIT_S = 30.0


async def _open(hosts: str, chroot: str, *, session_timeout_ms: int = 10_000,
                operation_timeout_s: float = 30.0) -> ZooKeeperMetadataStore:
    return await ZooKeeperMetadataStore(hosts, chroot=chroot, session_timeout_ms=session_timeout_ms,
                                        operation_timeout_s=operation_timeout_s).start()


@pytest.fixture
async def store(zk_server: ZooKeeperServer) -> AsyncIterator[ZooKeeperMetadataStore]:
    s = await _open(zk_server.hosts, unique_chroot())
    try:
        yield s
    finally:
        await s.close()


@pytest.fixture
def raw(zk_server: ZooKeeperServer) -> KazooClient:
    """A plain kazoo client: the test's own view of the znodes."""
    client = KazooClient(hosts=zk_server.hosts)
    client.start(timeout=WAIT_S)
    yield client
    client.stop()
    client.close()


async def test_keys_are_znodes_with_the_json_as_it_is(store: ZooKeeperMetadataStore, raw: KazooClient) -> None:
    value = b'{"replication_clusters": ["standalone"]}'
    await store.put("/admin/policies/public/default", value, NEW_KEY)
    data, stat = raw.get(store.chroot + "/admin/policies/public/default")
    assert data == value and stat.version == 0
    parent, _ = raw.get(store.chroot + "/admin/policies/public")
    assert parent == b"", "parents are created empty"
    assert await store.get("/admin/policies/public") is None, "an implicit parent holds no record"
    assert not await store.exists("/admin/policies/public")
    assert await store.children("/admin/policies") == ["public"]


async def test_delete_prunes_empty_parents_but_keeps_records_and_others(
    store: ZooKeeperMetadataStore, raw: KazooClient
) -> None:
    await store.put("/a/b/c", b"1")
    await store.put("/a/x", b"2")
    await store.delete("/a/b/c")
    assert raw.exists(store.chroot + "/a/b") is None, "the empty implicit parent went with its last child"
    assert await store.children("/a") == ["x"]
    await store.put("/a", b"3")
    await store.delete("/a/x")
    assert await store.get("/a") is not None and await store.children("/a") == []


async def test_a_record_with_children_is_deleted_and_created_in_place(store: ZooKeeperMetadataStore) -> None:
    await store.put("/t", b"topic", NEW_KEY)
    await store.put("/t/cursor", b"c", NEW_KEY)
    await store.delete("/t", 0)
    assert await store.get("/t") is None and await store.children("/t") == ["cursor"]
    created = await store.put("/t", b"again", NEW_KEY)
    assert created.version == 0, "versions start at 0 for a record in a znode that already existed"
    assert (await store.put("/t", b"next", 0)).version == 1
    with pytest.raises(BadVersion):
        await store.put("/t", b"stale", 0)


async def test_a_value_over_the_znode_limit_is_refused_clearly(store: ZooKeeperMetadataStore) -> None:
    with pytest.raises(ValueTooLarge, match=r"jute\.maxbuffer"):
        await store.put("/big", b"x" * (1024 * 1024))
    near = b"x" * (1024 * 1024 - 4096)
    assert (await store.put("/near", near)).value == near
    assert (await store.get("/near")).value == near  # type: ignore[union-attr]


async def test_two_stores_see_each_others_writes_through_watches(zk_server: ZooKeeperServer) -> None:
    chroot = unique_chroot()
    a, b = await _open(zk_server.hosts, chroot), await _open(zk_server.hosts, chroot)
    try:
        events = Events()
        b.watch("/admin", events)
        await b.watches_in_place()
        await a.put("/admin/clusters/c1", b'{"serviceUrl": "http://a"}')
        await a.put("/admin/clusters/c1", b'{"serviceUrl": "http://b"}')
        await a.delete("/admin/clusters/c1")
        await events.until(lambda items: WatchEvent("/admin/clusters/c1", EventKind.DELETED) in items)
        assert events.items[0] == WatchEvent("/admin/clusters/c1", EventKind.CREATED)
        assert set(events.items) <= {WatchEvent("/admin/clusters/c1", kind) for kind in EventKind}
    finally:
        await a.close()
        await b.close()


async def test_a_change_during_a_session_expiry_is_told_after_it(
    zk_server: ZooKeeperServer, zk_proxy: TcpProxy
) -> None:
    chroot = unique_chroot()
    cut_off = await _open(zk_proxy.hosts, chroot, session_timeout_ms=2000)
    other = await _open(zk_server.hosts, chroot)
    try:
        await other.put("/ns/a", b"1")
        await other.put("/ns/b", b"1")
        events, session = Events(), Events()
        cut_off.watch("/ns", events)
        cut_off.listen(session)
        await cut_off.watches_in_place()
        old_session = cut_off.session.session_id
        zk_proxy.cut()
        await session.until(lambda items: SessionEvent.SESSION_LOST in items)
        await other.put("/ns/a", b"2")
        await other.delete("/ns/b")
        await other.put("/ns/c", b"1")
        zk_proxy.restore()
        await session.until(lambda items: SessionEvent.SESSION_REESTABLISHED in items)
        assert session.items[0] is SessionEvent.CONNECTION_LOST
        assert cut_off.session.session_id != old_session
        want = {WatchEvent("/ns/a", EventKind.MODIFIED), WatchEvent("/ns/b", EventKind.DELETED),
                WatchEvent("/ns/c", EventKind.CREATED)}
        await events.until(lambda items: want <= set(items))
        assert len(events.items) == 3
        assert (await cut_off.get("/ns/a")).value == b"2"  # type: ignore[union-attr]
    finally:
        await cut_off.close()
        await other.close()


async def test_a_store_rides_out_a_server_restart(own_zk_server: ZooKeeperServer) -> None:
    chroot = unique_chroot()
    store = await _open(own_zk_server.hosts, chroot, session_timeout_ms=30_000)
    try:
        events, session = Events(), Events()
        store.listen(session)
        store.watch("/", events)
        await store.put("/k", b"1", NEW_KEY)
        own_zk_server.stop()
        await session.until(lambda items: SessionEvent.CONNECTION_LOST in items)
        writing = asyncio.ensure_future(store.put("/k", b"2", 0))
        own_zk_server.start()
        record = await asyncio.wait_for(writing, WAIT_S)
        assert (record.value, record.version) == (b"2", 1)
        await session.until(lambda items: SessionEvent.RECONNECTED in items)
        assert SessionEvent.SESSION_LOST not in session.items, "the session outlived a short restart"
        await events.until(lambda items: WatchEvent("/k", EventKind.MODIFIED) in items)
    finally:
        await store.close()


async def test_operations_fail_clearly_when_no_server_answers(own_zk_server: ZooKeeperServer) -> None:
    store = await _open(own_zk_server.hosts, unique_chroot(), operation_timeout_s=1.0)
    try:
        own_zk_server.stop()
        with pytest.raises(MetadataError, match="ZooKeeper"):
            await store.get("/k")
    finally:
        await store.close()
    with pytest.raises(MetadataError, match="cannot connect"):
        await _open(own_zk_server.hosts, "", operation_timeout_s=1.0)
