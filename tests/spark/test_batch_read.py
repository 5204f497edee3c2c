"""Batch reads of a partitioned topic on the real broker: everything produced, once, with its columns."""

from __future__ import annotations

import datetime as dt
import json
import time
import urllib.request

from pyspark.sql import SparkSession

from magnetar.client.sync import Client
from tests.integration.broker_process import BrokerProcess
from tests.spark.conftest import ENTRIES_PER_LEDGER, PARTITIONS, produce, topic_name


def _load(spark: SparkSession, broker: BrokerProcess, topic: str, **options: str):  # type: ignore[no-untyped-def]
    reader = spark.read.format("pulsar").option("service.url", broker.url).option("topic", topic)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def test_batch_read_equals_what_was_produced(spark: SparkSession, broker: BrokerProcess, client: Client) -> None:
    topic = topic_name("batch")
    sent = produce(client, topic, 300)
    df = _load(spark, broker, topic)
    assert df.columns == ["key", "value", "topic", "partition", "messageId", "publishTime", "eventTime",
                          "properties"]
    rows = df.collect()
    assert len(rows) == 300
    by_value = {r.value.decode(): r for r in rows}
    assert set(by_value) == set(sent)
    for value, info in sent.items():
        row = by_value[value]
        mid = info["id"]
        assert (row.messageId.ledgerId, row.messageId.entryId, row.messageId.batchIndex) == (
            mid.ledger_id, mid.entry_id, mid.batch_index)
        assert row.partition == mid.partition
        assert row.topic == topic
        assert row.properties == info["properties"]
        i = int(value.split("-")[1])
        assert row.key == f"k{i}".encode()
        assert row.eventTime == dt.datetime.fromtimestamp((1_700_000_000_000 + i) / 1000)
        assert row.publishTime is not None
    assert {r.partition for r in rows} == set(range(PARTITIONS))


def test_min_partitions_splits_at_ledger_boundaries_and_reads_each_message_once(
    spark: SparkSession, broker: BrokerProcess, client: Client
) -> None:
    topic = topic_name("split")
    count = PARTITIONS * ENTRIES_PER_LEDGER * 3
    sent = produce(client, topic, count)
    df = _load(spark, broker, topic, minPartitions="9")
    assert df.rdd.getNumPartitions() >= 9
    values = [r.value.decode() for r in df.select("value").collect()]
    assert sorted(values) == sorted(sent)


def test_offsets_bound_the_read(spark: SparkSession, broker: BrokerProcess, client: Client) -> None:
    topic = topic_name("bounds")
    sent = produce(client, topic, 60)
    ids = sorted((info["id"] for info in sent.values()), key=lambda m: (m.partition, m.ledger_id, m.entry_id))
    p0 = [m for m in ids if m.partition == 0]
    start, end = p0[2], p0[10]
    parts = f"{topic}-partition-"
    starting = json.dumps({f"{parts}0": [start.ledger_id, start.entry_id, start.batch_index],
                           f"{parts}1": "latest", f"{parts}2": "latest"})
    ending = json.dumps({f"{parts}0": [end.ledger_id, end.entry_id, end.batch_index]})
    rows = _load(spark, broker, topic, startingOffsets=starting, endingOffsets=ending).collect()
    got = sorted((r.messageId.ledgerId, r.messageId.entryId) for r in rows)
    assert got == [(m.ledger_id, m.entry_id) for m in p0[3:11]]


def test_starting_and_ending_time_select_by_publish_time(
    spark: SparkSession, broker: BrokerProcess, client: Client
) -> None:
    topic = topic_name("time")
    early = produce(client, topic, 30, prefix="early")
    cut_ms = max(m.publish_time_ms for m in _read_all(client, topic)) + 1
    for _ in range(1_000_000):  # bounded: the wall clock passes cut_ms within a millisecond or two
        if time.time() * 1000 > cut_ms:
            break
    late = produce(client, topic, 30, prefix="late")
    after = {r.value.decode() for r in _load(spark, broker, topic, startingTime=str(cut_ms)).collect()}
    before = {r.value.decode() for r in _load(spark, broker, topic, endingTime=str(cut_ms)).collect()}
    assert after == set(late)
    assert before == set(early)


def _read_all(client: Client, topic: str) -> list:  # type: ignore[type-arg]
    out = []
    for part in range(PARTITIONS):
        out += list(client.read(f"{topic}-partition-{part}", start="earliest", end="latest", timeout_ms=10_000))
    return out


def test_empty_missing_and_latest_reads_are_empty_and_create_nothing(
    spark: SparkSession, broker: BrokerProcess, client: Client
) -> None:
    empty = topic_name("empty")
    client.create_producer(empty).close()  # exists (partitioned, auto-created), holds nothing
    assert _load(spark, broker, empty).count() == 0
    full = topic_name("full")
    produce(client, full, 5)
    assert _load(spark, broker, full, startingOffsets="latest").count() == 0
    missing = topic_name("misspelled")
    assert _load(spark, broker, missing).count() == 0
    with urllib.request.urlopen(f"{broker.web_url}/admin/v2/persistent/public/default", timeout=30) as answer:
        listed = json.loads(answer.read())
    assert [t for t in listed if t.startswith(full)], "the listing shows topics that exist"
    assert not [t for t in listed if t.startswith(missing)], "a read must not create the topic it names"
