"""The broker service: the parts of one broker, built and started together.

Topics live in :mod:`magnetar.broker.registry` (their lifecycle, and the catalog of what exists and may be
created); each feature registers there as a topic listener. Pure asyncio logic: the server layer calls in.
"""

from __future__ import annotations

import functools
import json
import logging
from dataclasses import dataclass
from typing import Any

from magnetar.broker.cluster.lookup import ListenerSettings, Lookup
from magnetar.broker.cluster.ownership import LocalOwnership, Ownership
from magnetar.broker.compaction import CompactedTopic, CompactionService
from magnetar.broker.compaction.txn import TxnFilter
from magnetar.broker.config import BrokerConfig
from magnetar.broker.connections import ConnectionCounts
from magnetar.broker.deletion.service import LedgerDeletionService
from magnetar.broker.names import NamespaceName, TopicName
from magnetar.broker.nonpersistent import NonPersistentTopics
from magnetar.broker.offload.service import OffloadService
from magnetar.broker.policies.retention import ExpiringTopic, RetentionService, namespace_policies
from magnetar.broker.policies.service import PolicyService, QuotaTopic
from magnetar.broker.registry.catalog import SYSTEM_NAMESPACES, TopicCatalog, namespace_key
from magnetar.broker.registry.inactive import InactiveTopics
from magnetar.broker.registry.registry import TopicRegistry, TopicSettings
from magnetar.broker.replication.service import ReplicationService
from magnetar.broker.replication.subscriptions.service import ReplicatedSubscriptions
from magnetar.broker.schema import SchemaRegistry
from magnetar.broker.subscription.dispatcher import ReadBackoff
from magnetar.broker.topic.persistent import PersistentTopic
from magnetar.broker.transactions.api import TxnRegistry
from magnetar.broker.transactions.batching import BatchedLogSwitch, LogFamily
from magnetar.broker.transactions.compaction_filter import BufferFilter
from magnetar.broker.transactions.coordinators import TransactionCoordinatorService
from magnetar.broker.transactions.listener import TransactionsListener, transactions_of
from magnetar.broker.transactions.participants import BrokerParticipants
from magnetar.broker.transactions.segmented_snapshot import SegmentedSnapshotStore, SwitchedSnapshotStore
from magnetar.broker.transactions.snapshot import MetadataSnapshotStore
from magnetar.broker.transactions.snapshot_topic import SnapshotHostTopic, is_snapshot_topic, keyed_topics
from magnetar.broker.transactions.topic_txn import TopicTransactions
from magnetar.core.clock import Clock, SystemClock
from magnetar.ledger.api import ManagedLedgerFactory, Position
from magnetar.metadata import api as md
from magnetar.storage.api import LedgerStore

log = logging.getLogger("magnetar.broker")



@dataclass(slots=True)
class _SnapshotHost:
    """A loaded snapshot topic as the segmented snapshot store sees it (its append and compacted view)."""

    topic: PersistentTopic
    clock: Clock
    compacted: CompactedTopic | None

    async def append_internal(self, entry: bytes) -> Position:
        return await self.topic.append_internal(entry)


