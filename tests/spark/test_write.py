"""Batch and streaming writes on the real broker land every row, with key, properties and event time."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

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
    df.write.format("pulsar").option("service.url", broker.url).option("topic", topic).mode("append").save()
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
