"""Which topics exist and which may be created: namespaces, partitioned-topic metadata, auto-creation,
``maxTopicsPerNamespace``, and the listing of a namespace's topics (written once, used by LOOKUP's topic
lists, the admin API and the services).

A name is never both a partitioned and a plain topic: both creations decide under the same per-name lock,
and, because another broker may share the metadata store, each writes first and checks the other's record
after (at most one of two racing creators stands). Namespaces and partitioned-topic metadata are records of
``magnetar.resources`` (the namespaces' cached, kept current by the store's watch); the managed ledgers are
the topics' storage. Creating here means creating
the metadata or the (closed) managed ledger; loading is :class:`~magnetar.broker.registry.TopicRegistry`'s.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from magnetar.broker.config import BrokerConfig
from magnetar.broker.errors import (
    Conflict,
    MetadataError,
    NotAllowed,
    ServiceNotReady,
    TopicNotFound,
    TopicQuotaExceeded,
)
from magnetar.broker.names import NamespaceName, TopicName
from magnetar.broker.transactions.coordinators import is_coordinator_log
from magnetar.broker.transactions.pending_ack_log import is_transaction_internal
from magnetar.broker.transactions.snapshot_topic import is_snapshot_topic
from magnetar.ledger.api import ManagedLedger, ManagedLedgerError, ManagedLedgerFactory
from magnetar.metadata import api as md
from magnetar.resources import MetadataResources, Policies

log = logging.getLogger("magnetar.broker")
_NO_LOCK = contextlib.nullcontext()
T = TypeVar("T")

PARTITIONS_MAX = 10_000
SYSTEM_NAMESPACE = NamespaceName("pulsar", "system")
#: the namespaces a fresh cluster starts with (``public/default`` for users, ``pulsar/system`` for the broker)
SYSTEM_NAMESPACES = (NamespaceName("public", "default"), SYSTEM_NAMESPACE)

@dataclass(frozen=True, slots=True)
class PartitionedMetadata:
    partitions: int


@dataclass(frozen=True, slots=True)
class AutoTopicCreation:
    allowed: bool
    partitions: int  # 0 = create non-partitioned topics


class TopicCatalog:
    def __init__(self, config: BrokerConfig, resources: MetadataResources, ledgers: ManagedLedgerFactory) -> None:
        self._config = config
        self._resources = resources
        self._ledgers = ledgers
        self._creating: dict[str, asyncio.Lock] = {}
        self._creating_users: dict[str, int] = {}
        self._counted_creation = asyncio.Lock()  # creations while a topic quota is counted
        #: is a topic of this name loaded (the registry says; a loaded topic exists whatever storage says)
        self.is_loaded: Callable[[str], bool] = lambda _name: False

    # ---- namespaces ----------------------------------------------------------------------------------

    async def namespace_exists(self, ns: NamespaceName) -> bool:
        return await _read(self._resources.namespaces.exists(ns))

    async def namespace_policies(self, ns: NamespaceName) -> Policies:
        """The namespace's stored policies (empty when it has none or does not exist)."""
        return await _read(self._resources.namespaces.policies(ns))

    async def auto_topic_creation(self, ns: NamespaceName) -> AutoTopicCreation:
        """The broker's auto-creation settings, overridden by the namespace's ``autoTopicCreationOverride``."""
        allowed = self._config.allow_auto_topic_creation
        partitioned = self._config.allow_auto_topic_creation_type == "partitioned"
        partitions = max(1, self._config.default_num_partitions)
        override = (await self.namespace_policies(ns)).auto_topic_creation_override
        if override is not None:
            allowed = override["allowAutoTopicCreation"]
            partitioned = override.get("topicType") == "partitioned"
            partitions = max(1, int(override.get("defaultNumPartitions", 1)))
        return AutoTopicCreation(allowed, partitions if partitioned else 0)

    # ---- partitioned topics --------------------------------------------------------------------------

    async def partition_count(self, topic: TopicName) -> int:
        """The partition count of a partitioned topic, 0 for any other name (a partition's included)."""
        if topic.is_partition:
            return 0
        return await _read(self._resources.partitioned_topics.partitions(topic))

    async def partitioned_metadata(self, topic: TopicName) -> PartitionedMetadata:
        """The partition count (0 = not partitioned), auto-creating a partitioned topic if so configured."""
        if topic.is_partition:
            return PartitionedMetadata(0)
        count = await self.partition_count(topic)
        if count > 0:
            return PartitionedMetadata(count)
        creation = await self.auto_topic_creation(topic.namespace_name)
        if (
            creation.allowed
            and creation.partitions > 0
            and topic.persistent
            and await self.namespace_exists(topic.namespace_name)
        ):
            await self.create_partitioned_topic(topic, creation.partitions)  # False: a plain topic has the name
            return PartitionedMetadata(await self.partition_count(topic))
        return PartitionedMetadata(0)

    async def create_partitioned_topic(self, topic: TopicName, partitions: int) -> bool:
        """Declare ``topic`` partitioned; False if the name is taken (by a plain topic or a racing creator).

        Decided under the name's creation lock, the same one a plain topic's creation takes, so a name is
        never both a partitioned and a non-partitioned topic."""
        if not 0 < partitions <= PARTITIONS_MAX:
            raise NotAllowed(f"Number of partitions must be between 1 and {PARTITIONS_MAX}")
        async with self._creation_lock(topic):
            if self.is_loaded(str(topic)) or await self._ledgers.exists(topic.managed_ledger_name):
                return False
            await self.check_topic_quota(topic, partitions)
            try:
                await self._resources.partitioned_topics.create(topic, partitions)
            except md.BadVersion:
                return False  # created concurrently: the first one wins
            except md.MetadataError as exc:
                raise MetadataError(str(exc)) from exc
            if await self._ledgers.exists(topic.managed_ledger_name):  # another broker created it plain meanwhile
                await self.delete_partitioned_metadata(topic)
                return False
        log.info("created partitioned topic %s with %d partitions", topic, partitions)
        return True

    async def update_partitions(self, topic: TopicName, partitions: int) -> int | None:
        """Grow a partitioned topic to ``partitions`` (compare-and-set); the count it had, None if it is not
        a partitioned topic. The caller checks that the count grows."""
        record = await _read(self._resources.partitioned_topics.get(topic))
        if record is None:
            return None
        current = record.value.partitions
        if partitions > current:
            try:
                await self._resources.partitioned_topics.put(topic, partitions, record.version)
            except md.BadVersion as exc:
                raise Conflict(f"Concurrent modification of {exc.key}") from exc
            except md.MetadataError as exc:
                raise MetadataError(str(exc)) from exc
            log.info("partitioned topic %s now has %d partitions", topic, partitions)
        return current

    async def delete_partitioned_metadata(self, topic: TopicName) -> None:
        try:
            await self._resources.partitioned_topics.delete(topic)
        except md.NotFound:
            pass
        except md.MetadataError as exc:
            raise MetadataError(str(exc)) from exc

    async def partitioned_topics(self, ns: NamespaceName, limit: int | None = None) -> list[TopicName]:
        """The namespace's partitioned topics (their parent names)."""
        local_names = await _read(self._resources.partitioned_topics.local_names(ns))
        return [TopicName.parse(f"persistent://{ns}/{local}") for local in local_names[:limit]]

    # ---- listing -------------------------------------------------------------------------------------

    async def list_topic_names(self) -> list[TopicName]:
        """Every managed ledger's topic name (storage, whatever the namespace)."""
        return [TopicName.from_managed_ledger_name(n) for n in await self._ledgers.list_names()]

    async def list_topics(self, ns: NamespaceName) -> list[str]:
        """Every persistent topic of a namespace, partitions by their partition names: the stored ones, and
        every partition of its partitioned topics, written to or not (as Pulsar lists them)."""
        prefix = f"{ns.tenant}/{ns.namespace}/persistent/"
        names = [
            n for n in await self._ledgers.list_names() if n.startswith(prefix) and not is_transaction_internal(n)
        ]
        topics = [TopicName.from_managed_ledger_name(n) for n in names]
        found = {str(t) for t in topics if not is_coordinator_log(t)}  # storage, not topics (regex consumers)
        for parent in await self.partitioned_topics(ns):
            count = await self.partition_count(parent)  # a read: listing never creates (and takes no lock)
            found.update(str(parent.partition(i)) for i in range(count))
        return sorted(found)

    # ---- creation ------------------------------------------------------------------------------------

    async def check_topic_quota(self, topic: TopicName, adding: int) -> None:
        """maxTopicsPerNamespace: topics (partitions counted one by one) a namespace may hold; system topics
        are neither counted nor refused, as in Pulsar."""
        limit, ns = self._config.max_topics_per_namespace, topic.namespace_name
        if limit <= 0 or ns == SYSTEM_NAMESPACE or is_snapshot_topic(str(topic)):
            return
        existing = sum(not is_snapshot_topic(t) for t in await self.list_topics(ns))
        if existing + adding > limit:
            raise TopicQuotaExceeded("Exceed maximum number of topics in namespace.")  # Pulsar's words

    @contextlib.asynccontextmanager
    async def _creation_lock(self, topic: TopicName) -> AsyncIterator[None]:
        """One creation decision at a time per topic name (held only while a name is being created); with
        maxTopicsPerNamespace set, one creation at a time in all, so a count and its creation are one step."""
        key = str(topic)
        lock = self._creating.get(key)
        if lock is None:
            lock = self._creating[key] = asyncio.Lock()
        self._creating_users[key] = self._creating_users.get(key, 0) + 1
        try:
            async with lock, self._counted_creation if self._config.max_topics_per_namespace > 0 else _NO_LOCK:
                yield
        finally:
            self._creating_users[key] -= 1
            if not self._creating_users[key]:
                del self._creating_users[key], self._creating[key]

    async def create_ledger(self, topic: TopicName) -> bool:
        """Create the managed ledger of a plain topic or a partition; False if the name is partitioned."""
        async with self._creation_lock(topic):
            if not topic.is_partition and await self._declared_partitioned(topic):
                return False
            if await self._ledgers.exists(topic.managed_ledger_name):
                return True
            await self.check_topic_quota(topic, 1)
            ledger = await self.open_ledger(topic)
            if not await self._still_plain(topic, ledger):
                return False
            try:
                await ledger.close()
            except ManagedLedgerError as exc:
                raise ServiceNotReady(f"Failed to create the managed ledger of {topic}: {exc}") from exc
        return True

    async def open_or_create(self, topic: TopicName, *, create: bool) -> ManagedLedger:
        """The opened managed ledger of a topic about to load; created first when ``create`` and auto-creation
        allow (TopicNotFound otherwise)."""
        if not topic.persistent:
            raise NotAllowed("non-persistent topics are not supported by magnetar yet")
        if is_coordinator_log(topic):
            raise NotAllowed(f"{topic} is a transaction coordinator's log, not a topic clients can use")
        if await self._ledgers.exists(topic.managed_ledger_name):
            return await self.open_ledger(topic)
        if not (create and (await self.auto_topic_creation(topic.namespace_name)).allowed):
            raise TopicNotFound(f"Topic {topic} does not exist")
        if not await self.namespace_exists(topic.namespace_name):
            raise TopicNotFound(f"Namespace {topic.namespace_name} does not exist")
        async with self._creation_lock(topic):  # the same decision as create_partitioned_topic's
            if not topic.is_partition and await self._declared_partitioned(topic):
                raise NotAllowed(f"{topic} is a partitioned topic: use its partitions")
            if not topic.is_partition:  # a declared partitioned topic's partitions were counted with it
                await self.check_topic_quota(topic, 1)
            log.info("creating topic %s", topic)
            ledger = await self.open_ledger(topic)
            if not await self._still_plain(topic, ledger):
                raise NotAllowed(f"{topic} is a partitioned topic: use its partitions")
        return ledger

    async def open_ledger(self, topic: TopicName) -> ManagedLedger:
        try:
            return await self._ledgers.open(topic.managed_ledger_name, self._config.managed_ledger)
        except ManagedLedgerError as exc:
            raise ServiceNotReady(f"Failed to open the managed ledger of {topic}: {exc}") from exc

    async def _still_plain(self, topic: TopicName, created: ManagedLedger) -> bool:
        """After creating a plain topic's ledger (a create-if-absent record in the metadata store): False, with
        the ledger deleted again, if another broker declared the name partitioned meanwhile. Both creations
        write first and check the other's record after, so across brokers sharing the store at most one of
        them stands (the per-name lock decides within one broker)."""
        if topic.is_partition or not await self._declared_partitioned(topic):
            return True
        log.warning("%s was declared partitioned by another broker while it was created: creation undone", topic)
        try:
            await created.delete()
        except ManagedLedgerError as exc:
            raise ServiceNotReady(f"Failed to undo the creation of {topic}: {exc}") from exc
        return False

    async def _declared_partitioned(self, topic: TopicName) -> bool:
        return await _read(self._resources.partitioned_topics.exists(topic))


async def _read(reading: Awaitable[T]) -> T:
    """A metadata read; the metadata layer's errors become the broker's."""
    try:
        return await reading
    except md.MetadataError as exc:
        raise MetadataError(str(exc)) from exc
