"""Batch and streaming readers: Spark's planning calls on the driver, ``read()`` on executors.

The driver-side objects plan offset ranges (``planning``); each ``RangePartition`` carries a
``ScanRange`` and the connection settings, because the reader object that runs ``read()`` on an
executor is not the one that planned. Streaming keeps one driver-side state per query: the
Trigger.AvailableNow target, and the durable subscription (only with ``subscriptionName``), moved to
where the last committed micro-batch ended. Knows Spark's data source classes and ``magnetar.client``; no
protocol.

When the subscription moves: Spark calls ``commit(end)`` only while planning the batch after next
(``constructNextBatch``), so a subscription moved there lags one micro-batch, and never sees the last batch of
an ``availableNow`` run. ``latestOffset(start, ...)`` is asked at every trigger, and its ``start`` is the end
of the last batch Spark has committed (a batch that did not commit is run again from its logged offsets before
any new ``latestOffset``); it is also asked once more after an ``availableNow`` run's last batch, to find there
is nothing left. So the subscription moves to ``start`` there, with an ack receipt (persisted before planning
goes on), and only when ``start`` is past where it stands.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxBytes,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from magnetar.client import Client, Consumer, MessageId, MultiTopicConsumer
from magnetar.spark import runtime
from magnetar.spark.direct import LedgerTask, plan_direct, scan_task
from magnetar.spark.discovery import last_ids, list_partitions
from magnetar.spark.offsets import BEFORE_FIRST, after, from_source_offset, to_source_offset
from magnetar.spark.options import OptionError, SourceOptions
from magnetar.spark.planning import admit, partition_of, plan_batch, resolve_starts
from magnetar.spark.scan import ScanRange, drive, iter_batches

__all__ = ["PulsarBatchReader", "PulsarStreamReader", "RangePartition"]

log = logging.getLogger(__name__)


class RangePartition(InputPartition):
    """One Spark task: a range of one topic partition (or, reading from storage, of one of its ledgers) and
    how to reach the broker."""

    def __init__(self, rng: ScanRange | LedgerTask, opts: SourceOptions) -> None:
        super().__init__(rng)
        self.rng = rng
        self.opts = opts


def _read(partition: InputPartition) -> Iterator[pa.RecordBatch]:
    if not isinstance(partition, RangePartition):  # Spark plans one empty partition when we plan none
        return
    o = partition.opts
    if isinstance(partition.rng, LedgerTask):
        def client() -> Client:  # for what the broker must decide, made when first needed
            return runtime.client_for(o.service_url, o.client_options)

        yield from drive(scan_task(partition.rng, client, fail_on_data_loss=o.fail_on_data_loss,
                                   timeout_ms=o.poll_timeout_ms, admin_url=o.admin_url), partition.rng.ranges[0].rng)
        return
    yield from iter_batches(partition.rng, service_url=o.service_url, client_options=o.client_options,
                            fail_on_data_loss=o.fail_on_data_loss, timeout_ms=o.poll_timeout_ms,
                            admin_url=o.admin_url)


def _client(opts: SourceOptions) -> Client:
    return runtime.client_for(opts.service_url, opts.client_options)


class PulsarBatchReader(DataSourceReader):
    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts

    def partitions(self) -> Sequence[InputPartition]:
        ranges: list[ScanRange | LedgerTask] = list(runtime.run(plan_batch(_client(self.opts), self.opts)))
        if self.opts.read_from == "storage":
            ranges = runtime.run(plan_direct([r for r in ranges if isinstance(r, ScanRange)], self.opts))
        return [RangePartition(rng, self.opts) for rng in ranges]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(partition)


class PulsarStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, opts: SourceOptions) -> None:
        if opts.starting_time_ms is not None:
            raise OptionError("startingTime is for batch reads; give startingOffsets to a stream")
        self.opts = opts
        self._target: dict[str, MessageId] | None = None
        self._subscriptions: dict[str, Consumer | MultiTopicConsumer] = {}
        self._moved: dict[str, MessageId] = {}  # where each partition's subscription stands, as acked

    # ---------------------------------------------------------------- offsets

    def initialOffset(self) -> dict[str, Any]:
        async def go() -> dict[str, MessageId]:
            client = _client(self.opts)
            topics = await list_partitions(client, self.opts.topics)
            return await resolve_starts(client, self.opts, topics, await last_ids(client, topics))

        return to_source_offset(runtime.run(go()))

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.max_records_per_trigger:
            return ReadMaxRows(self.opts.max_records_per_trigger)
        if self.opts.max_bytes_per_trigger:
            return ReadMaxBytes(self.opts.max_bytes_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        async def go() -> dict[str, MessageId]:
            client = _client(self.opts)
            return await last_ids(client, await list_partitions(client, self.opts.topics))

        self._target = runtime.run(go())

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        starts = from_source_offset(start)
        if self.opts.subscription_name:  # ``start`` ends the last committed batch (the module's docstring)
            runtime.run(self._move_subscription(dict(starts)))
        ends = runtime.run(self._latest(starts, limit))
        return to_source_offset(ends)

    async def _latest(self, starts: dict[str, MessageId], limit: ReadLimit) -> dict[str, MessageId]:
        client = _client(self.opts)
        topics = await list_partitions(client, self.opts.topics)
        for topic in topics:  # a partition or topic found now is read from its beginning
            starts.setdefault(topic, BEFORE_FIRST)
        lasts = await last_ids(client, topics)
        for topic, start in starts.items():
            last = lasts.get(topic, start)
            if self._target is not None:
                cap = self._target.get(topic, start)
                last = cap if after(last, cap) else last
            lasts[topic] = last if last.entry_id >= 0 and after(last, start) else start
        if isinstance(limit, ReadAllAvailable):
            return lasts
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        max_bytes = limit.max_bytes if isinstance(limit, ReadMaxBytes) else self.opts.max_bytes_per_trigger
        return await admit(client, starts, lasts, max_rows, max_bytes)

    def reportLatestOffset(self) -> dict[str, Any] | None:
        return None

    # ---------------------------------------------------------------- planning and reading

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        starts, ends = from_source_offset(start), from_source_offset(end)
        out = []
        for topic in sorted(ends):
            first = starts.get(topic, BEFORE_FIRST)
            if ends[topic].entry_id >= 0 and after(ends[topic], first):
                out.append(RangePartition(ScanRange(topic, partition_of(topic), first, ends[topic]), self.opts))
        return out

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(partition)

    # ---------------------------------------------------------------- the optional durable subscription

    def commit(self, end: dict[str, Any]) -> None:
        if self.opts.subscription_name:  # already there in all but the first batch after a restart
            runtime.run(self._move_subscription(from_source_offset(end)))

    async def _move_subscription(self, ends: dict[str, MessageId]) -> None:
        """Acknowledge cumulatively up to each partition's end, so retention holds what is unread; each ack
        persisted before this returns."""
        assert self.opts.subscription_name is not None
        for topic, mid in sorted(ends.items()):
            if mid.entry_id < 0 or (topic in self._moved and not after(mid, self._moved[topic])):
                continue
            if topic not in self._subscriptions:
                self._subscriptions[topic] = await _client(self.opts).subscribe(
                    topic, self.opts.subscription_name, subscription_type="failover",
                    initial_position="earliest", receiver_queue_size=1,
                )
            await self._subscriptions[topic].acknowledge_cumulative(mid, receipt=True)
            self._moved[topic] = mid

    def stop(self) -> None:
        async def close_all() -> None:
            for consumer in self._subscriptions.values():
                await consumer.close()
            self._subscriptions.clear()

        runtime.run(close_all(), 60.0)
