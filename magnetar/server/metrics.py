"""Prometheus metrics with Pulsar's names and labels, collected from the broker at scrape time.

Names follow Pulsar's ``/metrics`` so existing dashboards work: per topic ``pulsar_in_messages_total``,
``pulsar_storage_size``, ``pulsar_msg_backlog``...; labels ``cluster``, ``namespace``, ``topic``.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from magnetar.broker.service import BrokerService

TOPIC_LABELS = ["cluster", "namespace", "topic"]


class BrokerCollector(Collector):
    def __init__(self, broker: BrokerService) -> None:
        self._broker = broker

    def collect(self) -> Iterator[Metric]:
        cluster = self._broker.config.cluster_name
        gauges = {
            "pulsar_subscriptions_count": "Subscriptions of the topic",
            "pulsar_producers_count": "Producers connected to the topic",
            "pulsar_consumers_count": "Consumers connected to the topic",
            "pulsar_storage_size": "Bytes stored for the topic",
            "pulsar_msg_backlog": "Entries not yet acknowledged, summed over subscriptions",
        }
        counters = {
            "pulsar_in_messages": "Messages published to the topic",
            "pulsar_in_bytes": "Bytes published to the topic",
            "pulsar_out_messages": "Messages delivered from the topic",
            "pulsar_out_bytes": "Bytes delivered from the topic",
        }
        g = {name: GaugeMetricFamily(name, doc, labels=TOPIC_LABELS) for name, doc in gauges.items()}
        c = {name: CounterMetricFamily(name, doc, labels=TOPIC_LABELS) for name, doc in counters.items()}
        topics_count: dict[str, int] = {}
        for topic in list(self._broker.topics.values()):
            ns = str(topic.name.namespace_name)
            topics_count[ns] = topics_count.get(ns, 0) + 1
            labels = [cluster, ns, str(topic.name)]
            subs = list(topic.subscriptions.values())
            consumers = [c for s in subs for c in s.consumers]
            g["pulsar_subscriptions_count"].add_metric(labels, len(subs))
            g["pulsar_producers_count"].add_metric(labels, len(topic.producers))
            g["pulsar_consumers_count"].add_metric(labels, len(consumers))
            g["pulsar_storage_size"].add_metric(labels, topic.ledger.total_size_bytes())
            g["pulsar_msg_backlog"].add_metric(labels, sum(s.backlog() for s in subs))
            c["pulsar_in_messages"].add_metric(labels, topic.msg_in_counter)
            c["pulsar_in_bytes"].add_metric(labels, topic.bytes_in_counter)
            out_msgs = sum(s.msg_out_counter for s in subs) + sum(x.msg_out_counter for x in consumers)
            out_bytes = sum(s.bytes_out_counter for s in subs) + sum(x.bytes_out_counter for x in consumers)
            c["pulsar_out_messages"].add_metric(labels, out_msgs)
            c["pulsar_out_bytes"].add_metric(labels, out_bytes)
        count = GaugeMetricFamily("pulsar_topics_count", "Loaded topics", labels=["cluster", "namespace"])
        for ns, n in sorted(topics_count.items()):
            count.add_metric([cluster, ns], n)
        yield count
        yield from g.values()
        yield from c.values()


def broker_registry(broker: BrokerService) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(BrokerCollector(broker))
    return registry
