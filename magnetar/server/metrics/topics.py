"""Prometheus metrics with Pulsar's names and labels, collected from the broker at scrape time.

Names follow Pulsar's ``/metrics`` so existing dashboards work: per topic ``pulsar_in_messages_total``,
``pulsar_rate_in``, ``pulsar_storage_size``, ``pulsar_msg_backlog``...; labels ``cluster``, ``namespace``,
``topic``, plus ``subscription`` for ``pulsar_subscription_*``, ``producer_name``/``producer_id`` and
``consumer_name``/``consumer_id`` for the per-client ones. Rates are measured between scrapes.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from magnetar.broker.admin.stats import RateTracker
from magnetar.broker.compaction import compacted_of, metric_values
from magnetar.broker.compaction.service import METRICS as COMPACTION_METRICS
from magnetar.broker.parts import Broker
from magnetar.broker.policies.service import topic_backlog_bytes
from magnetar.broker.subscription.subscription import Subscription
from magnetar.broker.topic.persistent import PersistentTopic
from magnetar.server.metrics.broker import add_non_persistent

TOPIC_LABELS = ["cluster", "namespace", "topic"]
SUB_LABELS = [*TOPIC_LABELS, "subscription"]
PRODUCER_LABELS = [*TOPIC_LABELS, "producer_name", "producer_id"]
CONSUMER_LABELS = [*SUB_LABELS, "consumer_name", "consumer_id"]

TOPIC_GAUGES = {
    "pulsar_subscriptions_count": "Subscriptions of the topic",
    "pulsar_producers_count": "Producers connected to the topic",
    "pulsar_consumers_count": "Consumers connected to the topic",
    "pulsar_rate_in": "Messages per second published to the topic",
    "pulsar_rate_out": "Messages per second delivered from the topic",
    "pulsar_throughput_in": "Bytes per second published to the topic",
    "pulsar_throughput_out": "Bytes per second delivered from the topic",
    "pulsar_storage_size": "Bytes stored for the topic",
    "pulsar_storage_backlog_size": "Bytes of the slowest durable subscription's backlog (estimated)",
    "pulsar_storage_write_rate": "Entries (message batches) written per second",
    "pulsar_storage_read_rate": "Messages read from storage and dispatched per second",
    "pulsar_msg_backlog": "Entries not yet acknowledged, summed over subscriptions",
    "pulsar_storage_logical_size": "Bytes stored for the topic, before replication",
    "pulsar_storage_offloaded_size": "Bytes of the topic in the offload store (tiered storage)",
}
TOPIC_COUNTERS = {
    "pulsar_in_messages": "Messages published to the topic",
    "pulsar_in_bytes": "Bytes published to the topic",
    "pulsar_out_messages": "Messages delivered from the topic",
    "pulsar_out_bytes": "Bytes delivered from the topic",
    "magnetar_storage_corrupted_entries": "Stored entries of the topic found failing their checksum",
    "brk_ledgeroffloader_read_offload_error": "Reads of the topic's offloaded ledgers the offload store failed",
}
SUB_GAUGES = {
    "pulsar_subscription_back_log": "Entries not yet acknowledged by the subscription",
    "pulsar_subscription_back_log_no_delayed": "Backlog without delayed messages",
    "pulsar_subscription_delayed": "Messages delayed for later delivery",
    "pulsar_subscription_unacked_messages": "Messages delivered and not yet acknowledged",
    "pulsar_subscription_blocked_on_unacked_messages": "1 if dispatch is blocked on unacked messages",
    "pulsar_subscription_msg_rate_out": "Messages per second delivered",
    "pulsar_subscription_msg_throughput_out": "Bytes per second delivered",
    "pulsar_subscription_msg_rate_redeliver": "Messages per second redelivered",
    "pulsar_subscription_consumers_count": "Consumers of the subscription",
    "pulsar_subscription_msg_ack_rate": "Message ids acknowledged per second",
}


class BrokerCollector(Collector):
    def __init__(self, broker: Broker, rates: RateTracker) -> None:
        self._broker = broker
        self._rates = rates

    def collect(self) -> Iterator[Metric]:
        cluster = self._broker.config.cluster_name
        g = {n: GaugeMetricFamily(n, doc, labels=TOPIC_LABELS) for n, doc in TOPIC_GAUGES.items()}
        c = {n: CounterMetricFamily(n, doc, labels=TOPIC_LABELS) for n, doc in TOPIC_COUNTERS.items()}
        sg = {n: GaugeMetricFamily(n, doc, labels=SUB_LABELS) for n, doc in SUB_GAUGES.items()}
        clients = {
            "pulsar_producer_msg_rate_in": GaugeMetricFamily(
                "pulsar_producer_msg_rate_in", "Messages per second from the producer", labels=PRODUCER_LABELS),
            "pulsar_producer_msg_throughput_in": GaugeMetricFamily(
                "pulsar_producer_msg_throughput_in", "Bytes per second from the producer", labels=PRODUCER_LABELS),
            "pulsar_consumer_msg_rate_out": GaugeMetricFamily(
                "pulsar_consumer_msg_rate_out", "Messages per second to the consumer", labels=CONSUMER_LABELS),
            "pulsar_consumer_available_permits": GaugeMetricFamily(
                "pulsar_consumer_available_permits", "Permits the consumer granted", labels=CONSUMER_LABELS),
            "pulsar_consumer_unacked_messages": GaugeMetricFamily(
                "pulsar_consumer_unacked_messages", "Messages the consumer holds unacked", labels=CONSUMER_LABELS),
        }
        topics_count: dict[str, int] = {}
        compaction = {n: GaugeMetricFamily(n, doc, labels=TOPIC_LABELS) for n, doc in COMPACTION_METRICS.items()}
        for topic in list(self._broker.registry.topics()):
            ns = str(topic.name.namespace_name)
            topics_count[ns] = topics_count.get(ns, 0) + 1
            self._topic(topic, [cluster, ns, str(topic.name)], g, c, sg, clients)
            compacted = compacted_of(topic.compacted)
            if compacted is not None and compacted.record.status != "NOT_RUN":
                for name, value in metric_values(compacted.record).items():
                    compaction[name].add_metric([cluster, ns, str(topic.name)], value)
        add_non_persistent(self._broker, self._rates, cluster, g, c)
        count = GaugeMetricFamily("pulsar_topics_count", "Loaded topics", labels=["cluster", "namespace"])
        for ns, n in sorted(topics_count.items()):
            count.add_metric([cluster, ns], n)
        yield count
        yield from g.values()
        yield from c.values()
        yield from sg.values()
        yield from clients.values()
        yield from compaction.values()

    def _topic(
        self,
        topic: PersistentTopic,
        labels: list[str],
        g: dict[str, GaugeMetricFamily],
        c: dict[str, CounterMetricFamily],
        sg: dict[str, GaugeMetricFamily],
        clients: dict[str, GaugeMetricFamily],
    ) -> None:
        key = labels[2]
        subs = list(topic.subscriptions.values())
        consumers = [x for s in subs for x in s.consumers]
        out_msgs = sum(s.msg_out_counter for s in subs) + sum(x.msg_out_counter for x in consumers)
        out_bytes = sum(s.bytes_out_counter for s in subs) + sum(x.bytes_out_counter for x in consumers)
        stored = topic.ledger.total_size_bytes()
        values = {
            "pulsar_subscriptions_count": len(subs),
            "pulsar_producers_count": len(topic.producers),
            "pulsar_consumers_count": len(consumers),
            "pulsar_rate_in": self._rates.rate(key + "|in", topic.msg_in_counter),
            "pulsar_rate_out": self._rates.rate(key + "|out", out_msgs),
            "pulsar_throughput_in": self._rates.rate(key + "|in|bytes", topic.bytes_in_counter),
            "pulsar_throughput_out": self._rates.rate(key + "|out|bytes", out_bytes),
            "pulsar_storage_size": stored,
            "pulsar_storage_backlog_size": topic_backlog_bytes(topic),
            "pulsar_storage_write_rate": self._rates.rate(key + "|written", topic.ledger.entries_added),
            "pulsar_storage_read_rate": self._rates.rate(key + "|out", out_msgs),
            "pulsar_msg_backlog": sum(s.backlog() for s in subs),
            "pulsar_storage_logical_size": stored,
            "pulsar_storage_offloaded_size": sum(x.size_bytes for x in topic.ledger.ledgers() if x.offloaded),
        }
        for name, value in values.items():
            g[name].add_metric(labels, value)
        self._buckets(topic, labels, g)
        c["pulsar_in_messages"].add_metric(labels, topic.msg_in_counter)
        c["pulsar_in_bytes"].add_metric(labels, topic.bytes_in_counter)
        c["pulsar_out_messages"].add_metric(labels, out_msgs)
        c["pulsar_out_bytes"].add_metric(labels, out_bytes)
        c["magnetar_storage_corrupted_entries"].add_metric(labels, topic.ledger.corrupted_entries)
        c["brk_ledgeroffloader_read_offload_error"].add_metric(labels, topic.ledger.offload_reads.errors)
        for p in list(topic.producers.values()):
            plabels = [*labels, p.name, str(p.producer_id)]
            pkey = f"{key}|p|{p.name}|{p.producer_id}"
            clients["pulsar_producer_msg_rate_in"].add_metric(plabels, self._rates.rate(pkey, p.msg_in_counter))
            clients["pulsar_producer_msg_throughput_in"].add_metric(
                plabels, self._rates.rate(pkey + "|bytes", p.bytes_in_counter))
        for sub in subs:
            self._subscription(sub, [*labels, sub.name], sg, clients)

    @staticmethod
    def _buckets(topic: PersistentTopic, labels: list[str], g: dict[str, GaugeMetricFamily]) -> None:
        for prefix, buckets in (("pulsar_storage_write_latency", topic.write_latency_ms),
                                ("pulsar_entry_size", topic.entry_size_bytes)):
            for suffix, count in buckets.labelled():
                name = f"{prefix}_{suffix}"
                if name not in g:
                    g[name] = GaugeMetricFamily(name, f"{prefix} entries in bucket {suffix}", labels=TOPIC_LABELS)
                g[name].add_metric(labels, count)
            for suffix, value in (("count", float(buckets.count)), ("sum", buckets.total)):
                name = f"{prefix}_{suffix}"
                if name not in g:
                    g[name] = GaugeMetricFamily(name, f"{prefix} {suffix}", labels=TOPIC_LABELS)
                g[name].add_metric(labels, value)

    def _subscription(
        self,
        sub: Subscription,
        labels: list[str],
        sg: dict[str, GaugeMetricFamily],
        clients: dict[str, GaugeMetricFamily],
    ) -> None:
        key = "|".join(labels)
        consumers = sub.consumers
        msg_out = sub.msg_out_counter + sum(x.msg_out_counter for x in consumers)
        bytes_out = sub.bytes_out_counter + sum(x.bytes_out_counter for x in consumers)
        backlog = sub.backlog()
        values = {
            "pulsar_subscription_back_log": backlog,
            "pulsar_subscription_back_log_no_delayed": backlog,
            "pulsar_subscription_delayed": 0,
            "pulsar_subscription_unacked_messages": sum(x.unacked_messages for x in consumers),
            "pulsar_subscription_blocked_on_unacked_messages": 0,
            "pulsar_subscription_msg_rate_out": self._rates.rate(key + "|out", msg_out),
            "pulsar_subscription_msg_throughput_out": self._rates.rate(key + "|out|bytes", bytes_out),
            "pulsar_subscription_msg_rate_redeliver": 0.0,
            "pulsar_subscription_consumers_count": len(consumers),
            "pulsar_subscription_msg_ack_rate": self._rates.rate(key + "|ack", sub.acked_counter),
        }
        for name, value in values.items():
            sg[name].add_metric(labels, value)
        for x in consumers:
            clabels = [*labels, x.name, str(x.consumer_id)]
            ckey = f"{key}|c|{x.consumer_id}"
            clients["pulsar_consumer_msg_rate_out"].add_metric(clabels, self._rates.rate(ckey, x.msg_out_counter))
            clients["pulsar_consumer_available_permits"].add_metric(clabels, x.permits)
            clients["pulsar_consumer_unacked_messages"].add_metric(clabels, x.unacked_messages)
