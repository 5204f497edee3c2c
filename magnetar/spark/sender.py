"""Sending rows to topics from a Spark task: producers cached per worker process (``runtime.process_cache``,
keyed by broker and topic; a producer that failed is dropped), sends pipelined within a bounded window, and
the task's answer only once every receipt is in (any failed send fails the task, so Spark retries it).

Inside a transaction when given one (``TxnSource``: the exactly-once sink's slot opens it on the first row);
this module knows nothing of how the transaction is committed (``exactly_once``) or of Spark's writer
classes (``writer``).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, Protocol

import pyarrow as pa
from pyspark.sql.datasource import WriterCommitMessage

from magnetar.client import PartitionedProducer, Producer, Transaction
from magnetar.spark import runtime
from magnetar.spark.options import OptionError, SinkOptions


class TxnSource(Protocol):
    """The transaction a task's sends go into (opened when first asked; ``txn`` once it is open)."""

    @property
    def txn(self) -> Transaction | None: ...

    async def get(self) -> Transaction: ...


_WINDOW_MAX: Final = 10_000


@dataclass
class SinkCommit(WriterCommitMessage):
    rows: int


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
                      slot: TxnSource | None, joined: set[str]) -> None:
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
                  txn: TxnSource | None = None) -> SinkCommit:
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
