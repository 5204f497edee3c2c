"""PIP-160's buffered-writer metrics with Pulsar's names, for the coordinator log (``pulsar_txn_tc_``) and
the pending-ack logs (``pulsar_txn_pending_ack_store_``): three histograms and the flush-trigger counters
per family (Pulsar's four, and magnetar's ``idle``: a batch sent when the append before it completed), read
from the broker's :class:`BatchedLogSwitch` at scrape time."""

from __future__ import annotations

from collections.abc import Iterator
from itertools import accumulate

from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from magnetar.broker.buckets import Buckets
from magnetar.broker.transactions.batching import BatchedLogSwitch, LogFamily

HISTOGRAMS = (
    ("batch_records", "Records per batched entry"),
    ("batch_size_bytes", "Bytes per batched entry"),
    ("batch_oldest_record_delay_seconds", "How long the oldest record of a batch waited"),
)


def _histogram(name: str, doc: str, buckets: Buckets, cluster: str) -> HistogramMetricFamily:
    family = HistogramMetricFamily(name, doc, labels=["cluster"])
    uppers = [str(upper) for upper, _ in buckets.bounds] + ["+Inf"]
    cumulative = list(accumulate(buckets.counts))
    family.add_metric([cluster], list(zip(uppers, cumulative, strict=True)), buckets.total)
    return family


class BufferedWriterCollector(Collector):
    def __init__(self, switch: BatchedLogSwitch, cluster: str) -> None:
        self._switch = switch
        self._cluster = cluster

    def collect(self) -> Iterator[Metric]:
        for family in LogFamily:
            metrics = self._switch.metrics[family]
            prefix = f"{family.metric_prefix}_bufferedwriter"
            values = (metrics.batch_records, metrics.batch_size_bytes, metrics.oldest_record_delay_s)
            for (suffix, doc), buckets in zip(HISTOGRAMS, values, strict=True):
                yield _histogram(f"{prefix}_{suffix}", doc, buckets, self._cluster)
            for trigger, count in metrics.triggers.items():
                counter = CounterMetricFamily(
                    f"{prefix}_flush_trigger_{trigger.value}", f"Batches flushed by the {trigger.value} rule",
                    labels=["cluster"],
                )
                counter.add_metric([self._cluster], count)
                yield counter
