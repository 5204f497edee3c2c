"""The Prometheus registry ``/metrics`` serves: every area's collector, built once per web app."""

from __future__ import annotations

from prometheus_client import ProcessCollector
from prometheus_client.registry import CollectorRegistry

from magnetar.broker.admin.stats import RateTracker
from magnetar.broker.parts import Broker
from magnetar.server.metrics.broker import ConnectionAndLedgerCollector, NamespaceLevel
from magnetar.server.metrics.deletion import DeletionCollector
from magnetar.server.metrics.replicated_subscriptions import ReplicatedSubscriptionsCollector
from magnetar.server.metrics.replication import ReplicationCollector
from magnetar.server.metrics.topics import BrokerCollector
from magnetar.server.metrics.txn import CoordinatorCollector
from magnetar.server.metrics.txn_log import BufferedWriterCollector
from magnetar.server.metrics.txn_topic import TxnTopicCollector


def broker_registry(broker: Broker, rates: RateTracker) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    topics = BrokerCollector(broker, rates)
    registry.register(topics if broker.config.expose_topic_level_metrics else NamespaceLevel(topics))
    registry.register(ProcessCollector(registry=None))
    registry.register(ConnectionAndLedgerCollector(broker, rates))
    registry.register(BufferedWriterCollector(broker.txn_log_batching, broker.config.cluster_name))
    registry.register(CoordinatorCollector(broker))
    registry.register(TxnTopicCollector(broker))
    registry.register(DeletionCollector(broker))
    registry.register(ReplicationCollector(broker, rates))
    registry.register(ReplicatedSubscriptionsCollector(broker))
    return registry
