"""Direct reads (``readFrom=storage``, issue 34) on local Spark: a broker keeps its ledgers in a bucket of a real
``moto_server`` process, small ledgers (many sealed ones per partition); the same batch reads through the broker
and straight from the bucket must return the same rows, columns, ids and order, on topics with batches,
compression, chunked messages and transactions with aborts (their entries are read through the broker), while
the tail of the open ledger still comes from the broker."""

from __future__ import annotations

from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession

from magnetar.client.sync import Client
from magnetar.spark.options import OptionError, parse_source
from tests.integration.broker_process import BrokerProcess
from tests.s3_server import MotoServer
from tests.spark.conftest import PARTITIONS, planned_ledger_ranges, send_kinds, storage_options, topic_name


def _load(spark: SparkSession, broker: BrokerProcess, topic: str, **options: str) -> DataFrame:
    reader = (spark.read.format("pulsar").option("service.url", broker.url).option("admin.url", broker.web_url)
              .option("topic", topic))
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def _rows(df: DataFrame) -> list[tuple[Any, ...]]:
    """Every row as collected (partition by partition, in order), every column."""
    return [(r.key, bytes(r.value), r.topic, r.partition, tuple(r.messageId), r.publishTime, r.eventTime,
             tuple(sorted((r.properties or {}).items()))) for r in df.collect()]


@pytest.mark.parametrize("kinds", ["batches", "chunks-and-transactions"])
def test_storage_reads_equal_broker_reads(spark: SparkSession, s3_broker: BrokerProcess, s3_client: Client,
                                          moto: MotoServer, kinds: str) -> None:
    topic = topic_name(f"direct-{kinds}")
    mixed = kinds != "batches"
    send_kinds(s3_client, topic, chunks=mixed, txns=mixed)
    through_broker = _load(spark, s3_broker, topic)
    from_storage = _load(spark, s3_broker, topic, **storage_options(moto))
    assert planned_ledger_ranges(s3_broker.url, s3_broker.web_url, topic, storage_options(moto)) > 2 * PARTITIONS
    expected = _rows(through_broker)
    got = _rows(from_storage)
    assert len(got) == len(expected)
    assert got == expected
    if mixed:
        values = {row[1] for row in got}
        assert {f"txn-{n}-0".encode() for n in range(8)} & values == {f"txn-{n}-0".encode() for n in (0, 2, 3, 5, 6)}
        assert sum(1 for row in got if row[0] is not None and row[0].startswith(b"c")) == 6  # the chunked ones


def test_storage_reads_respect_offsets_inside_batches(spark: SparkSession, s3_broker: BrokerProcess,
                                                      s3_client: Client, moto: MotoServer) -> None:
    topic = topic_name("direct-bounds")
    send_kinds(s3_client, topic, chunks=False, txns=False)
    everything = _rows(_load(spark, s3_broker, topic))
    in_partition_0 = [row for row in everything if row[3] == 0]
    start, end = in_partition_0[37][4], in_partition_0[-60][4]  # inside batches, ledgers apart
    name = f"{topic}-partition-0"
    bounds = {"startingOffsets": f'{{"{name}": {list(start)}}}', "endingOffsets": f'{{"{name}": {list(end)}}}'}
    expected = [row for row in _rows(_load(spark, s3_broker, topic, **bounds)) if row[3] == 0]
    assert expected == in_partition_0[38:-59]
    got = [row for row in _rows(_load(spark, s3_broker, topic, **bounds, **storage_options(moto))) if row[3] == 0]
    assert got == expected


def test_storage_reads_need_the_store_and_the_admin_url(spark: SparkSession, s3_broker: BrokerProcess) -> None:
    with pytest.raises(Exception, match=r"ledgerStore\.url"):
        _load(spark, s3_broker, topic_name("x"), readFrom="storage").collect()
    with pytest.raises(OptionError, match="readFrom must be one of"):
        parse_source({"service.url": "pulsar://h:6650", "topic": "t", "readFrom": "bookies"}, streaming=False)
    with pytest.raises(OptionError, match=r"admin\.url"):
        parse_source({"service.url": "pulsar://h:6650", "topic": "t", "readFrom": "storage",
                      "ledgerStore.url": "s3://b/p"}, streaming=False)
    with pytest.raises(OptionError, match="batch reads"):
        parse_source({"service.url": "pulsar://h:6650", "topic": "t", "readFrom": "storage", "admin.url": "http://h",
                      "ledgerStore.url": "s3://b/p"}, streaming=True)
