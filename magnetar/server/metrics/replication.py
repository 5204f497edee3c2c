"""Geo-replication metrics with Pulsar's names, per topic and remote cluster (label ``remote_cluster``):
``pulsar_replication_rate_in|out``, ``pulsar_replication_throughput_in|out``, ``pulsar_replication_backlog``,
``pulsar_replication_connected_count``, ``pulsar_replication_rate_expired``,
``pulsar_replication_delay_in_seconds``. Read from the same builder as the stats' ``replication`` section.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from magnetar.broker.admin.stats import RateTracker
from magnetar.broker.parts import Broker
from magnetar.broker.replication.stats import replication_stats

LABELS = ["cluster", "namespace", "topic", "remote_cluster"]
#: metric name -> (ReplicatorStats field, help)
GAUGES = {
    "pulsar_replication_rate_in": ("msgRateIn", "Messages per second replicated in from the remote cluster"),
    "pulsar_replication_rate_out": ("msgRateOut", "Messages per second replicated out to the remote cluster"),
    "pulsar_replication_throughput_in": ("msgThroughputIn", "Bytes per second replicated in"),
    "pulsar_replication_throughput_out": ("msgThroughputOut", "Bytes per second replicated out"),
    "pulsar_replication_backlog": ("replicationBacklog", "Entries not yet replicated to the remote cluster"),
    "pulsar_replication_connected_count": ("connected", "1 when the replicator's producer is connected"),
    "pulsar_replication_rate_expired": ("msgRateExpired", "Messages per second expired before replication"),
    "pulsar_replication_delay_in_seconds": ("replicationDelayInSeconds", "Age of the oldest unreplicated entry"),
}


class ReplicationCollector(Collector):
    def __init__(self, broker: Broker, rates: RateTracker) -> None:
        self._broker = broker
        self._rates = rates

    def collect(self) -> Iterator[Metric]:
        cluster = self._broker.config.cluster_name
        families = {n: GaugeMetricFamily(n, doc, labels=LABELS) for n, (_, doc) in GAUGES.items()}
        for topic in list(self._broker.registry.topics()):
            name = str(topic.name)
            stats = replication_stats(name, topic.replicators.values(), topic.producers.values(), self._rates)
            for remote, values in sorted(stats.items()):
                labels = [cluster, str(topic.name.namespace_name), name, remote]
                for metric, (field, _) in GAUGES.items():
                    families[metric].add_metric(labels, float(values[field]))
        yield from families.values()
