"""The tenants' and namespaces' records magnetar.resources caches follow another client of the same ZooKeeper
(two stores, as two brokers would be): the cache is kept by the store's watch, which ZooKeeper fires for
every client's writes."""

from __future__ import annotations

from magnetar.broker.names import NamespaceName
from magnetar.metadata import EventKind, WatchEvent
from magnetar.metadata.zookeeper import ZooKeeperMetadataStore
from magnetar.resources import MetadataResources, TenantInfo
from magnetar.resources.namespaces import namespace_key
from magnetar.resources.tenants import POLICIES_ROOT
from tests.zk_server import Events, ZooKeeperServer, unique_chroot

NS = NamespaceName("acme", "app")
WAIT_S = 30.0


async def _open(hosts: str, chroot: str) -> ZooKeeperMetadataStore:
    return await ZooKeeperMetadataStore(hosts, chroot=chroot, session_timeout_ms=10_000,
                                        operation_timeout_s=WAIT_S).start()


async def _told(events: Events, key: str, kind: EventKind) -> None:
    await events.until(lambda items: WatchEvent(key, kind) in items, WAIT_S)


async def test_a_cached_namespace_follows_another_zookeeper_client(zk_server: ZooKeeperServer) -> None:
    chroot = unique_chroot()
    mine_store, their_store = await _open(zk_server.hosts, chroot), await _open(zk_server.hosts, chroot)
    mine, theirs = MetadataResources(mine_store), MetadataResources(their_store)
    events = Events()
    mine_store.watch(POLICIES_ROOT, events)  # the cache's prefix: told in the same turn as the cache
    try:
        await mine_store.watches_in_place()
        await theirs.tenants.create("acme", TenantInfo(allowed_clusters=("east",)))
        await theirs.namespaces.create(NS, {"message_ttl_in_seconds": 1})
        await _told(events, namespace_key(NS), EventKind.CREATED)
        assert (await mine.namespaces.policies(NS))["message_ttl_in_seconds"] == 1  # read, and now cached

        events.items.clear()
        current = await theirs.namespaces.get(NS)
        assert current is not None
        await theirs.namespaces.put(NS, {"message_ttl_in_seconds": 2}, current.version)
        await _told(events, namespace_key(NS), EventKind.MODIFIED)
        assert (await mine.namespaces.policies(NS))["message_ttl_in_seconds"] == 2

        tenant = await mine.tenants.get("acme")
        assert tenant is not None and tenant.value.allowed_clusters == ("east",)
        await theirs.tenants.put("acme", TenantInfo(allowed_clusters=("east", "west")), tenant.version)
        await _told(events, f"{POLICIES_ROOT}/acme", EventKind.MODIFIED)
        tenant = await mine.tenants.get("acme")
        assert tenant is not None and tenant.value.allowed_clusters == ("east", "west")

        await theirs.namespaces.delete(NS)
        await _told(events, namespace_key(NS), EventKind.DELETED)
        assert not await mine.namespaces.exists(NS)
    finally:
        await mine.close()
        await theirs.close()
        await mine_store.close()
        await their_store.close()
