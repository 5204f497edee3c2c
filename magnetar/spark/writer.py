"""Batch and streaming sinks: every task sends its rows and waits for every receipt.

Rows arrive as Arrow record batches; ``value`` is required, ``key``, ``topic`` (when no ``topic``
option), ``eventTime`` and ``properties`` are optional. Producers are cached per worker process
(``runtime.process_cache``) and keyed by broker and topic; a producer that failed is dropped from the
cache. Sends are pipelined within a bounded window; any row whose send fails fails the task, so Spark
retries it (at-least-once: duplicates are possible, loss is not). With ``deliveryGuarantee=exactly_once``
(the default when the broker has transactions) the same sends run inside one transaction per task and
``exactly_once`` commits them from the driver. Knows Spark's writer classes and ``magnetar.client``.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Final

import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import BinaryType, MapType, StringType, StructType, TimestampNTZType, TimestampType

from magnetar.client import PartitionedProducer, Producer, Transaction
from magnetar.spark import exactly_once, runtime
from magnetar.spark.options import AT_LEAST_ONCE, EXACTLY_ONCE, OptionError, SinkOptions

__all__ = ["PulsarBatchWriter", "PulsarStreamWriter", "SinkCommit", "check_sink_schema", "resolve_guarantee",
           "write_batches"]

_WINDOW_MAX: Final = 10_000


@dataclass
class SinkCommit(WriterCommitMessage):
    rows: int


def check_sink_schema(schema: StructType, opts: SinkOptions) -> None:
    fields = {f.name: f.dataType for f in schema.fields}
    allowed: dict[str, tuple[type, ...]] = {
        "value": (BinaryType, StringType), "key": (BinaryType, StringType), "topic": (StringType,),
        "eventTime": (TimestampType, TimestampNTZType), "properties": (MapType,),
    }
    if "value" not in fields:
        raise OptionError(f"the pulsar sink needs a value column (binary or string); columns: {sorted(fields)}")
    if opts.topic is None and "topic" not in fields:
        raise OptionError("the pulsar sink needs option topic or a topic column")
    for name, kinds in allowed.items():
        if name in fields and not isinstance(fields[name], kinds):
            raise OptionError(f"sink column {name} has type {fields[name].simpleString()}, "
                              f"expected {' or '.join(k.__name__ for k in kinds)}")


def _as_bytes(value: Any) -> bytes:
    return value.encode() if isinstance(value, str) else bytes(value)


def _as_key(value: Any) -> str | None:
    if value is None:
        return None
    return value if isinstance(value, str) else bytes(value).decode("utf-8")


def _event_ms(value: datetime | None) -> int:
    return 0 if value is None else int(value.timestamp() * 1000)


async def _producer(opts: SinkOptions, topic: str) -> Producer | PartitionedProducer:
    cache = runtime.process_cache()
    key = ("producer", opts.service_url, opts.client_options, topic, opts.batching)
    if key not in cache:
        client = runtime.client_for(opts.service_url, opts.client_options)
        cache[key] = await client.create_producer(
            topic, batching=opts.batching, max_pending_messages=opts.max_pending_messages,
            block_if_queue_full=True,
        )
    producer: Producer | PartitionedProducer = cache[key]
    return producer


def _forget(opts: SinkOptions, topic: str) -> None:
    runtime.process_cache().pop(("producer", opts.service_url, opts.client_options, topic, opts.batching), None)


def _rows(batch: pa.RecordBatch) -> Iterator[dict[str, Any]]:
    names = batch.schema.names
    columns = {n: batch.column(n).to_pylist() for n in ("value", "key", "topic", "eventTime", "properties")
               if n in names}
    for i in range(batch.num_rows):
        yield {n: col[i] for n, col in columns.items()}


def _partitions(producer: Producer | PartitionedProducer) -> int:
    return len(producer.producers) if isinstance(producer, PartitionedProducer) else 1


async def _join(txn: Transaction, producer: Producer | PartitionedProducer, joined: set[str]) -> None:
    """Register every partition of ``producer`` with ``txn`` once (``send_nowait`` needs them registered)."""
    for child in producer.producers if isinstance(producer, PartitionedProducer) else [producer]:
        if child.topic not in joined:
            await txn.register_partition(child.topic)
            joined.add(child.topic)


async def _send_batch(opts: SinkOptions, batch: pa.RecordBatch, pending: deque[tuple[str, Any]],
                      slot: exactly_once.TxnSlot | None, joined: set[str]) -> None:
    for row in _rows(batch):
        topic = opts.topic or row.get("topic")
        if not topic:
            raise OptionError("a row has no topic (null topic column and no topic option)")
        if row["value"] is None:
            raise OptionError(f"a row for {topic} has a null value")
        props = row.get("properties")
        producer = await _producer(opts, topic)
        txn = None
        if slot is not None:
            txn = slot.txn if slot.txn is not None else await slot.get()
            joined_key = f"{topic}\0{_partitions(producer)}"  # one check per row, not one per partition
            if joined_key not in joined:
                await _join(txn, producer, joined)
                joined.add(joined_key)
        try:
            future = producer.send_nowait(
                _as_bytes(row["value"]), key=_as_key(row.get("key")),
                properties=dict(props) if props else None, event_time_ms=_event_ms(row.get("eventTime")),
                txn=txn,
            )
        except Exception:
            _forget(opts, topic)
            raise
        pending.append((topic, future))
        if len(pending) >= min(_WINDOW_MAX, opts.max_pending_messages // 2 or 1):
            await _settle(opts, pending, keep=len(pending) // 2)


async def _settle(opts: SinkOptions, pending: deque[tuple[str, Any]], keep: int = 0) -> None:
    """Wait for the oldest sends until ``keep`` remain; the first failed receipt fails the task."""
    while len(pending) > keep:  # bounded by the window
        topic, future = pending.popleft()
        try:
            await future
        except Exception as exc:
            _forget(opts, topic)
            raise RuntimeError(f"a row sent to {topic} was not stored: {exc}") from exc


def write_batches(opts: SinkOptions, batches: Iterator[pa.RecordBatch],
                  txn: exactly_once.TxnSlot | None = None) -> SinkCommit:
    """Send every row of ``batches`` (inside ``txn`` if given); return only when every row's receipt is in."""
    pending: deque[tuple[str, Any]] = deque()
    joined: set[str] = set()
    rows = 0
    try:
        for batch in batches:  # ends with Spark's iterator
            runtime.run(_send_batch(opts, batch, pending, txn, joined))
            rows += batch.num_rows
        runtime.run(_flush_all(opts, pending))
    finally:
        if pending:
            runtime.run(_abandon(pending), 60.0)
    return SinkCommit(rows)


