"""Broker-wide metrics: connections (``pulsar_active_connections``, ``pulsar_connection_*``), managed
ledgers per namespace (``pulsar_ml_*``, Pulsar's names), and the namespace-level view of the topic metrics
that ``exposeTopicLevelMetricsInPrometheus=false`` asks for (topic, subscription and client labels dropped,
values summed per cluster and namespace)."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from magnetar.broker.admin.stats import RateTracker
from magnetar.broker.parts import Broker
from magnetar.broker.policies.service import topic_backlog_bytes

NS_LABELS = ["cluster", "namespace"]
ML_GAUGES = {
    "pulsar_ml_AddEntryMessagesRate": "Entries added per second",
    "pulsar_ml_AddEntryBytesRate": "Bytes added per second",
    "pulsar_ml_ReadEntriesRate": "Messages read per second",
    "pulsar_ml_MarkDeleteRate": "Acknowledgements per second",
    "pulsar_ml_StoredMessagesSize": "Bytes stored",
    "pulsar_ml_NumberOfMessagesInBacklog": "Entries in the subscriptions' backlogs",
    "pulsar_ml_BacklogSize": "Bytes of the slowest subscriptions' backlogs (estimated)",
    "pulsar_ml_count": "Managed ledgers open",
}
#: topic-level families that carry no meaning summed over a namespace (per client, per bucket)
_NOT_SUMMED = ("pulsar_producer_", "pulsar_consumer_")


class ConnectionAndLedgerCollector(Collector):
    def __init__(self, broker: Broker, rates: RateTracker) -> None:
        self._broker = broker
        self._rates = rates

    def collect(self) -> Iterator[Metric]:
        cluster = self._broker.config.cluster_name
        counts = self._broker.connections
        active = GaugeMetricFamily("pulsar_active_connections", "Client connections open", labels=["cluster"])
        active.add_metric([cluster], counts.active)
        yield active
        for name, doc, value in (
            ("pulsar_connection_created_total_count", "Connections accepted", counts.created),
            ("pulsar_connection_create_success_count", "Connections served", counts.created),
            ("pulsar_connection_create_fail_count", "Connections refused", counts.refused),
            ("pulsar_connection_closed_total_count", "Connections closed", counts.closed),
        ):
            family = GaugeMetricFamily(name, doc, labels=["cluster"])
            family.add_metric([cluster], value)
            yield family
        yield from self._ledgers(cluster)

    def _ledgers(self, cluster: str) -> Iterator[Metric]:
        totals: dict[str, dict[str, float]] = {}
        for topic in list(self._broker.registry.topics()):
            ns = str(topic.name.namespace_name)
            t = totals.setdefault(ns, dict.fromkeys(ML_GAUGES, 0.0))
            key, ledger, subs = str(topic.name), topic.ledger, list(topic.subscriptions.values())
            out = sum(s.msg_out_counter + sum(c.msg_out_counter for c in s.consumers) for s in subs)
            t["pulsar_ml_AddEntryMessagesRate"] += self._rates.rate(key + "|ml|add", ledger.entries_added)
            t["pulsar_ml_AddEntryBytesRate"] += self._rates.rate(key + "|ml|bytes", topic.bytes_in_counter)
            t["pulsar_ml_ReadEntriesRate"] += self._rates.rate(key + "|ml|read", out)
            t["pulsar_ml_MarkDeleteRate"] += self._rates.rate(key + "|ml|acks", sum(s.acked_counter for s in subs))
            t["pulsar_ml_StoredMessagesSize"] += ledger.total_size_bytes()
            t["pulsar_ml_NumberOfMessagesInBacklog"] += sum(s.backlog() for s in subs)
            t["pulsar_ml_BacklogSize"] += topic_backlog_bytes(topic)
            t["pulsar_ml_count"] += 1
        for name, doc in ML_GAUGES.items():
            family = GaugeMetricFamily(name, doc, labels=NS_LABELS)
            for ns, values in sorted(totals.items()):
                family.add_metric([cluster, ns], values[name])
            yield family


class NamespaceLevel(Collector):
    """The topic collector's families summed per (cluster, namespace)."""

    def __init__(self, inner: Collector) -> None:
        self._inner = inner

    def collect(self) -> Iterator[Metric]:
        for family in self._inner.collect():
            if family.name.startswith(_NOT_SUMMED) or not any("topic" in s.labels for s in family.samples):
                if not family.name.startswith(_NOT_SUMMED):
                    yield family
                continue
            summed: dict[tuple[str, str, str], float] = {}
            for sample in family.samples:
                where = (sample.name, sample.labels.get("cluster", ""), sample.labels.get("namespace", ""))
                summed[where] = summed.get(where, 0.0) + sample.value
            kind = CounterMetricFamily if family.type == "counter" else GaugeMetricFamily
            out = kind(family.name, family.documentation, labels=NS_LABELS)
            for (sample_name, cluster, ns), value in sorted(summed.items()):
                out.samples.append(type(family.samples[0])(sample_name, {"cluster": cluster, "namespace": ns},
                                                           value, None, None))
            yield out


def add_non_persistent(broker: Broker, rates: RateTracker, cluster: str,
                       gauges: dict[str, GaugeMetricFamily], counters: dict[str, CounterMetricFamily]) -> int:
    """Non-persistent topics in the per-topic families (nothing stored: no storage or backlog values).
    Returns how many were added."""
    topics = list(broker.non_persistent.topics.values())
    for topic in topics:
        name = str(topic.name)
        labels = [cluster, str(topic.name.namespace_name), name]
        subs = list(topic.subscriptions.values())
        out_msgs, out_bytes = sum(s.msg_out_counter for s in subs), sum(s.bytes_out_counter for s in subs)
        for family, value in (
            ("pulsar_subscriptions_count", len(subs)),
            ("pulsar_producers_count", len(topic.producers)),
            ("pulsar_consumers_count", sum(len(s.consumers) for s in subs)),
            ("pulsar_rate_in", rates.rate(name + "|in", topic.msg_in_counter)),
            ("pulsar_rate_out", rates.rate(name + "|out", out_msgs)),
            ("pulsar_throughput_in", rates.rate(name + "|in|bytes", topic.bytes_in_counter)),
            ("pulsar_throughput_out", rates.rate(name + "|out|bytes", out_bytes)),
        ):
            gauges[family].add_metric(labels, value)
        for family, value in (("pulsar_in_messages", topic.msg_in_counter), ("pulsar_in_bytes", topic.bytes_in_counter),
                              ("pulsar_out_messages", out_msgs), ("pulsar_out_bytes", out_bytes)):
            counters[family].add_metric(labels, value)
    return len(topics)
