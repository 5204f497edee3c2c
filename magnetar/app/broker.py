"""Building one broker: every part made once, each given exactly its collaborators, every feature
registered with the topic registry; then started and stopped in order.

This is the only place that knows how the parts fit: transactions' topic side plugs into each topic the
registry builds, their compaction filter into compaction, PIP-178's snapshots load their topic through the
registry and compact it through compaction. Nothing here holds a rule of its own.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass

from magnetar.broker.cluster.bundles import Bundles
from magnetar.broker.cluster.keys import ClusterKeys
from magnetar.broker.cluster.lookup import ListenerSettings, Lookup
from magnetar.broker.cluster.ownership import LocalOwnership, Ownership
from magnetar.broker.cluster.parts import ClusterParts
from magnetar.broker.compaction import CompactedTopic, CompactionService
from magnetar.broker.compaction.txn import TxnFilter
from magnetar.broker.config import BrokerConfig
from magnetar.broker.connections import ConnectionCounts
from magnetar.broker.names import NamespaceName, TopicName
from magnetar.broker.nonpersistent import NonPersistentTopics
from magnetar.broker.offload.service import OffloadService
from magnetar.broker.parts import Broker
from magnetar.broker.policies.retention import RetentionService
from magnetar.broker.policies.service import PolicyService
from magnetar.broker.registry.catalog import SYSTEM_NAMESPACES, TopicCatalog
from magnetar.broker.registry.inactive import InactiveTopics
from magnetar.broker.registry.registry import TopicRegistry, TopicSettings
from magnetar.broker.registry.views import TopicsHost
from magnetar.broker.replication.service import ReplicationService
from magnetar.broker.replication.subscriptions.service import ReplicatedSubscriptions
from magnetar.broker.schema import SchemaRegistry
from magnetar.broker.subscription.dispatcher import ReadBackoff
from magnetar.broker.topic.persistent import PersistentTopic
from magnetar.broker.topic.producer import ProducerNames
from magnetar.broker.transactions.batching import BatchedLogSwitch, LogFamily
from magnetar.broker.transactions.compaction_filter import BufferFilter
from magnetar.broker.transactions.listener import TransactionsListener, transactions_of
from magnetar.broker.transactions.participants import BrokerParticipants
from magnetar.broker.transactions.segmented_snapshot import SegmentedSnapshotStore, SwitchedSnapshotStore
from magnetar.broker.transactions.snapshot import MetadataSnapshotStore
from magnetar.broker.transactions.snapshot_topic import SnapshotHostTopic, is_snapshot_topic, keyed_topics
from magnetar.broker.transactions.topic_txn import TopicTransactions
from magnetar.core.clock import Clock, SystemClock
from magnetar.ledger.api import ManagedLedgerFactory, Position
from magnetar.metadata import api as md
from magnetar.resources import MetadataResources, Policies, TenantInfo
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


class _SnapshotTopics:
    """PIP-178's snapshot topics: loaded through the registry, compacted by the compaction service (both are
    built after the snapshot store that needs them, and set here then)."""

    def __init__(self, ledgers: ManagedLedgerFactory, catalog: TopicCatalog) -> None:
        self._ledgers = ledgers
        self._catalog = catalog
        self.registry: TopicRegistry | None = None
        self.compaction: CompactionService | None = None

    async def load(self, topic: TopicName, create: bool) -> SnapshotHostTopic | None:
        """The namespace's transaction-buffer snapshot topic (created whatever auto-creation says)."""
        assert self.registry is not None
        if not await self._ledgers.exists(topic.managed_ledger_name):
            if not create:
                return None
            ledger = await self._catalog.open_ledger(topic)
            await ledger.close()
        loaded = await self.registry.get(topic, create=False)
        compacted = self.compaction.view(str(topic)) if self.compaction is not None else None
        return _SnapshotHost(loaded, loaded.clock, compacted)

    def compact(self, topic: CompactedTopic) -> None:
        if self.compaction is not None and not self.compaction.is_running(topic):
            self.compaction.trigger(topic)