async def _flush_all(opts: SinkOptions, pending: deque[tuple[str, Any]]) -> None:
    for topic in {t for t, _ in pending}:
        await (await _producer(opts, topic)).flush()
    await _settle(opts, pending)


async def _abandon(pending: deque[tuple[str, Any]]) -> None:
    """After a failure: let the other sends finish or fail quietly (the task is failing anyway)."""
    futures = [f for _, f in pending]
    pending.clear()
    await asyncio.gather(*futures, return_exceptions=True)


def resolve_guarantee(opts: SinkOptions) -> SinkOptions:
    """Driver side: settle ``deliveryGuarantee`` (exactly-once when the broker has transactions, unless told)."""
    if opts.delivery_guarantee == AT_LEAST_ONCE:
        return opts
    client = runtime.client_for(opts.service_url, opts.client_options)
    available = runtime.run(client.transactions_available(), 120.0)
    if opts.delivery_guarantee == EXACTLY_ONCE and not available:
        raise OptionError(f"deliveryGuarantee exactly_once needs broker transactions, and the broker at "
                          f"{opts.service_url} has none (transactionCoordinatorEnabled=false); enable them or "
                          f"use deliveryGuarantee at_least_once")
    return replace(opts, delivery_guarantee=EXACTLY_ONCE if available else AT_LEAST_ONCE)


def _write(opts: SinkOptions, iterator: Iterator[pa.RecordBatch], writer: str | None = None) -> WriterCommitMessage:
    if opts.delivery_guarantee == EXACTLY_ONCE:
        return exactly_once.write_in_txn(opts, iterator, writer)
    return write_batches(opts, iterator)


class PulsarBatchWriter(DataSourceArrowWriter):
    """Exactly-once: the job's output becomes visible in ``commit``, only when every task succeeded."""

    def __init__(self, opts: SinkOptions) -> None:
        self.opts = opts

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return _write(self.opts, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        if self.opts.delivery_guarantee == EXACTLY_ONCE:
            exactly_once.commit_batch(self.opts, messages)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        if self.opts.delivery_guarantee == EXACTLY_ONCE:
            exactly_once.abort_txns(self.opts, messages, None)


class PulsarStreamWriter(DataSourceStreamArrowWriter):
    """At-least-once: tasks wait for every receipt, so commit has nothing left to do. Exactly-once: see
    ``exactly_once`` (each txn recorded under the checkpoint, an intent, then commit of every task's txn).
    Spark builds one writer per micro-batch and ships it to that batch's tasks: ``writer_id`` tells the
    transactions of one batch's tasks from those of earlier batches and runs."""

    def __init__(self, opts: SinkOptions) -> None:
        self.opts = opts
        self.writer_id = uuid.uuid4().hex
        if opts.delivery_guarantee == EXACTLY_ONCE:
            exactly_once.prepare_stream(opts)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return _write(self.opts, iterator, self.writer_id)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        if self.opts.delivery_guarantee == EXACTLY_ONCE:
            exactly_once.commit_stream(self.opts, messages, batchId)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        if self.opts.delivery_guarantee == EXACTLY_ONCE:
            exactly_once.abort_txns(self.opts, messages, batchId)