def _txn_filter(topic: PersistentTopic) -> TxnFilter | None:
    transactions = transactions_of(topic.txn)
    return BufferFilter(transactions.buffer) if transactions is not None else None


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
        self._producer_counter = 0
        self.started_ms = self.clock.now_ms()
        self.connections = ConnectionCounts()  # counted by the server, read by /metrics
        self.catalog = TopicCatalog(config, metadata, ledgers)  # what topics exist and may be created
        self.ownership: Ownership = LocalOwnership()  # this broker owns every topic
        self.lookup = Lookup(self.ownership, self.catalog,
                             ListenerSettings(config.advertised_listeners, config.internal_listener_name))
        self.policies = PolicyService(self)  # topic policies, effective dedup, backlog quotas
        self.non_persistent = NonPersistentTopics()  # non-persistent:// topics, in memory only
        self.schemas = SchemaRegistry(metadata, config, self.clock)  # schema versions and their policies
        # set by the transaction coordinator when transactions are enabled; topics ask it before a txn SEND/ACK
        self.txn_registry: TxnRegistry | None = None
        self.txn_coordinators: TransactionCoordinatorService | None = None  # the TCs, for their wire commands
        # PIP-160: the coordinator log and pending-ack stores take their writers from here (switchable live)
        self.txn_log_batching = BatchedLogSwitch(config.transaction_log_batching, config.pending_ack_batching,
                                                 metadata)
        # PIP-178: segmented snapshots in each namespace's __transaction_buffer_snapshot, or one metadata record
        self.txn_snapshots = SwitchedSnapshotStore(
            SegmentedSnapshotStore(keyed_topics(self._snapshot_topic, self._compact_snapshot_topic),
                                   segment_size=config.transaction_buffer_snapshot_segment_size),
            MetadataSnapshotStore(metadata),
            segmented_enabled=config.transaction_buffer_segmented_snapshot_enabled, pinned=is_snapshot_topic,
        )
        # the loaded topics: their one lifecycle, with every feature below told of each load and close
        self.registry = TopicRegistry(
            self.catalog, ledgers, self.clock, self.ownership,
            TopicSettings(
                dedup_snapshot_entries=config.broker_deduplication_entries_interval,
                dedup_snapshot_interval_s=config.broker_deduplication_snapshot_interval_seconds,
                read_batch_max=config.dispatcher_max_read_batch_size,
                read_bytes_max=config.dispatcher_max_read_size_bytes,
                auto_skip_corrupted=config.auto_skip_non_recoverable_data,
                read_backoff=ReadBackoff(config.dispatcher_read_failure_backoff_initial_ms,
                                         config.dispatcher_read_failure_backoff_max_ms),
                ledger_config=config.managed_ledger,
            ),
            dedup_enabled=self.policies.dedup_enabled,
            transactions=functools.partial(
                TopicTransactions,
                ledgers=ledgers,
                snapshots=self.txn_snapshots,
                ledger_config=config.managed_ledger,
                new_writer=functools.partial(self.txn_log_batching.new_writer, LogFamily.PENDING_ACK),
                snapshot_min_interval_ms=config.transaction_buffer_snapshot_min_time_ms,
                snapshot_max_txn_count=config.transaction_buffer_snapshot_max_transaction_count,
            ),
            close_last=is_snapshot_topic,  # the others write their last transaction-buffer snapshot to them
        )
        # what the coordinator calls to end a transaction on this broker's topics and subscriptions
        self.txn_participants = BrokerParticipants(self.registry)
        self.inactive_topics = InactiveTopics(self.registry, config, self.clock)  # unloads idle topics
        self.retention = RetentionService(self, self.clock)  # retention trim and TTL, every retentionCheckInterval
        self.offload = OffloadService(self, self.clock)  # tiered storage: triggered and automatic offloads
        # PIP-186: set by the process when two-phase deletion runs (admin and metrics read it)
        self.ledger_deletion: LedgerDeletionService | None = None
        # geo-replication; inert until the composition root supplies ``replication.factory``
        self.replication = ReplicationService(
            self.registry, self.catalog, metadata, self.clock, local_cluster=config.cluster_name,
            queue_size=config.replication_producer_queue_size,
            check_interval_s=config.replication_policy_check_duration_seconds,
        )
        # PIP-33: snapshots and subscription updates ride the replicators
        self.replicated_subscriptions = ReplicatedSubscriptions(
            self.replication, self.clock,
            enabled=config.enable_replicated_subscriptions,
            frequency_ms=config.replicated_subscriptions_snapshot_frequency_millis,
            timeout_s=config.replicated_subscriptions_snapshot_timeout_seconds,
            max_cached=config.replicated_subscriptions_snapshot_max_cached_per_subscription,
        )
        self.compaction = CompactionService(
            store, self.clock, lambda ns: namespace_policies(metadata, ns), txn_filter_of=_txn_filter,
            threshold_bytes=config.broker_service_compaction_threshold_bytes,
            monitor_interval_s=config.broker_service_compaction_monitor_interval_seconds,
            max_message_size=config.max_message_size,
        ) if store is not None else None
        self.registry.add_listener(TransactionsListener(ledgers, self.txn_snapshots, config.managed_ledger))
        self.registry.add_listener(self.replication)
        self.registry.add_listener(self.replicated_subscriptions)
        if self.compaction is not None:
            self.registry.add_listener(self.compaction)

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
        self.inactive_topics.start()
        if self.compaction is not None:
            self.compaction.start()

    def new_producer_name(self) -> str:
        self._producer_counter += 1
        return f"{self.config.cluster_name}-0-{self._producer_counter - 1}"

    async def _snapshot_topic(self, topic: TopicName, create: bool) -> SnapshotHostTopic | None:
        """The namespace's transaction-buffer snapshot topic (created whatever auto-creation says)."""
        if not await self.ledgers.exists(topic.managed_ledger_name):
            if not create:
                return None
            ledger = await self.catalog.open_ledger(topic)
            await ledger.close()
        loaded = await self.registry.get(topic, create=False)
        compacted = self.compaction.view(str(topic)) if self.compaction is not None else None
        return _SnapshotHost(loaded, loaded.clock, compacted)

    def _compact_snapshot_topic(self, topic: CompactedTopic) -> None:
        if self.compaction is not None and not self.compaction.is_running(topic):
            self.compaction.trigger(topic)

    # ---- what the periodic services see of the loaded topics ----------------------------------------

    async def get_topic(self, topic: TopicName, *, create: bool) -> PersistentTopic:
        """For the offload service's passes (they load topics with work due)."""
        return await self.registry.get(topic, create=create)

    def loaded_topics(self) -> list[tuple[NamespaceName, ExpiringTopic]]:
        """For the retention task: every loaded topic with its namespace."""
        return [(t.name.namespace_name, t) for t in self.registry.topics()]

    async def namespace_policies(self, ns: NamespaceName) -> dict[str, Any]:
        """For the offload service's thresholds."""
        return await self.catalog.namespace_policies(ns)

    def quota_topics(self) -> list[QuotaTopic]:
        return list(self.registry.topics())

    async def close(self) -> None:
        self.registry.shutting_down = True
        await self.inactive_topics.stop()
        await self.retention.stop()
        await self.policies.stop()
        await self.offload.stop()
        await self.replicated_subscriptions.close()
        await self.replication.close()
        if self.compaction is not None:
            await self.compaction.stop()
        await self.registry.close_all()
