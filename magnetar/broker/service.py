"""The broker service: the registry of loaded topics, namespaces and partitioned-topic metadata.

Topics load on first use (a producer, a consumer, a lookup of stats) from their managed ledger, or are
auto-created when ``allowAutoTopicCreation`` says so. Namespaces and partitioned-topic metadata live in the
metadata store under Pulsar's ``/admin/...`` paths. Pure asyncio logic: the server layer calls in.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import urllib.parse
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from magnetar.broker.compaction import CompactedTopic, CompactionService
from magnetar.broker.compaction.txn import BufferFilter
from magnetar.broker.config import BrokerConfig
from magnetar.broker.connections import ConnectionCounts
from magnetar.broker.deletion.service import LedgerDeletionService
from magnetar.broker.dispatcher import ReadBackoff
from magnetar.broker.errors import MetadataError, NotAllowed, ServiceNotReady, TopicNotFound, TopicQuotaExceeded
from magnetar.broker.names import NamespaceName, TopicName
from magnetar.broker.nonpersistent import NonPersistentTopics
from magnetar.broker.offload.service import OffloadService
from magnetar.broker.policies.service import PolicyService, QuotaTopic
from magnetar.broker.replicated_subscriptions.service import ReplicatedSubscriptions
from magnetar.broker.replication.service import ReplicationService
from magnetar.broker.retention import ExpiringTopic, RetentionService, namespace_policies
from magnetar.broker.schema import SchemaRegistry
from magnetar.broker.topic import PersistentTopic
from magnetar.broker.transactions.api import TxnRegistry
from magnetar.broker.transactions.batching import BatchedLogSwitch, LogFamily
from magnetar.broker.transactions.coordinators import TransactionCoordinatorService, is_coordinator_log
from magnetar.broker.transactions.participants import BrokerParticipants
from magnetar.broker.transactions.pending_ack_log import is_transaction_internal
from magnetar.broker.transactions.segmented_snapshot import SegmentedSnapshotStore, SwitchedSnapshotStore
from magnetar.broker.transactions.snapshot import MetadataSnapshotStore
from magnetar.broker.transactions.snapshot_topic import SnapshotHostTopic, is_snapshot_topic, keyed_topics
from magnetar.broker.transactions.topic_txn import TopicTransactions, delete_unloaded
from magnetar.core.clock import Clock, SystemClock
from magnetar.ledger.api import ManagedLedger, ManagedLedgerError, ManagedLedgerFactory
from magnetar.metadata import api as md
from magnetar.storage.api import LedgerStore

if TYPE_CHECKING:
    from magnetar.broker.inactive import InactiveTopics

log = logging.getLogger("magnetar.broker")
_NO_LOCK = contextlib.nullcontext()

SYSTEM_NAMESPACES = (NamespaceName("public", "default"), NamespaceName("pulsar", "system"))
PARTITIONS_MAX = 10_000


def partitioned_topic_key(topic: TopicName) -> str:
    local = urllib.parse.quote(topic.local_name, safe="")
    return f"/admin/partitioned-topics/{topic.tenant}/{topic.namespace}/{topic.domain}/{local}"


#: tenants' and namespaces' records, read on each topic creation (the standalone caches them in memory)
POLICIES_PREFIX = "/admin/policies/"


def namespace_key(ns: NamespaceName) -> str:
    return f"{POLICIES_PREFIX}{ns.tenant}/{ns.namespace}"


@dataclass(frozen=True, slots=True)
class PartitionedMetadata:
    partitions: int


@dataclass(frozen=True, slots=True)
class AutoTopicCreation:
    allowed: bool
    partitions: int  # 0 = create non-partitioned topics


class BrokerService:
    def __init__(
        self,
        config: BrokerConfig,
        metadata: md.MetadataStore,
        ledgers: ManagedLedgerFactory,
        clock: Clock | None = None,
        *,
        store: LedgerStore | None = None,
    ) -> None:
        """``store`` holds compacted ledgers; without one, topics are not compacted."""
        self.config = config
        self.metadata = metadata
        self.ledgers = ledgers
        self.clock = clock or SystemClock()
        self.topics: dict[str, PersistentTopic] = {}
        self._loading: dict[str, asyncio.Future[PersistentTopic]] = {}
        self._creating: dict[str, asyncio.Lock] = {}
        self._creating_users: dict[str, int] = {}
        self._counted_creation = asyncio.Lock()  # creations while a topic quota is counted
        self._producer_counter = 0
        self.started_ms = self.clock.now_ms()
        self.closing = False
        self.connections = ConnectionCounts()  # counted by the server, read by /metrics
        self.policies = PolicyService(self)  # topic policies, effective dedup, backlog quotas
        self.non_persistent = NonPersistentTopics()  # non-persistent:// topics, in memory only
        self.schemas = SchemaRegistry(metadata, config, self.clock)  # schema versions and their policies
        self.inactive_topics: InactiveTopics | None = None  # unloads idle topics (broker/inactive.py)
        self.retention = RetentionService(self, self.clock)  # retention trim and TTL, every retentionCheckInterval
        self.offload = OffloadService(self, self.clock)  # tiered storage: triggered and automatic offloads
        # set by the transaction coordinator when transactions are enabled; topics ask it before a txn SEND/ACK
        self.txn_registry: TxnRegistry | None = None
        self.txn_coordinators: TransactionCoordinatorService | None = None  # the TCs, for their wire commands
        # PIP-160: the coordinator log and pending-ack stores take their writers from here (switchable live)
        self.txn_log_batching = BatchedLogSwitch(config.transaction_log_batching, config.pending_ack_batching,
                                                 metadata)
        # what the coordinator calls to end a transaction on this broker's topics and subscriptions
        self.txn_participants = BrokerParticipants(self)
        # PIP-178: segmented snapshots in each namespace's __transaction_buffer_snapshot, or one metadata record
        self.txn_snapshots = SwitchedSnapshotStore(
            SegmentedSnapshotStore(keyed_topics(self._snapshot_topic, self._compact_snapshot_topic),
                                   segment_size=config.transaction_buffer_snapshot_segment_size),
            MetadataSnapshotStore(metadata),
            segmented_enabled=config.transaction_buffer_segmented_snapshot_enabled, pinned=is_snapshot_topic,
        )
        # PIP-186: set by the process when two-phase deletion runs (admin and metrics read it)
        self.ledger_deletion: LedgerDeletionService | None = None
        # geo-replication; inert until the composition root supplies ``replication.factory``
        self.replication = ReplicationService(
            self, metadata, self.clock, local_cluster=config.cluster_name,
            queue_size=config.replication_producer_queue_size,
            check_interval_s=config.replication_policy_check_duration_seconds,
        )
        # PIP-33: snapshots and subscription updates ride the replicators
        self.replicated_subscriptions = ReplicatedSubscriptions(
            self.replication, lambda: self.topics.values(), self.clock,
            enabled=config.enable_replicated_subscriptions,
            frequency_ms=config.replicated_subscriptions_snapshot_frequency_millis,
            timeout_s=config.replicated_subscriptions_snapshot_timeout_seconds,
            max_cached=config.replicated_subscriptions_snapshot_max_cached_per_subscription,
        )
        self.compaction = CompactionService(
            store, self.clock, lambda ns: namespace_policies(metadata, ns), self._compacted_topics,
            threshold_bytes=config.broker_service_compaction_threshold_bytes,
            monitor_interval_s=config.broker_service_compaction_monitor_interval_seconds,
            max_message_size=config.max_message_size,
        ) if store is not None else None

    async def start(self) -> None:
        """Create the cluster and the standalone namespaces if this is a fresh metadata store."""
        cluster_key = f"/admin/clusters/{self.config.cluster_name}"
        if not await self.metadata.exists(cluster_key):
            await self.metadata.put(cluster_key, json.dumps({"serviceUrl": ""}).encode())
        for ns in SYSTEM_NAMESPACES:
            tenant_key = f"/admin/policies/{ns.tenant}"
            if not await self.metadata.exists(tenant_key):
                info = {"adminRoles": [], "allowedClusters": [self.config.cluster_name]}
                await self.metadata.put(tenant_key, json.dumps(info).encode())
            if not await self.metadata.exists(namespace_key(ns)):
                await self.metadata.put(namespace_key(ns), json.dumps({}).encode())
        self.retention.start()
        self.policies.start()
        self.offload.start()
        self.replication.start()
        self.replicated_subscriptions.start()
        from magnetar.broker.inactive import InactiveTopics  # it drives the admin, which imports this module

        self.inactive_topics = InactiveTopics.for_broker(self)
        self.inactive_topics.start()
        if self.compaction is not None:
            self.compaction.start()

    def new_producer_name(self) -> str:
        self._producer_counter += 1
        return f"{self.config.cluster_name}-0-{self._producer_counter - 1}"

    # ---- namespaces and partitions -------------------------------------------------------------------

    async def namespace_exists(self, ns: NamespaceName) -> bool:
        return await self.metadata.exists(namespace_key(ns))

    async def partitioned_metadata(self, topic: TopicName) -> PartitionedMetadata:
        """The partition count (0 = not partitioned), auto-creating a partitioned topic if so configured."""
        if topic.is_partition:
            return PartitionedMetadata(0)
        record = await self._get(partitioned_topic_key(topic))
        if record is not None:
            return PartitionedMetadata(int(json.loads(record.value)["partitions"]))
        creation = await self.auto_topic_creation(topic.namespace_name)
        if (
            creation.allowed
            and creation.partitions > 0
            and topic.persistent
            and await self.namespace_exists(topic.namespace_name)
        ):
            await self.create_partitioned_topic(topic, creation.partitions)  # False: a plain topic has the name
            record = await self._get(partitioned_topic_key(topic))
            if record is not None:
                return PartitionedMetadata(int(json.loads(record.value)["partitions"]))
        return PartitionedMetadata(0)

    async def namespace_policies(self, ns: NamespaceName) -> dict[str, Any]:
        """The namespace's stored policies ({} when it has none or does not exist)."""
        record = await self._get(namespace_key(ns))
        value = json.loads(record.value or b"{}") if record is not None else {}
        return value if isinstance(value, dict) else {}

    async def partition_count(self, topic: TopicName) -> int:
        record = await self._get(partitioned_topic_key(topic))
        return int(json.loads(record.value)["partitions"]) if record is not None else 0

    async def list_topic_names(self) -> list[TopicName]:
        return [TopicName.from_managed_ledger_name(n) for n in await self.ledgers.list_names()]

    async def auto_topic_creation(self, ns: NamespaceName) -> AutoTopicCreation:
        """The broker's auto-creation settings, overridden by the namespace's ``autoTopicCreationOverride``."""
        allowed = self.config.allow_auto_topic_creation
        partitioned = self.config.allow_auto_topic_creation_type == "partitioned"
        partitions = max(1, self.config.default_num_partitions)
        record = await self._get(namespace_key(ns))
        override = json.loads(record.value).get("autoTopicCreationOverride") if record is not None else None
        if isinstance(override, dict) and isinstance(override.get("allowAutoTopicCreation"), bool):
            allowed = override["allowAutoTopicCreation"]
            partitioned = override.get("topicType") == "partitioned"
            partitions = max(1, int(override.get("defaultNumPartitions", 1)))
        return AutoTopicCreation(allowed, partitions if partitioned else 0)

    async def create_partitioned_topic(self, topic: TopicName, partitions: int) -> bool:
        """Declare ``topic`` partitioned; False if the name is taken (by a plain topic or a racing creator).

        Decided under the name's creation lock, the same one a plain topic's creation takes, so a name is
        never both a partitioned and a non-partitioned topic."""
        if not 0 < partitions <= PARTITIONS_MAX:
            raise NotAllowed(f"Number of partitions must be between 1 and {PARTITIONS_MAX}")
        async with self._creation_lock(topic):
            if str(topic) in self.topics or await self.ledgers.exists(topic.managed_ledger_name):
                return False
            await self.check_topic_quota(topic, partitions)
            try:
                await self.metadata.put(
                    partitioned_topic_key(topic), json.dumps({"partitions": partitions}).encode(), md.NEW_KEY
                )
            except md.BadVersion:
                return False  # created concurrently: the first one wins
            except md.MetadataError as exc:
                raise MetadataError(str(exc)) from exc
            if await self.ledgers.exists(topic.managed_ledger_name):  # another broker created it plain meanwhile
                await self._delete_key_quietly(partitioned_topic_key(topic))
                return False
        log.info("created partitioned topic %s with %d partitions", topic, partitions)
        return True

    async def check_topic_quota(self, topic: TopicName, adding: int) -> None:
        """maxTopicsPerNamespace: topics (partitions counted one by one) a namespace may hold; system topics
        are neither counted nor refused, as in Pulsar."""
        limit, ns = self.config.max_topics_per_namespace, topic.namespace_name
        if limit <= 0 or ns == NamespaceName("pulsar", "system") or is_snapshot_topic(str(topic)):
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
            async with lock, self._counted_creation if self.config.max_topics_per_namespace > 0 else _NO_LOCK:
                yield
        finally:
            self._creating_users[key] -= 1
            if not self._creating_users[key]:
                del self._creating_users[key], self._creating[key]

    async def create_ledger(self, topic: TopicName) -> bool:
        """Create the managed ledger of a plain topic or a partition; False if the name is partitioned."""
        async with self._creation_lock(topic):
            if not topic.is_partition and await self._get(partitioned_topic_key(topic)):
                return False
            if await self.ledgers.exists(topic.managed_ledger_name):
                return True
            await self.check_topic_quota(topic, 1)
            ledger = await self._open_ledger(topic)
            if not await self._still_plain(topic, ledger):
                return False
            try:
                await ledger.close()
            except ManagedLedgerError as exc:
                raise ServiceNotReady(f"Failed to create the managed ledger of {topic}: {exc}") from exc
        return True

    async def _still_plain(self, topic: TopicName, created: ManagedLedger) -> bool:
        """After creating a plain topic's ledger (a create-if-absent record in the metadata store): False, with
        the ledger deleted again, if another broker declared the name partitioned meanwhile. Both creations
        write first and check the other's record after, so across brokers sharing the store at most one of
        them stands (the per-name lock decides within one broker)."""
        if topic.is_partition or await self._get(partitioned_topic_key(topic)) is None:
            return True
        log.warning("%s was declared partitioned by another broker while it was created: creation undone", topic)
        try:
            await created.delete()
        except ManagedLedgerError as exc:
            raise ServiceNotReady(f"Failed to undo the creation of {topic}: {exc}") from exc
        return False

    async def _delete_key_quietly(self, key: str) -> None:
        try:
            await self.metadata.delete(key)
        except md.NotFound:
            pass
        except md.MetadataError as exc:
            raise MetadataError(str(exc)) from exc

    async def _get(self, key: str) -> md.Record | None:
        try:
            return await self.metadata.get(key)
        except md.MetadataError as exc:
            raise MetadataError(str(exc)) from exc

    async def list_topics(self, ns: NamespaceName) -> list[str]:
        """Every persistent topic of a namespace (partitions by their partition names)."""
        prefix = f"{ns.tenant}/{ns.namespace}/persistent/"
        names = [
            n for n in await self.ledgers.list_names() if n.startswith(prefix) and not is_transaction_internal(n)
        ]
        topics = [TopicName.from_managed_ledger_name(n) for n in names]
        found = {str(t) for t in topics if not is_coordinator_log(t)}  # storage, not topics (regex consumers)
        found.update(await self._partitions_of_partitioned_topics(ns))
        return sorted(found)

    async def _partitions_of_partitioned_topics(self, ns: NamespaceName) -> list[str]:
        """Every partition of the namespace's partitioned topics, written to or not (as Pulsar lists them)."""
        parent = f"/admin/partitioned-topics/{ns.tenant}/{ns.namespace}/persistent"
        try:
            locals_ = await self.metadata.children(parent)
        except md.MetadataError as exc:
            raise MetadataError(str(exc)) from exc
        out: list[str] = []
        for quoted in locals_:
            topic = TopicName.parse(f"persistent://{ns}/{urllib.parse.unquote(quoted)}")
            count = await self.partition_count(topic)  # a read: listing never creates (and takes no lock)
            out += [str(topic.partition(i)) for i in range(count)]
        return out

    # ---- topics --------------------------------------------------------------------------------------

    async def get_topic(self, topic: TopicName, *, create: bool) -> PersistentTopic:
        """The loaded topic; load it, or create it when ``create`` and auto-creation allow."""
        key = str(topic)
        loaded = self.topics.get(key)
        if loaded is not None:
            return loaded
        if self.closing:
            raise ServiceNotReady("Broker is shutting down")
        pending = self._loading.get(key)
        if pending is not None:
            return await asyncio.shield(pending)
        future: asyncio.Future[PersistentTopic] = asyncio.get_running_loop().create_future()
        self._loading[key] = future
        try:
            result = await self._load(topic, create=create)
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # waiters re-raise; nobody else needs to see it
            raise
        else:
            future.set_result(result)
            self.topics[key] = result
            return result
        finally:
            del self._loading[key]

    async def _load(self, topic: TopicName, *, create: bool) -> PersistentTopic:
        if not topic.persistent:
            raise NotAllowed("non-persistent topics are not supported by magnetar yet")
        if is_coordinator_log(topic):
            raise NotAllowed(f"{topic} is a transaction coordinator's log, not a topic clients can use")
        ml_name = topic.managed_ledger_name
        if not await self.ledgers.exists(ml_name):
            if not (create and (await self.auto_topic_creation(topic.namespace_name)).allowed):
                raise TopicNotFound(f"Topic {topic} does not exist")
            if not await self.namespace_exists(topic.namespace_name):
                raise TopicNotFound(f"Namespace {topic.namespace_name} does not exist")
            async with self._creation_lock(topic):  # the same decision as create_partitioned_topic's
                if not topic.is_partition and await self._get(partitioned_topic_key(topic)) is not None:
                    raise NotAllowed(f"{topic} is a partitioned topic: use its partitions")
                if not topic.is_partition:  # a declared partitioned topic's partitions were counted with it
                    await self.check_topic_quota(topic, 1)
                log.info("creating topic %s", topic)
                ledger = await self._open_ledger(topic)
                if not await self._still_plain(topic, ledger):
                    raise NotAllowed(f"{topic} is a partitioned topic: use its partitions")
        else:
            ledger = await self._open_ledger(topic)
        loaded = PersistentTopic(
            topic,
            ledger,
            self.clock,
            dedup_enabled=await self.policies.dedup_enabled(topic),
            dedup_snapshot_entries=self.config.broker_deduplication_entries_interval,
            dedup_snapshot_interval_s=self.config.broker_deduplication_snapshot_interval_seconds,
            read_batch_max=self.config.dispatcher_max_read_batch_size,
            read_bytes_max=self.config.dispatcher_max_read_size_bytes,
            auto_skip_corrupted=self.config.auto_skip_non_recoverable_data,
            read_backoff=ReadBackoff(self.config.dispatcher_read_failure_backoff_initial_ms,
                                     self.config.dispatcher_read_failure_backoff_max_ms),
            transactions=functools.partial(
                TopicTransactions,
                ledgers=self.ledgers,
                snapshots=self.txn_snapshots,
                ledger_config=self.config.managed_ledger,
                new_writer=functools.partial(self.txn_log_batching.new_writer, LogFamily.PENDING_ACK),
                snapshot_min_interval_ms=self.config.transaction_buffer_snapshot_min_time_ms,
                snapshot_max_txn_count=self.config.transaction_buffer_snapshot_max_transaction_count,
            ),
        )
        await loaded.start()
        try:
            await self.replication.topic_loaded(loaded)
            self.replicated_subscriptions.topic_loaded(loaded)
        except BaseException:
            await loaded.close()
            raise
        if self.compaction is not None:
            txn = BufferFilter(loaded.txn.buffer) if loaded.txn is not None else None
            loaded.compacted = await self.compaction.attach(str(topic), ledger, txn)
        # a topic just created said so already ("creating topic"): one line per topic, thousands at a time
        log.log(logging.INFO if ledger.number_of_entries() or loaded.subscriptions else logging.DEBUG,
                "loaded topic %s (%d entries, %d subscriptions)", topic, ledger.number_of_entries(),
                len(loaded.subscriptions))
        return loaded

    async def _open_ledger(self, topic: TopicName) -> ManagedLedger:
        try:
            return await self.ledgers.open(topic.managed_ledger_name, self.config.managed_ledger)
        except ManagedLedgerError as exc:
            raise ServiceNotReady(f"Failed to open the managed ledger of {topic}: {exc}") from exc

    async def delete_transaction_state(self, topic: TopicName, subscriptions: list[str]) -> None:
        """Pending-ack logs and the buffer snapshot of a topic deleted while not loaded."""
        await delete_unloaded(self.ledgers, self.txn_snapshots, topic, subscriptions, self.config.managed_ledger)

    async def _snapshot_topic(self, topic: TopicName, create: bool) -> SnapshotHostTopic | None:
        """The namespace's transaction-buffer snapshot topic (created whatever auto-creation says)."""
        if not await self.ledgers.exists(topic.managed_ledger_name):
            if not create:
                return None
            ledger = await self._open_ledger(topic)
            await ledger.close()
        return await self.get_topic(topic, create=False)

    def _compact_snapshot_topic(self, topic: CompactedTopic) -> None:
        if self.compaction is not None and not self.compaction.is_running(topic):
            self.compaction.trigger(topic)

    def loaded_topics(self) -> list[tuple[NamespaceName, ExpiringTopic]]:
        """For the retention task: every loaded topic with its namespace."""
        return [(t.name.namespace_name, t) for t in self.topics.values()]

    def _compacted_topics(self) -> list[tuple[NamespaceName, CompactedTopic]]:
        return [(t.name.namespace_name, t.compacted) for t in self.topics.values() if t.compacted is not None]

    def quota_topics(self) -> list[QuotaTopic]:
        return list(self.topics.values())

    async def close(self) -> None:
        self.closing = True
        if self.inactive_topics is not None:
            await self.inactive_topics.stop()
        await self.retention.stop()
        await self.policies.stop()
        await self.offload.stop()
        await self.replicated_subscriptions.close()
        await self.replication.close()
        if self.compaction is not None:
            await self.compaction.stop()
        # snapshot topics last: the others write their last transaction-buffer snapshot to them on close
        for topic in sorted(self.topics.values(), key=lambda t: is_snapshot_topic(str(t.name))):
            try:
                await topic.close()
            except Exception:
                log.exception("failed to close topic %s", topic.name)
        self.topics.clear()
