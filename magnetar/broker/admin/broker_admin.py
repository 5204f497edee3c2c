"""Admin operations over the broker's parts: clusters, tenants, namespaces and their policies, topics.

This is what Pulsar's admin REST resources do, as plain async methods that raise the broker's errors
(``NotFound``, ``Conflict``, ``PreconditionFailed``, ``InvalidRequest``...); the HTTP layer maps them to
statuses. Tenants, namespaces and partitioned-topic metadata are records of ``magnetar.resources``.
Subscription operations live in :mod:`magnetar.broker.admin.subscriptions`. This module knows no HTTP.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

from magnetar.broker.admin.policy_values import POLICY_DEFAULTS, POLICY_SETTERS, check_partitions, string_list
from magnetar.broker.errors import (
    BrokerError,
    Conflict,
    InvalidRequest,
    InvalidTopicName,
    MetadataError,
    MethodNotAllowed,
    NotFound,
    PersistenceError,
    PreconditionFailed,
    ServiceNotReady,
    TopicNotFound,
)
from magnetar.broker.names import PARTITION_SUFFIX, NamespaceName, TopicName, valid_segment
from magnetar.broker.parts import Broker
from magnetar.broker.registry.catalog import SYSTEM_NAMESPACE
from magnetar.broker.topic.persistent import TERMINATED_PROPERTY, PersistentTopic
from magnetar.broker.transactions.snapshot_topic import is_snapshot_topic
from magnetar.ledger.api import ManagedLedgerError, Position
from magnetar.metadata import api as md
from magnetar.resources import MetadataResources, Policies, TenantInfo, Versioned

log = logging.getLogger("magnetar.broker.admin")

T = TypeVar("T")
NAMESPACES_PER_TENANT_MAX = 10_000
TOPICS_PER_NAMESPACE_MAX = 100_000


class BrokerAdmin:
    """Admin operations; one instance per broker, shared by every HTTP request."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.catalog = broker.catalog
        self.registry = broker.registry

    # ---- metadata helpers: the metadata layer's errors become the broker's ------------------------------

    @property
    def _res(self) -> MetadataResources:
        return self.broker.resources

    @staticmethod
    async def _read(reading: Awaitable[T]) -> T:
        try:
            return await reading
        except md.MetadataError as exc:
            raise MetadataError(str(exc)) from exc

    @staticmethod
    async def _write(writing: Awaitable[None]) -> None:
        try:
            await writing
        except md.BadVersion as exc:
            raise Conflict(f"Concurrent modification of {exc.key}") from exc
        except md.MetadataError as exc:
            raise MetadataError(str(exc)) from exc

    @staticmethod
    async def _delete(deleting: Awaitable[None]) -> None:
        try:
            await deleting
        except md.NotFound:
            return
        except md.MetadataError as exc:
            raise MetadataError(str(exc)) from exc

    # ---- clusters and tenants ------------------------------------------------------------------------

    async def clusters(self) -> list[str]:
        return await self._read(self._res.clusters.names())

    async def cluster(self, name: str) -> dict[str, Any]:
        if not valid_segment(name):
            raise NotFound("Cluster does not exist")
        stored = await self._read(self._res.clusters.get(name))
        if stored is None:
            raise NotFound("Cluster does not exist")
        return dict(stored.value)

    async def tenants(self) -> list[str]:
        return await self._read(self._res.tenants.names())

    async def tenant(self, tenant: str) -> dict[str, Any]:
        _check_segment(tenant, "tenant")
        stored = await self._read(self._res.tenants.get(tenant))
        if stored is None:
            raise NotFound("Tenant does not exist")
        return dict(stored.value.to_json())

    async def _tenant_info(self, body: Mapping[str, Any]) -> TenantInfo:
        roles = body.get("adminRoles", [])
        clusters = body.get("allowedClusters", [])
        if not string_list(roles) or not string_list(clusters):
            raise InvalidRequest("adminRoles and allowedClusters must be lists of strings")
        known = set(await self.clusters())
        unknown = [c for c in clusters if c not in known]
        if unknown:
            raise PreconditionFailed(f"Clusters do not exist: {unknown}")
        return TenantInfo(tuple(roles), tuple(clusters))

    async def create_tenant(self, tenant: str, body: Mapping[str, Any]) -> None:
        _check_segment(tenant, "tenant")
        info = await self._tenant_info(body)
        if await self._res.tenants.exists(tenant):
            raise Conflict("Tenant already exists")
        await self._write(self._res.tenants.create(tenant, info))
        log.info("created tenant %s", tenant)

    async def update_tenant(self, tenant: str, body: Mapping[str, Any]) -> None:
        await self.tenant(tenant)
        await self._write(self._res.tenants.put(tenant, await self._tenant_info(body)))

    async def delete_tenant(self, tenant: str, *, force: bool) -> None:
        await self.tenant(tenant)
        if tenant == SYSTEM_NAMESPACE.tenant:  # the broker recreates it at start: deleting it only hides it
            raise Conflict(f"Cannot delete the system tenant {tenant}: the broker's own topics live in "
                           f"{SYSTEM_NAMESPACE}")
        namespaces = await self.namespaces(tenant)
        if namespaces and not force:
            raise Conflict("The tenant still has active namespaces")
        for ns in namespaces:
            await self.delete_namespace(NamespaceName.parse(ns), force=True)
        await self._delete(self._res.tenants.delete(tenant))
        log.info("deleted tenant %s", tenant)

    # ---- namespaces ----------------------------------------------------------------------------------

    async def namespaces(self, tenant: str) -> list[str]:
        await self.tenant(tenant)
        names = (await self._read(self._res.namespaces.names(tenant)))[:NAMESPACES_PER_TENANT_MAX]
        return [f"{tenant}/{n}" for n in names]

    async def _policies_record(self, ns: NamespaceName) -> Versioned[Policies]:
        stored = await self._read(self._res.namespaces.get(ns))
        if stored is None:
            raise NotFound("Namespace does not exist")
        return stored

    async def policies(self, ns: NamespaceName) -> dict[str, Any]:
        return {**POLICY_DEFAULTS, **(await self._policies_record(ns)).value}

    async def create_namespace(self, ns: NamespaceName, body: Mapping[str, Any] | None) -> None:
        await self.tenant(ns.tenant)
        if await self.catalog.namespace_exists(ns):
            raise Conflict("Namespace already exists")
        stored: dict[str, Any] = {}
        for key, value in (body or {}).items():
            if key in POLICY_SETTERS:
                stored[key] = POLICY_SETTERS[key](value)
        await self._write(self._res.namespaces.create(ns, stored))
        log.info("created namespace %s", ns)

    async def delete_namespace(self, ns: NamespaceName, *, force: bool) -> None:
        await self._policies_record(ns)
        if ns == SYSTEM_NAMESPACE:
            raise Conflict(f"Cannot delete the system namespace {ns}: the broker's own topics live there")
        topics = [t for t in await self.topics(ns) if not is_snapshot_topic(t)]  # system topics go with it
        partitioned = await self.partitioned_topics(ns)
        if (topics or partitioned) and not force:
            raise Conflict("Cannot delete non empty namespace")
        for name in partitioned:
            await self.delete_partitioned_topic(TopicName.parse(name), force=True)
        for name in await self.topics(ns):
            await self.delete_topic(TopicName.parse(name), force=True)
        await self._delete(self._res.namespaces.delete(ns))
        log.info("deleted namespace %s", ns)

    async def policy(self, ns: NamespaceName, field: str) -> Any:
        return (await self.policies(ns)).get(field)

    async def set_policy(self, ns: NamespaceName, field: str, value: Any) -> None:
        """Validate and store one policy field (``None`` removes it), by compare-and-set."""
        record = await self._policies_record(ns)
        stored = record.value.to_json()
        if value is None:
            stored.pop(field, None)
        else:
            stored[field] = POLICY_SETTERS[field](value)
            if field == "replication_clusters":
                await self.check_replication_clusters(ns.tenant, stored[field])
        await self._write(self._res.namespaces.put(ns, stored, record.version))
        if field == "replication_clusters":
            await self.broker.replication.reconcile_all(ns)  # start new replicators, remove dropped ones

    async def check_replication_clusters(self, tenant: str, clusters: list[str]) -> None:
        known = set(await self.clusters())
        if any(c not in known for c in clusters):
            raise PreconditionFailed("Invalid cluster id: the cluster does not exist")
        allowed = (await self.tenant(tenant))["allowedClusters"]
        refused = [c for c in clusters if c not in allowed]
        if refused:
            raise PreconditionFailed(f"Clusters {refused} are not in the allowed clusters of tenant {tenant}")

    async def update_policy(self, ns: NamespaceName, field: str, change: Callable[[Any], Any]) -> None:
        """Read one policy field, apply ``change`` to it and write the result back, by compare-and-set."""
        record = await self._policies_record(ns)
        stored = record.value.to_json()
        stored[field] = change(stored.get(field))
        await self._write(self._res.namespaces.put(ns, stored, record.version))

    # ---- topics: names, lists, creation --------------------------------------------------------------

    async def topics(self, ns: NamespaceName) -> list[str]:
        """Every persistent topic of the namespace, with the partitions of partitioned topics."""
        await self._policies_record(ns)
        return (await self.catalog.list_topics(ns))[:TOPICS_PER_NAMESPACE_MAX]

    async def partitioned_topics(self, ns: NamespaceName) -> list[str]:
        await self._policies_record(ns)
        return [str(t) for t in await self.catalog.partitioned_topics(ns, TOPICS_PER_NAMESPACE_MAX)]

    async def partitions(self, topic: TopicName) -> int:
        """The partition count of a partitioned topic, 0 for any other name."""
        return await self.catalog.partition_count(topic)

    async def exists(self, topic: TopicName) -> bool:
        if str(topic) in self.registry.loaded or await self.broker.ledgers.exists(topic.managed_ledger_name):
            return True
        parent = topic.partitioned_topic_name
        return topic.is_partition and topic.partition_index < await self.partitions(parent)

    async def _namespace_of(self, topic: TopicName) -> None:
        if not topic.persistent:
            raise MethodNotAllowed("non-persistent topics are not supported by magnetar")
        if not await self.catalog.namespace_exists(topic.namespace_name):
            raise NotFound("Namespace does not exist")

    async def create_topic(self, topic: TopicName) -> None:
        await self._namespace_of(topic)
        if await self.exists(topic) or await self.partitions(topic) > 0:
            raise Conflict("This topic already exists")
        parent = topic.partitioned_topic_name
        if topic.is_partition and await self.partitions(parent) > 0:
            raise Conflict(f"{parent} is a partitioned topic: its partitions are created with it")
        await self._create_ledger(topic)
        log.info("created topic %s", topic)

    async def _create_ledger(self, topic: TopicName) -> None:
        try:
            created = await self.catalog.create_ledger(topic)
        except ServiceNotReady as exc:
            raise PersistenceError(str(exc)) from exc
        if not created:
            raise Conflict("This topic already exists")

    async def create_partitioned_topic(self, topic: TopicName, partitions: int) -> None:
        await self._namespace_of(topic)
        check_partitions(partitions)
        if PARTITION_SUFFIX in topic.local_name:
            raise PreconditionFailed("Partitioned Topic Name should not contain '-partition-'")
        if await self.partitions(topic) > 0 or await self.exists(topic):
            raise Conflict("This topic already exists")
        if not await self.catalog.create_partitioned_topic(topic, partitions):
            raise Conflict("This topic already exists")

    async def update_partitions(self, topic: TopicName, partitions: int) -> None:
        check_partitions(partitions)
        current = await self.catalog.update_partitions(topic, partitions)
        if current is None:
            raise NotFound("Partitioned topic does not exist")
        if partitions <= current:
            raise InvalidRequest(f"Desired partitions {partitions} must be more than the current {current}")

    # ---- topics: loading, deleting, unloading, terminating -------------------------------------------

    async def view(self, topic: TopicName) -> PersistentTopic | None:
        """What a read-only request looks at: the topic (loaded from its ledger if it has one), or None for a
        declared partition never written to; 404 for a topic that does not exist. Creates nothing (no ledger,
        file or metadata), as Pulsar's GETs do not."""
        await self._namespace_of(topic)
        loaded = self.registry.loaded.get(str(topic))
        if loaded is not None:
            return loaded
        if not await self.exists(topic):
            raise NotFound("Topic not found" if not await self.partitions(topic) else "Topic is partitioned")
        if not await self.broker.ledgers.exists(topic.managed_ledger_name):
            return None
        return await self._get_existing(topic)

    async def load(self, topic: TopicName) -> PersistentTopic:
        """The loaded topic for a request that changes it (creating a declared partition's ledger); 404 if none."""
        viewed = await self.view(topic)
        if viewed is not None:
            return viewed
        await self._create_ledger(topic)
        return await self._get_existing(topic)

    async def _get_existing(self, topic: TopicName) -> PersistentTopic:
        try:
            return await self.registry.get(topic, create=False)
        except TopicNotFound as exc:
            raise NotFound(str(exc)) from exc

    async def partition_names(self, topic: TopicName) -> list[TopicName]:
        """The partitions of a partitioned topic; 404 if it is not one."""
        await self._namespace_of(topic)
        count = await self.partitions(topic)
        if count <= 0:
            raise NotFound("Partitioned topic does not exist")
        return [topic.partition(i) for i in range(count)]

    async def targets(self, topic: TopicName) -> list[TopicName]:
        """The partitions of a partitioned topic, else the topic itself (subscription operations fan out)."""
        await self._namespace_of(topic)
        count = await self.partitions(topic)
        return [topic.partition(i) for i in range(count)] if count > 0 else [topic]

    async def delete_topic(self, topic: TopicName, *, force: bool) -> None:
        await self._namespace_of(topic)
        if await self.partitions(topic) > 0:
            raise Conflict(f"{topic} is a partitioned topic: delete it with its partitions")
        if not await self.exists(topic):
            raise NotFound("Topic not found")
        await self.registry.delete(topic, force=force)  # nothing to do for a declared partition never written

    async def delete_partitioned_topic(self, topic: TopicName, *, force: bool) -> None:
        for partition in await self.partition_names(topic):
            if await self.exists(partition):
                await self.delete_topic(partition, force=force)
        await self.catalog.delete_partitioned_metadata(topic)
        log.info("deleted partitioned topic %s", topic)

    async def unload(self, topic: TopicName) -> None:
        names = [topic]
        if await self.partitions(topic) > 0:
            names = await self.partition_names(topic)
        elif not await self.exists(topic):
            raise NotFound("Topic not found")
        for name in names:
            await self.registry.unload(name)

    async def terminate(self, topic: TopicName) -> dict[str, int]:
        """Seal the topic: no producer is admitted any more; returns the last message id."""
        if await self.partitions(topic) > 0:
            raise MethodNotAllowed("Termination of a partitioned topic is not allowed")
        loaded = await self.load(topic)
        last = loaded.ledger.last_confirmed
        try:
            await loaded.ledger.set_properties({TERMINATED_PROPERTY: str(last)})
        except ManagedLedgerError as exc:
            raise PersistenceError(f"Failed to terminate {topic}: {exc}") from exc
        await loaded.disconnect_clients(consumers=False)
        log.info("terminated topic %s at %s", topic, last)
        return message_id_json(last, topic.partition_index)

    async def last_message_id(self, topic: TopicName) -> dict[str, int]:
        if await self.partitions(topic) > 0:
            raise MethodNotAllowed("Get the last message id on a partitioned topic is not allowed")
        loaded = await self.view(topic)
        if loaded is None:  # a declared partition never written to
            return message_id_json(Position(-1, -1), topic.partition_index)
        last, batch_index = await loaded.last_message_id()
        result = message_id_json(last, topic.partition_index)
        if batch_index >= 0:
            result["batchIndex"] = batch_index
        return result


def message_id_json(position: Position, partition: int) -> dict[str, int]:
    return {"ledgerId": position.ledger_id, "entryId": position.entry_id, "partitionIndex": partition}


def parse_topic(domain: str, tenant: str, namespace: str, encoded: str) -> TopicName:
    """A topic from the path segments of an admin URL (the local name arrives URL-encoded)."""
    try:
        # the framework decoded the path once; decoding again would let "%2541" name topic "A"
        return TopicName.parse(f"{domain}://{tenant}/{namespace}/{encoded}")
    except InvalidTopicName as exc:
        raise PreconditionFailed("Topic name is not valid") from exc  # Pulsar's validateTopicName


def parse_namespace(tenant: str, namespace: str) -> NamespaceName:
    try:
        return NamespaceName.parse(f"{tenant}/{namespace}")
    except InvalidTopicName as exc:
        raise PreconditionFailed("Namespace name is not valid") from exc  # Pulsar's validateNamespaceName


def _check_segment(name: str, what: str) -> None:
    try:
        NamespaceName.parse(f"{name}/x")
    except BrokerError as exc:
        raise PreconditionFailed(f"{what.capitalize()} name is not valid") from exc  # Pulsar's NamedEntity check
