"""magnetar.resources: the keys are Pulsar's layout, the records read back as written (byte for byte as
earlier versions wrote them), and the cached tenants' and namespaces' records follow every writer of the
store through its watch."""

from __future__ import annotations

import asyncio
import json

import pytest

from magnetar.broker.names import NamespaceName, TopicName
from magnetar.metadata import NEW_KEY, BadVersion, NotFound
from magnetar.metadata.api import Record
from magnetar.metadata.memory import MemoryMetadataStore
from magnetar.resources import MetadataResources, Policies, TenantInfo, ownership
from magnetar.resources.clusters import ClusterData
from magnetar.resources.transactions import txn_buffer_snapshot_key

NS = NamespaceName("acme", "app")
TOPIC = TopicName.parse("persistent://acme/app/a/b c")


class CountingStore(MemoryMetadataStore):
    """Counts reads; ``hold`` makes the next read wait (after reading) until released."""

    def __init__(self) -> None:
        super().__init__()
        self.reads = 0
        self.hold: asyncio.Event | None = None
        self.holding = asyncio.Event()

    async def get(self, key: str) -> Record | None:
        self.reads += 1
        record = await super().get(key)
        if self.hold is not None:
            hold, self.hold = self.hold, None
            self.holding.set()
            await asyncio.wait_for(hold.wait(), 5)
        return record


def test_keys_are_pulsars_layout() -> None:
    res = MetadataResources(MemoryMetadataStore())
    assert res.tenants.key("acme") == "/admin/policies/acme"
    assert res.namespaces.key(NS) == "/admin/policies/acme/app"
    assert res.clusters.key("east") == "/admin/clusters/east"
    assert res.partitioned_topics.key(TOPIC) == "/admin/partitioned-topics/acme/app/persistent/a%2Fb%20c"
    assert res.schemas.key("acme", "app", "a/b") == "/schemas/acme/app/a%2Fb"
    assert txn_buffer_snapshot_key(str(TOPIC)) == (
        "/magnetar/txn-buffer-snapshots/persistent%3A%2F%2Facme%2Fapp%2Fa%2Fb%20c")
    assert ownership.local_policies_key(NS) == "/admin/local-policies/acme/app"
    assert ownership.bundle_owner_key(NS, "0x00000000_0x40000000") == "/namespace/acme/app/0x00000000_0x40000000"
    assert ownership.broker_key("host:6650") == "/loadbalance/brokers/host:6650"


async def test_records_are_written_as_before_and_read_back() -> None:
    store = MemoryMetadataStore()
    res = MetadataResources(store)
    await res.tenants.create("acme", TenantInfo(("ops",), ("east",)))
    await res.namespaces.create(NS, {"message_ttl_in_seconds": 60, "x-unknown": [1]})
    await res.partitioned_topics.create(TOPIC, 3)
    await res.clusters.create("east", {"serviceUrl": "http://e:8080", "brokerServiceUrl": "pulsar://e:6650"})
    stored = {key: (await store.get(key)) for key in (
        "/admin/policies/acme", "/admin/policies/acme/app", "/admin/partitioned-topics/acme/app/persistent/a%2Fb%20c")}
    assert {k: r.value for k, r in stored.items() if r is not None} == {
        "/admin/policies/acme": json.dumps({"adminRoles": ["ops"], "allowedClusters": ["east"]}).encode(),
        "/admin/policies/acme/app": json.dumps({"message_ttl_in_seconds": 60, "x-unknown": [1]}).encode(),
        "/admin/partitioned-topics/acme/app/persistent/a%2Fb%20c": b'{"partitions": 3}',
    }
    tenant = await res.tenants.get("acme")
    assert tenant is not None and tenant.value == TenantInfo(("ops",), ("east",)) and tenant.version == 0
    policies = await res.namespaces.policies(NS)
    assert dict(policies) == {"message_ttl_in_seconds": 60, "x-unknown": [1]}  # unknown fields kept
    assert await res.partitioned_topics.partitions(TOPIC) == 3
    assert await res.partitioned_topics.local_names(NS) == ["a/b c"]
    assert await res.clusters.data("east") == ClusterData("east", "http://e:8080", "", "pulsar://e:6650", "")
    assert await res.clusters.data("west") == ClusterData("west")
    assert await res.tenants.names() == ["acme"] and await res.namespaces.names("acme") == ["app"]
    assert await res.namespaces.all_names() == [("acme", "app")]


