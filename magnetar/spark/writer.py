"""Batch and streaming sinks: every task sends its rows and waits for every receipt (``sender``).

Rows arrive as Arrow record batches; ``value`` is required, ``key``, ``topic`` (when no ``topic``
option), ``eventTime`` and ``properties`` are optional. Any row whose send fails fails the task, so Spark
retries it (at-least-once: duplicates are possible, loss is not). With ``deliveryGuarantee=exactly_once``
(the default when the broker has transactions) the same sends run inside one transaction per task and
``exactly_once`` commits them from the driver. Knows Spark's writer classes and ``magnetar.client``.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import replace

import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import BinaryType, MapType, StringType, StructType, TimestampNTZType, TimestampType

from magnetar.spark import exactly_once, runtime
from magnetar.spark.options import AT_LEAST_ONCE, EXACTLY_ONCE, OptionError, SinkOptions
from magnetar.spark.sender import SinkCommit, write_batches

__all__ = ["PulsarBatchWriter", "PulsarStreamWriter", "SinkCommit", "check_sink_schema", "resolve_guarantee",
           "write_batches"]


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
