"""Transaction-buffer and pending-ack metrics with Pulsar's names, per topic and per subscription:
``pulsar_txn_tb_active_total`` (open transactions), ``pulsar_txn_tb_committed_total`` and
``pulsar_txn_tb_aborted_total`` (transactions ended on the topic), ``pulsar_txn_tp_committed_count_total``
and ``pulsar_txn_tp_aborted_count_total`` (transactions ended on a subscription's pending acks); PIP-178
snapshots: ``pulsar_txn_tb_snapshot_index_total`` (keys of the last snapshot, -end included; 1 for a single
record), ``pulsar_txn_tb_snapshot_aborted_txn_ids`` and ``pulsar_txn_tb_snapshot_segment_op_total`` (keyed
writes, tombstones and reads of the snapshot topic by ``op`` and ``status``). Only topics
that have seen a transaction are listed, so idle topics cost nothing at scrape time.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from magnetar.broker.parts import Broker
from magnetar.broker.transactions.buffer import TransactionBuffer
from magnetar.broker.transactions.listener import transactions_of

TOPIC_LABELS = ["cluster", "namespace", "topic"]
SUB_LABELS = [*TOPIC_LABELS, "subscription"]


class TxnTopicCollector(Collector):
    def __init__(self, broker: Broker) -> None:
        self._broker = broker

    def collect(self) -> Iterator[Metric]:
        cluster = self._broker.config.cluster_name
        active = GaugeMetricFamily("pulsar_txn_tb_active_total", "Transactions open on the topic",
                                   labels=TOPIC_LABELS)
        committed = CounterMetricFamily("pulsar_txn_tb_committed", "Transactions committed on the topic",
                                        labels=TOPIC_LABELS)
        aborted = CounterMetricFamily("pulsar_txn_tb_aborted", "Transactions aborted on the topic",
                                      labels=TOPIC_LABELS)
        tp_committed = CounterMetricFamily("pulsar_txn_tp_committed_count",
                                           "Transactions committed on the subscription's pending acks",
                                           labels=SUB_LABELS)
        tp_aborted = CounterMetricFamily("pulsar_txn_tp_aborted_count",
                                         "Transactions aborted on the subscription's pending acks",
                                         labels=SUB_LABELS)
        snap = self._snapshot_metrics()
        for topic in list(self._broker.registry.topics()):
            txn = transactions_of(topic.txn)
            if txn is None:
                continue
            tb = txn.buffer
            ongoing = len(tb.ongoing())
            if not (ongoing or tb.committed_total or tb.aborted_total or txn.stores):
                continue
            labels = [cluster, str(topic.name.namespace_name), str(topic.name)]
            active.add_metric(labels, ongoing)
            committed.add_metric(labels, tb.committed_total)
            aborted.add_metric(labels, tb.aborted_total)
            for name, store in list(txn.stores.items()):
                tp_committed.add_metric([*labels, name], store.committed_total)
                tp_aborted.add_metric([*labels, name], store.aborted_total)
            self._add_snapshot(snap, labels, tb)
        yield from (active, committed, aborted, tp_committed, tp_aborted, *snap)

    @staticmethod
    def _snapshot_metrics() -> tuple[GaugeMetricFamily, GaugeMetricFamily, CounterMetricFamily]:
        return (
            GaugeMetricFamily("pulsar_txn_tb_snapshot_index_total", "Keys of the topic's last buffer snapshot",
                              labels=TOPIC_LABELS),
            GaugeMetricFamily("pulsar_txn_tb_snapshot_aborted_txn_ids", "Aborted ids in the last buffer snapshot",
                              labels=TOPIC_LABELS),
            CounterMetricFamily("pulsar_txn_tb_snapshot_segment_op", "Snapshot segment operations",
                                labels=[*TOPIC_LABELS, "op", "status"]),
        )

    def _add_snapshot(self, snap: tuple[GaugeMetricFamily, GaugeMetricFamily, CounterMetricFamily],
                      labels: list[str], tb: TransactionBuffer) -> None:
        info = tb.snapshot_info()
        if info is not None:
            snap[0].add_metric(labels, info.segments + 1)
            snap[1].add_metric(labels, info.aborted)
        for (op, status), count in self._broker.txn_snapshots.segmented.ops.get(tb.topic, {}).items():
            snap[2].add_metric([*labels, op, status], count)