async def test_writes_are_compare_and_set() -> None:
    res = MetadataResources(MemoryMetadataStore())
    await res.namespaces.create(NS, {})
    with pytest.raises(BadVersion):
        await res.namespaces.create(NS, {})
    current = await res.namespaces.get(NS)
    assert current is not None
    await res.namespaces.put(NS, {**current.value, "deduplicationEnabled": True}, current.version)
    with pytest.raises(BadVersion):  # the version read before that write is stale now
        await res.namespaces.put(NS, {}, current.version)
    assert (await res.namespaces.policies(NS)).get("deduplicationEnabled") is True
    await res.namespaces.delete(NS)
    with pytest.raises(NotFound):
        await res.namespaces.delete(NS)
    assert await res.namespaces.policies(NS) == Policies()


async def test_unreadable_records_read_as_empty() -> None:
    store = MemoryMetadataStore()
    res = MetadataResources(store)
    await store.put("/admin/policies/acme/app", b"{not json")
    await store.put("/admin/policies/acme", b"[1, 2]")
    assert dict(await res.namespaces.policies(NS)) == {}
    tenant = await res.tenants.get("acme")
    assert tenant is not None and tenant.value == TenantInfo()


async def test_policies_are_read_once_and_follow_every_writer_of_the_store() -> None:
    store = CountingStore()
    mine, theirs = MetadataResources(store), MetadataResources(store)  # two brokers over one store
    await mine.namespaces.create(NS, {"message_ttl_in_seconds": 1})
    assert (await mine.namespaces.policies(NS))["message_ttl_in_seconds"] == 1
    reads = store.reads
    for _ in range(3):
        assert await mine.namespaces.exists(NS)
        assert (await mine.namespaces.policies(NS))["message_ttl_in_seconds"] == 1
    assert store.reads == reads  # from memory
    current = await theirs.namespaces.get(NS)
    assert current is not None
    await theirs.namespaces.put(NS, {"message_ttl_in_seconds": 2}, current.version)
    assert (await mine.namespaces.policies(NS))["message_ttl_in_seconds"] == 2  # the watch dropped the copy
    await store.put("/admin/policies/acme/app", b'{"message_ttl_in_seconds": 3}')  # any writer at all
    assert (await mine.namespaces.policies(NS))["message_ttl_in_seconds"] == 3
    await theirs.namespaces.delete(NS)
    assert not await mine.namespaces.exists(NS)
    await mine.close()
    await theirs.close()


async def test_a_read_overtaken_by_a_write_is_not_kept() -> None:
    store = CountingStore()
    res = MetadataResources(store)
    await res.namespaces.create(NS, {"v": 1})
    store.hold = release = asyncio.Event()
    reading = asyncio.ensure_future(res.namespaces.policies(NS))  # reads v1, then waits
    await asyncio.wait_for(store.holding.wait(), 5)
    await store.put("/admin/policies/acme/app", b'{"v": 2}')
    release.set()
    assert (await reading)["v"] == 1  # what that read saw
    assert (await res.namespaces.policies(NS))["v"] == 2  # but it was not kept
    await res.close()


async def test_a_closed_resources_reads_the_store_directly() -> None:
    store = CountingStore()
    res = MetadataResources(store)
    await res.tenants.create("acme", TenantInfo())
    await res.close()
    reads = store.reads
    assert await res.tenants.exists("acme") and await res.tenants.exists("acme")
    assert store.reads == reads + 2


async def test_topic_policies_keep_both_layouts() -> None:
    store = MemoryMetadataStore()
    res = MetadataResources(store)
    assert not await res.topic_policies.any()
    await res.topic_policies.put(TOPIC, {"messageTTLInSeconds": 5}, NEW_KEY)
    await res.topic_policies.put_replication(TOPIC, {"replication_clusters": ["east"]}, NEW_KEY)
    assert await store.exists("/admin/topic-policies/acme/app/persistent/a%2Fb%20c")
    assert await store.exists("/admin/topic-policies/acme/app/a%2Fb%20c")
    policies, replication = await res.topic_policies.get(TOPIC), await res.topic_policies.get_replication(TOPIC)
    assert policies is not None and policies.value == {"messageTTLInSeconds": 5}
    assert replication is not None and replication.value == {"replication_clusters": ["east"]}
    assert await res.topic_policies.has_replication(TOPIC) and await res.topic_policies.any()
