"""Batch and streaming writes on the real broker land every row, with key, properties and event time."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pulsar
import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from magnetar.client.sync import Client
from tests.integration.broker_process import BrokerProcess
from tests.spark.conftest import PARTITIONS, produce, topic_name


def read_back(client: Client, topic: str) -> list:  # type: ignore[type-arg]
    out = []
    for part in range(PARTITIONS):
        out += list(client.read(f"{topic}-partition-{part}", start="earliest", end="latest", timeout_ms=10_000))
    return out


def test_batch_write_lands_every_row(spark: SparkSession, broker: BrokerProcess, client: Client) -> None:
    topic = topic_name("write")
    df = spark.range(500).select(
        F.concat(F.lit("v-"), F.col("id").cast("string")).cast("binary").alias("value"),
        F.concat(F.lit("k"), F.col("id").cast("string")).alias("key"),
        F.create_map(F.lit("n"), F.col("id").cast("string")).alias("properties"),
        F.lit(dt.datetime(2024, 1, 2, 3, 4, 5)).alias("eventTime"),
    )
    (df.write.format("pulsar").option("service.url", broker.url).option("topic", topic)
     .option("deliveryGuarantee", "at_least_once").mode("append").save())
    got = read_back(client, topic)
    assert sorted(m.data.decode() for m in got) == sorted(f"v-{i}" for i in range(500))
    for m in got:
        n = m.data.decode().split("-")[1]
        assert m.key == f"k{n}" and m.properties == {"n": n}
        assert m.event_time_ms == int(dt.datetime(2024, 1, 2, 3, 4, 5).timestamp() * 1000)


def test_topic_column_routes_rows(spark: SparkSession, broker: BrokerProcess, client: Client) -> None:
    a, b = topic_name("route-a"), topic_name("route-b")
    df = spark.createDataFrame([(a if i % 2 else b, f"x{i}") for i in range(40)], "topic STRING, value STRING")
    df.write.format("pulsar").option("service.url", broker.url).mode("append").save()
    assert sorted(m.data.decode() for m in read_back(client, a)) == sorted(f"x{i}" for i in range(1, 40, 2))
    assert sorted(m.data.decode() for m in read_back(client, b)) == sorted(f"x{i}" for i in range(0, 40, 2))


def test_stream_topic_to_topic_lands_every_row(
    spark: SparkSession, broker: BrokerProcess, client: Client, tmp_path: Path
) -> None:
    source, sink = topic_name("s-in"), topic_name("s-out")
    sent = produce(client, source, 200)
    query = (
        spark.readStream.format("pulsar").option("service.url", broker.url).option("topic", source)
        .option("startingOffsets", "earliest").load()
        .select(F.upper(F.col("value").cast("string")).alias("value"), "key", "properties")
        .writeStream.format("pulsar").option("service.url", broker.url).option("topic", sink)
        .option("checkpointLocation", str(tmp_path / "cp")).trigger(availableNow=True).start()
    )
    assert query.awaitTermination(180)
    assert query.exception() is None
    got = read_back(client, sink)
    assert sorted(m.data.decode() for m in got) == sorted(v.upper() for v in sent)
    assert all(m.properties == {"i": m.key[1:]} for m in got)


def test_missing_value_column_is_refused(spark: SparkSession, broker: BrokerProcess) -> None:
    df = spark.createDataFrame([("x",)], "payload STRING")
    try:
        df.write.format("pulsar").option("service.url", broker.url).option("topic", "t").mode("append").save()
    except Exception as exc:
        assert "value column" in str(exc)
    else:
        raise AssertionError("a frame without a value column was written")


def test_overwrite_mode_is_refused_and_writes_nothing(spark: SparkSession, broker: BrokerProcess,
                                                      client: Client) -> None:
    topic = topic_name("overwrite")
    df = spark.createDataFrame([("x",)], "value STRING")
    with pytest.raises(Exception, match="append-only"):
        df.write.format("pulsar").option("service.url", broker.url).option("topic", topic).mode("overwrite").save()
    with pytest.raises(Exception, match="Append"):  # save() without a mode: ErrorIfExists, refused by Spark
        df.write.format("pulsar").option("service.url", broker.url).option("topic", topic).save()
    assert read_back(client, topic) == []


def test_failed_exactly_once_batch_job_leaves_nothing_visible(
    spark: SparkSession, broker: BrokerProcess, client: Client
) -> None:
    """One task fails while the other writes its rows in a transaction: nothing of the job ever becomes visible;
    a message sent after the failure is the first and only thing a reader (the official client) sees. (The
    driver aborts what finished tasks report; a task Spark interrupts leaves its transaction to the timeout.)"""
    topic = topic_name("eo-fail")

    @F.udf("string")
    def boom(n: int) -> str:
        if n == 99:
            raise ValueError("row 99 is poisoned")
        return f"r{n}"

    df = spark.range(0, 100, numPartitions=2).select(boom(F.col("id")).alias("value"))
    with pytest.raises(Exception, match="poisoned"):
        (df.write.format("pulsar").option("service.url", broker.url).option("topic", topic)
         .option("deliveryGuarantee", "exactly_once").option("txnTimeoutMs", "15000").mode("append").save())
    official = pulsar.Client(broker.url)
    try:
        for part in range(PARTITIONS):
            name = f"{topic}-partition-{part}"
            producer = official.create_producer(name)
            producer.send(b"after")
            producer.close()
            reader = official.create_reader(name, pulsar.MessageId.earliest)
            assert reader.read_next(90_000).data() == b"after"  # held back while a transaction of the job is open
            assert not reader.has_message_available()
    finally:
        official.close()


def test_exactly_once_batch_write_commits_every_row(spark: SparkSession, broker: BrokerProcess,
                                                    client: Client) -> None:
    topic = topic_name("eo-batch")
    df = spark.range(300).select(F.concat(F.lit("e"), F.col("id").cast("string")).alias("value"))
    (df.write.format("pulsar").option("service.url", broker.url).option("topic", topic)
     .option("deliveryGuarantee", "exactly_once").mode("append").save())
    assert sorted(m.data.decode() for m in read_back(client, topic)) == sorted(f"e{i}" for i in range(300))


def test_exactly_once_without_broker_transactions_is_a_clear_error(
    spark: SparkSession, tmp_path: Path
) -> None:
    plain = BrokerProcess(tmp_path / "no-txn", extra_args=("--set", "transactionCoordinatorEnabled=false")).start()
    try:
        df = spark.createDataFrame([("x",)], "value STRING")
        with pytest.raises(Exception, match="transactionCoordinatorEnabled=false"):
            (df.write.format("pulsar").option("service.url", plain.url).option("topic", "t")
             .option("deliveryGuarantee", "exactly_once").mode("append").save())
        df.write.format("pulsar").option("service.url", plain.url).option("topic", "t").mode("append").save()
        with Client(plain.url) as c:  # no option: at-least-once on a broker without transactions
            assert [m.data for m in c.read("t", start="earliest", end="latest", timeout_ms=10_000)] == [b"x"]
    finally:
        plain.kill()
