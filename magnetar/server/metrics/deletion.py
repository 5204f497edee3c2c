"""PIP-186's counters as ``pulsar_ledger_deletion_*`` metrics, read from the deletion service at scrape time
(nothing when ``topicTwoPhaseDeletionEnabled`` is off)."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from magnetar.broker.parts import Broker

PREFIX = "pulsar_ledger_deletion"


class DeletionCollector(Collector):
    def __init__(self, broker: Broker) -> None:
        self._broker = broker

    def collect(self) -> Iterator[Metric]:
        service = self._broker.ledger_deletion
        if service is None:
            return
        cluster = [self._broker.config.cluster_name]
        c = service.counters
        counters = {
            "queued_ledgers": ("Ledgers sent to the deletion topic", c.queued_ledgers),
            "queued_offload_ledgers": ("Offloaded ledgers sent to the deletion topic", c.queued_offload_ledgers),
            "received": ("Deletion messages the service received", c.received),
            "delete_failures": ("Storage deletes that failed", c.delete_failures),
            "offload_delete_failures": ("Offload-store deletes that failed", c.offload_delete_failures),
            "acked": ("Deletion messages acknowledged", c.acked),
        }
        for name, (doc, value) in counters.items():
            family = CounterMetricFamily(f"{PREFIX}_{name}", doc, labels=["cluster"])
            family.add_metric(cluster, value)
            yield family
        outcomes = CounterMetricFamily(f"{PREFIX}_outcomes", "Deletion messages by outcome",
                                       labels=["cluster", "outcome"])
        for outcome, value in c.outcomes.items():
            outcomes.add_metric([*cluster, outcome.value], value)
        yield outcomes
        inflight = GaugeMetricFamily(f"{PREFIX}_inflight", "Estimated in-flight deletions (deletion topics' backlog)",
                                     labels=["cluster"])
        inflight.add_metric(cluster, sum(service.inflight().values()))
        yield inflight