def _txn_filter(topic: PersistentTopic) -> TxnFilter | None:
    transactions = transactions_of(topic.txn)
    return BufferFilter(transactions.buffer) if transactions is not None else None


def _topic_settings(config: BrokerConfig) -> TopicSettings:
    return TopicSettings(
        dedup_snapshot_entries=config.broker_deduplication_entries_interval,
        dedup_snapshot_interval_s=config.broker_deduplication_snapshot_interval_seconds,
        read_batch_max=config.dispatcher_max_read_batch_size,
        read_bytes_max=config.dispatcher_max_read_size_bytes,
        auto_skip_corrupted=config.auto_skip_non_recoverable_data,
        read_backoff=ReadBackoff(config.dispatcher_read_failure_backoff_initial_ms,
                                 config.dispatcher_read_failure_backoff_max_ms),
        ledger_config=config.managed_ledger,
    )


def build_broker(
    config: BrokerConfig,
    metadata: md.MetadataStore,
    ledgers: ManagedLedgerFactory,
    clock: Clock | None = None,
    *,
    store: LedgerStore | None = None,
    cluster: ClusterParts | None = None,
    resources: MetadataResources | None = None,
) -> Broker:
    """Every part of one broker, wired. ``store`` holds compacted ledgers (without one, topics are not
    compacted); ``cluster``: this broker is one of a cluster's and serves the bundles it owns (without it, it
    serves every topic); ``resources`` are ``metadata``'s records (made here when not given;
    :func:`stop_broker` closes them)."""
    clock = clock or SystemClock()
    resources = resources if resources is not None else MetadataResources(metadata)
    keys = ClusterKeys(metadata, config.default_number_of_namespace_bundles)

    async def bundles_of(ns: NamespaceName) -> Bundles:
        return (await keys.bundles(ns)).bundles

    ownership: Ownership = cluster.ownership if cluster is not None else LocalOwnership(bundles_of)
    catalog = TopicCatalog(config, resources, ledgers)
    lookup = Lookup(ownership, catalog, ListenerSettings(config.advertised_listeners, config.internal_listener_name))
    txn_log_batching = BatchedLogSwitch(config.transaction_log_batching, config.pending_ack_batching, metadata)
    snapshot_topics = _SnapshotTopics(ledgers, catalog)
    txn_snapshots = SwitchedSnapshotStore(
        SegmentedSnapshotStore(keyed_topics(snapshot_topics.load, snapshot_topics.compact),
                               segment_size=config.transaction_buffer_snapshot_segment_size),
        MetadataSnapshotStore(metadata),
        segmented_enabled=config.transaction_buffer_segmented_snapshot_enabled, pinned=is_snapshot_topic,
    )
    policies: PolicyService | None = None

    async def dedup_enabled(topic: TopicName) -> bool:
        assert policies is not None
        return await policies.dedup_enabled(topic)

    registry = TopicRegistry(
        catalog, ledgers, clock, ownership, _topic_settings(config),
        dedup_enabled=dedup_enabled,
        transactions=functools.partial(
            TopicTransactions,
            ledgers=ledgers,
            snapshots=txn_snapshots,
            ledger_config=config.managed_ledger,
            new_writer=functools.partial(txn_log_batching.new_writer, LogFamily.PENDING_ACK),
            snapshot_min_interval_ms=config.transaction_buffer_snapshot_min_time_ms,
            snapshot_max_txn_count=config.transaction_buffer_snapshot_max_transaction_count,
        ),
        close_last=is_snapshot_topic,  # the others write their last transaction-buffer snapshot to them
    )
    host = TopicsHost(config, resources, ledgers, clock, registry, catalog)
    policies = PolicyService(host)
    replication = ReplicationService(
        registry, catalog, resources, clock, local_cluster=config.cluster_name,
        queue_size=config.replication_producer_queue_size,
        check_interval_s=config.replication_policy_check_duration_seconds,
    )
    replicated_subscriptions = ReplicatedSubscriptions(  # PIP-33: snapshots and updates ride the replicators
        replication, clock,
        enabled=config.enable_replicated_subscriptions,
        frequency_ms=config.replicated_subscriptions_snapshot_frequency_millis,
        timeout_s=config.replicated_subscriptions_snapshot_timeout_seconds,
        max_cached=config.replicated_subscriptions_snapshot_max_cached_per_subscription,
    )

    async def namespace_policies(ns: NamespaceName) -> Policies:
        return await catalog.namespace_policies(ns)

    compaction = CompactionService(
        store, clock, namespace_policies, txn_filter_of=_txn_filter,
        threshold_bytes=config.broker_service_compaction_threshold_bytes,
        monitor_interval_s=config.broker_service_compaction_monitor_interval_seconds,
        max_message_size=config.max_message_size,
    ) if store is not None else None
    snapshot_topics.registry, snapshot_topics.compaction = registry, compaction
    # every feature that keeps state per topic hears of each load and close, in this order (closes reversed)
    registry.add_listener(TransactionsListener(ledgers, txn_snapshots, config.managed_ledger))
    registry.add_listener(replication)
    registry.add_listener(replicated_subscriptions)
    if compaction is not None:
        registry.add_listener(compaction)
    return Broker(
        config=config, clock=clock, metadata=metadata, resources=resources, ledgers=ledgers, started_ms=clock.now_ms(),
        connections=ConnectionCounts(), producer_names=ProducerNames(config.cluster_name),
        catalog=catalog, ownership=ownership, lookup=lookup, registry=registry,
        inactive_topics=InactiveTopics(registry, config, clock),
        policies=policies, retention=RetentionService(host, clock), schemas=SchemaRegistry(resources, config, clock),
        non_persistent=NonPersistentTopics(), offload=OffloadService(host, clock), replication=replication,
        replicated_subscriptions=replicated_subscriptions, compaction=compaction,
        txn_log_batching=txn_log_batching, txn_snapshots=txn_snapshots,
        txn_participants=BrokerParticipants(registry), cluster=cluster,
    )


