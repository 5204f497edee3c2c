"""The replication service: which topics replicate to which clusters, and their replicators' lives.

A topic replicates to every cluster of its replication clusters (the topic-level policy, else the
namespace's ``replication_clusters``) other than the local one, when the local one is among them. For each
it keeps one :class:`Replicator` with the cursor ``pulsar.repl.{remote}``. Reconciling a topic starts the
missing replicators, restarts those whose cluster moved, and stops the others and deletes their cursors
(a cluster removed from the namespace leaves nothing behind). Topics reconcile when they load, when an
admin changes a policy or a cluster, and every ``replicationPolicyCheckDurationSeconds``; topics of
replicated namespaces are loaded at start so their backlog drains without waiting for a client.

A topic listener: a topic reconciles when it loads, and its replicators stop when it closes. Replicators
plug into the topic's extensions (they are woken when entries are stored).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from typing import Any, Protocol

from magnetar.broker.names import NamespaceName, TopicName
from magnetar.broker.replication.api import (
    ClusterData,
    RemoteProducerFactory,
    cursor_name,
    remote_of_cursor,
    source_of_producer,
)
from magnetar.broker.replication.replicator import Replicator
from magnetar.broker.replication.senders import reserved_name_refusal
from magnetar.broker.topic.listener import TopicListener
from magnetar.broker.topic.persistent import PersistentTopic
from magnetar.broker.topic.state import CloseReason
from magnetar.core.clock import Clock
from magnetar.ledger.api import InitialPosition, ManagedLedgerError, Position
from magnetar.resources import MetadataResources

log = logging.getLogger("magnetar.broker.replication")

SYSTEM_NAMESPACE = NamespaceName("pulsar", "system")
TOPICS_LOADED_PER_CHECK_MAX = 10_000


class LoadedTopics(Protocol):
    """The loaded topics, and loading one (the topic registry)."""

    @property
    def loaded(self) -> Mapping[str, PersistentTopic]: ...

    async def get(self, topic: TopicName, *, create: bool) -> PersistentTopic: ...


class TopicNames(Protocol):
    """What topics and namespaces exist (the topic catalog)."""

    async def namespace_policies(self, ns: NamespaceName) -> Mapping[str, Any]: ...

    async def partition_count(self, topic: TopicName) -> int: ...

    async def list_topic_names(self) -> list[TopicName]: ...


class ReplicationService(TopicListener):
    def __init__(
        self,
        topics: LoadedTopics,
        names: TopicNames,
        resources: MetadataResources,
        clock: Clock,
        *,
        local_cluster: str,
        queue_size: int = 1000,
        check_interval_s: float = 600.0,
    ) -> None:
        self._topics = topics
        self._names = names
        self._resources = resources
        self._clock = clock
        self.local_cluster = local_cluster
        self._queue_size = queue_size
        self._check_interval_s = max(1.0, check_interval_s)
        self.factory: RemoteProducerFactory | None = None  # supplied by the composition root
        self._lock = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None
        self._closing = False

    @property
    def enabled(self) -> bool:
        return self.factory is not None

    def start(self) -> None:
        if self.enabled and self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._check_loop(), name="replication check")

    async def close(self) -> None:
        self._closing = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        for topic in list(self._topics.loaded.values()):
            await stop_replicators(topic)
        if self.factory is not None:
            await self.factory.close()

    async def _check_loop(self) -> None:
        while not self._closing:  # ends with the service
            try:
                await self.load_replicated_topics()
                await self.reconcile_all()
            except Exception:
                log.exception("replication policy check failed; it runs again in %.0f s", self._check_interval_s)
            await asyncio.sleep(self._check_interval_s)

    async def replicator_name_refusal(self, producer_name: str) -> str | None:
        """Why a producer may not take ``producer_name`` (the reserved ``pulsar.repl`` prefix), or None."""
        refusal = reserved_name_refusal(producer_name, self.local_cluster)
        source = source_of_producer(producer_name)
        if refusal is None and source is not None and not await self._resources.clusters.exists(source):
            refusal = f"Replicator producer {producer_name!r} names cluster {source!r}, which is not registered"
        return refusal

    # ---- what replicates where -----------------------------------------------------------------------

    async def replication_clusters(self, topic: TopicName) -> list[str]:
        """The topic-level replication clusters if set, else the namespace's."""
        # topic-level policies are kept per partitioned (parent) topic, as Pulsar does
        record = await self._resources.topic_policies.get_replication(topic.partitioned_topic_name)
        if record is not None:
            clusters = record.value.get("replication_clusters")
            if isinstance(clusters, list) and clusters:
                return [c for c in clusters if isinstance(c, str)]
        policies = await self._names.namespace_policies(topic.namespace_name)
        clusters = policies.get("replication_clusters") or []
        return [c for c in clusters if isinstance(c, str)] if isinstance(clusters, list) else []

    async def remote_clusters(self, topic: TopicName) -> list[ClusterData]:
        if topic.namespace_name == SYSTEM_NAMESPACE or not topic.persistent:
            return []
        clusters = await self.replication_clusters(topic)
        if self.local_cluster not in clusters:
            return []
        remotes = []
        for name in clusters:
            if name == self.local_cluster:
                continue
            data = await self._resources.clusters.data(name)
            if not data.broker_service_url:
                log.warning("%s: cluster %s has no brokerServiceUrl; not replicating to it yet", topic, name)
                continue
            remotes.append(data)
        return remotes

    # ---- reconciling ---------------------------------------------------------------------------------

    async def topic_loaded(self, topic: PersistentTopic) -> None:
        """Before the first producer is admitted: what it publishes must reach the replication cursors."""
        if self.enabled:
            await self.reconcile(topic)

    async def topic_closing(self, topic: PersistentTopic, reason: CloseReason) -> None:
        await stop_replicators(topic)

    async def reconcile_all(self, namespace: NamespaceName | None = None) -> None:
        for topic in list(self._topics.loaded.values()):
            if namespace is None or topic.name.namespace_name == namespace:
                await self.reconcile(topic)

    async def reconcile_topic(self, name: TopicName) -> None:
        """A topic-level policy changed: the topic, or every loaded partition of it."""
        parent = str(name.partitioned_topic_name)
        for topic in list(self._topics.loaded.values()):
            if str(topic.name.partitioned_topic_name) == parent:
                await self.reconcile(topic)

    async def reconcile(self, topic: PersistentTopic) -> None:
        if not self.enabled or self._closing:
            return
        async with self._lock:
            if topic.closed:
                return
            wanted = {c.name: c for c in await self.remote_clusters(topic.name)}
            for remote, replicator in list(topic.replicators.items()):
                current = getattr(replicator, "cluster", None)
                if remote not in wanted or current != wanted[remote]:
                    await replicator.stop()
                    topic.extensions.remove_replicator(remote)
            for name in list(topic.ledger.cursors):
                gone = remote_of_cursor(name)
                if gone is not None and gone not in wanted:
                    log.info("%s: %s is no longer a replication cluster; deleting %s", topic.name, gone, name)
                    await topic.ledger.delete_cursor(name)
            for name, cluster in wanted.items():
                if name not in topic.replicators:
                    await self._start_replicator(topic, cluster)

    async def _start_replicator(self, topic: PersistentTopic, cluster: ClusterData) -> None:
        assert self.factory is not None
        try:
            cursor = await topic.ledger.open_cursor(cursor_name(cluster.name), InitialPosition.LATEST)
        except ManagedLedgerError as exc:
            log.error("%s: cannot open the replication cursor for %s: %s", topic.name, cluster.name, exc)
            return
        parent: tuple[str, int] | None = None
        if topic.name.is_partition:
            parent_name = topic.name.partitioned_topic_name
            parent = (str(parent_name), await self._names.partition_count(parent_name))
        replicator = Replicator(
            topic, str(topic.name), cursor, local_cluster=self.local_cluster, cluster=cluster,
            factory=self.factory, clock=self._clock, queue_size=self._queue_size, partitioned_parent=parent,
            gate=topic.txn.gate(cursor.name) if topic.txn is not None else None,
        )
        topic.extensions.add_replicator(cluster.name, replicator)
        replicator.start()
        log.info("%s: replicating to %s from %s", topic.name, cluster.name, cursor.mark_delete_position)

    async def load_replicated_topics(self) -> None:
        """Load the topics of replicated namespaces so each replicator drains its cursor's backlog."""
        if not self.enabled or not await self._anything_replicated():
            return  # no walk over every topic (thousands) when nothing can replicate
        replicated: dict[NamespaceName, bool] = {}
        loaded = 0
        for name in await self._names.list_topic_names():
            if str(name) in self._topics.loaded or loaded >= TOPICS_LOADED_PER_CHECK_MAX or self._closing:
                continue
            ns = name.namespace_name
            if ns not in replicated:
                replicated[ns] = ns != SYSTEM_NAMESPACE and len(
                    (await self._names.namespace_policies(ns)).get("replication_clusters") or []) > 1
            if replicated[ns] or await self._resources.topic_policies.has_replication(name.partitioned_topic_name):
                try:
                    await self._topics.get(name, create=False)
                    loaded += 1
                except Exception as exc:
                    log.warning("cannot load %s for replication: %r", name, exc)

    async def _anything_replicated(self) -> bool:
        """A namespace with more than one replication cluster, or a topic with topic-level policies."""
        if await self._resources.topic_policies.any():
            return True
        for tenant, namespace in await self._resources.namespaces.all_names():
            ns = NamespaceName(tenant, namespace)
            clusters = (await self._names.namespace_policies(ns)).get("replication_clusters") or []
            if ns != SYSTEM_NAMESPACE and len(clusters) > 1:
                return True
        return False

    # ---- markers (replicated subscriptions write them; the replicators carry them) -------------------

    async def publish_marker(self, topic: PersistentTopic, entry: bytes) -> Position:
        """Store a marker entry on the local topic; each replicator whose cluster its ``replicate_to``
        allows copies it to the remote."""
        position = await topic.append_internal(entry)
        topic.wake_subscriptions()
        return position


async def stop_replicators(topic: PersistentTopic) -> None:
    for remote in list(topic.replicators):
        replicator = topic.extensions.remove_replicator(remote)
        if replicator is not None:
            await replicator.stop()
