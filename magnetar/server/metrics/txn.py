"""The transaction coordinators' metrics with Pulsar's names, per ``coordinator_id``: ``pulsar_txn_active_count``
and the counters ``pulsar_txn_{created,committed,aborted,timeout,append_log}_total``, read at scrape time."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from magnetar.broker.parts import Broker
from magnetar.broker.transactions.coordinator import TransactionCoordinator

LABELS = ["cluster", "coordinator_id"]
COUNTERS: dict[str, tuple[str, Callable[[TransactionCoordinator], int]]] = {
    "pulsar_txn_created": ("Transactions opened", lambda tc: tc.counters.created),
    "pulsar_txn_committed": ("Transactions committed", lambda tc: tc.counters.committed),
    "pulsar_txn_aborted": ("Transactions aborted (timeouts included)", lambda tc: tc.counters.aborted),
    "pulsar_txn_timeout": ("Transactions aborted by their timeout", lambda tc: tc.counters.timed_out),
    "pulsar_txn_append_log": ("Records appended to the coordinator's log", lambda tc: tc.log.appended),
}


class CoordinatorCollector(Collector):
    def __init__(self, broker: Broker) -> None:
        self._broker = broker

    def collect(self) -> Iterator[Metric]:
        service = self._broker.txn_coordinators
        if service is None:
            return
        cluster = self._broker.config.cluster_name
        active = GaugeMetricFamily("pulsar_txn_active_count", "Transactions open or ending", labels=LABELS)
        counters = {n: CounterMetricFamily(n, doc, labels=LABELS) for n, (doc, _) in COUNTERS.items()}
        for tc in service.coordinators.values():
            labels = [cluster, str(tc.tc_id)]
            active.add_metric(labels, len(tc.txns))
            for name, (_, read) in COUNTERS.items():
                counters[name].add_metric(labels, read(tc))
        yield active
        yield from counters.values()