async def start_broker(broker: Broker) -> None:
    """Create the cluster and the standalone namespaces if the metadata store is fresh, then start the
    periodic services (topics load lazily, on first use)."""
    res, cluster = broker.resources, broker.config.cluster_name
    if not await res.clusters.exists(cluster):
        await res.clusters.put(cluster, {"serviceUrl": ""})
    for ns in SYSTEM_NAMESPACES:
        if not await res.tenants.exists(ns.tenant):
            await res.tenants.put(ns.tenant, TenantInfo(allowed_clusters=(cluster,)))
        if not await res.namespaces.exists(ns):
            await res.namespaces.put(ns, {})
    remotes = sorted(set(await res.clusters.names()) - {cluster})
    if remotes and not broker.config.broker_deduplication_enabled:
        log.warning("brokerDeduplicationEnabled=false with other clusters registered (%s): geo-replicated copies "
                    "are deduplicated only where a namespace or topic turns deduplication on, so a crash of this "
                    "cluster may store a replicator's resend twice", ", ".join(remotes))
    broker.retention.start()
    broker.policies.start()
    broker.offload.start()
    broker.replication.start()
    broker.replicated_subscriptions.start()
    broker.inactive_topics.start()
    if broker.compaction is not None:
        broker.compaction.start()


async def stop_broker(broker: Broker) -> None:
    """Stop loading topics and the periodic services, then close every loaded topic."""
    broker.registry.shutting_down = True
    await broker.inactive_topics.stop()
    await broker.retention.stop()
    await broker.policies.stop()
    await broker.offload.stop()
    await broker.replicated_subscriptions.close()
    await broker.replication.close()
    if broker.compaction is not None:
        await broker.compaction.stop()
    await broker.registry.close_all()
    await broker.resources.close()
