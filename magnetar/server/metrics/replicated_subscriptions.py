"""PIP-33 metrics with Pulsar's names, per broker (label ``cluster``):
``pulsar_replicated_subscriptions_pending_snapshots`` (snapshots in progress now),
``pulsar_replicated_subscriptions_timedout_snapshots`` (snapshots abandoned after the timeout, a counter),
``pulsar_replicated_subscriptions_snapshot_ms`` (time from REQUEST to a persisted SNAPSHOT: count and sum),
and ``pulsar_replicated_subscriptions_marker_entries`` (marker entries this broker wrote, a counter).
The counters are exposed as plain samples (no ``_total`` suffix) so the names are exactly Pulsar's.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily, Metric, SummaryMetricFamily
from prometheus_client.registry import Collector

from magnetar.broker.parts import Broker


class ReplicatedSubscriptionsCollector(Collector):
    def __init__(self, broker: Broker) -> None:
        self._broker = broker

    def collect(self) -> Iterator[Metric]:
        labels = [self._broker.config.cluster_name]
        service = self._broker.replicated_subscriptions
        totals = service.totals
        pending = GaugeMetricFamily("pulsar_replicated_subscriptions_pending_snapshots",
                                    "Replicated-subscription snapshots in progress", labels=["cluster"])
        pending.add_metric(labels, float(service.pending_snapshots()))
        timedout = GaugeMetricFamily("pulsar_replicated_subscriptions_timedout_snapshots",
                                       "Snapshots abandoned because a cluster did not answer in time",
                                       labels=["cluster"])
        timedout.add_metric(labels, float(totals.timedout))
        took = SummaryMetricFamily("pulsar_replicated_subscriptions_snapshot_ms",
                                   "Milliseconds from a snapshot's request to its persisted snapshot marker",
                                   labels=["cluster"])
        took.add_metric(labels, count_value=totals.completed, sum_value=totals.snapshot_ms_sum)
        written = GaugeMetricFamily("pulsar_replicated_subscriptions_marker_entries",
                                      "Marker entries written for replicated subscriptions", labels=["cluster"])
        written.add_metric(labels, float(totals.markers_written))
        yield from (pending, timedout, took, written)
