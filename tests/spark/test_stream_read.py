"""Streaming reads on the real broker with Trigger.AvailableNow: exactly once across a restart on the
same checkpoint, admission limits per micro-batch, topics found while the query runs; the durable
``subscriptionName`` standing where the last committed micro-batch ended (issue 35, item 2)."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from magnetar.client.sync import Client
from tests.integration.broker_process import BrokerProcess
from tests.spark.conftest import PARTITIONS, produce, topic_name

QUERY_TIMEOUT_S = 180
SUBSCRIPTION = "spark-copy"


def stream(spark: SparkSession, broker: BrokerProcess, **options: str) -> DataFrame:
    reader = spark.readStream.format("pulsar").option("service.url", broker.url)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def run_available_now(df: DataFrame, out: Path, checkpoint: Path) -> list[dict[str, Any]]:
    """Run to the end of what is available now; the progress of each micro-batch."""
    query = (df.select("value", "topic", "partition", "messageId").writeStream.format("parquet")
             .option("path", str(out)).option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).start())
    finished = query.awaitTermination(QUERY_TIMEOUT_S)
    assert finished, "the availableNow query did not finish"
    assert query.exception() is None, query.exception()
    return [p for p in query.recentProgress if p["numInputRows"] > 0]


def test_available_now_restart_reads_every_message_exactly_once(
    spark: SparkSession, broker: BrokerProcess, client: Client, tmp_path: Path
) -> None:
    topic = topic_name("stream")
    first = produce(client, topic, 150, prefix="a")
    df = stream(spark, broker, topic=topic, startingOffsets="earliest")
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    run_available_now(df, out, checkpoint)
    assert sorted(r.value.decode() for r in spark.read.parquet(str(out)).collect()) == sorted(first)
    second = produce(client, topic, 90, prefix="b")
    run_available_now(df, out, checkpoint)
    values = [r.value.decode() for r in spark.read.parquet(str(out)).collect()]
    assert len(values) == len(set(values)) == 240
    assert set(values) == set(first) | set(second)


def test_max_records_per_trigger_bounds_every_micro_batch(
    spark: SparkSession, broker: BrokerProcess, client: Client, tmp_path: Path
) -> None:
    topic = topic_name("limit")
    sent = produce(client, topic, 120)
    df = stream(spark, broker, topic=topic, startingOffsets="earliest", maxRecordsPerTrigger="25")
    progress = run_available_now(df, tmp_path / "out", tmp_path / "cp")
    sizes = [p["numInputRows"] for p in progress]
    assert sum(sizes) == 120 and max(sizes) <= 25 and len(sizes) >= 5, sizes
    assert sorted(r.value.decode() for r in spark.read.parquet(str(tmp_path / "out")).collect()) == sorted(sent)


def test_max_bytes_per_trigger_bounds_every_micro_batch(
    spark: SparkSession, broker: BrokerProcess, client: Client, tmp_path: Path
) -> None:
    topic = topic_name("bytes")
    produce(client, topic, 60)
    # each message counts as its value plus 64 bytes of overhead: about 70 bytes; 700 bytes ~ 10 messages
    df = stream(spark, broker, topic=topic, startingOffsets="earliest", maxBytesPerTrigger="700")
    sizes = [p["numInputRows"] for p in run_available_now(df, tmp_path / "out", tmp_path / "cp")]
    assert sum(sizes) == 60 and max(sizes) <= 10, sizes


def test_topics_pattern_discovers_a_topic_created_between_runs(
    spark: SparkSession, broker: BrokerProcess, client: Client, tmp_path: Path
) -> None:
    prefix = topic_name("pat")
    a = produce(client, f"{prefix}-a", 20, prefix="a")
    df = stream(spark, broker, topicsPattern=f"{prefix}-.*", startingOffsets="earliest")
    out, checkpoint = tmp_path / "out", tmp_path / "cp"
    run_available_now(df, out, checkpoint)
    b = produce(client, f"{prefix}-b", 20, prefix="b")
    run_available_now(df, out, checkpoint)
    rows = spark.read.parquet(str(out)).collect()
    assert sorted(r.value.decode() for r in rows) == sorted(set(a) | set(b))
    assert {r.topic for r in rows} == {f"{prefix}-a", f"{prefix}-b"}


def test_latest_start_reads_only_what_comes_after_the_first_batch(
    spark: SparkSession, broker: BrokerProcess, client: Client, tmp_path: Path
) -> None:
    topic = topic_name("latest")
    produce(client, topic, 30, prefix="old")
    df = stream(spark, broker, topic=topic)
    out, checkpoint = tmp_path / "out", tmp_path / "cp"
    run_available_now(df, out, checkpoint)
    new = produce(client, topic, 30, prefix="new")
    run_available_now(df, out, checkpoint)
    assert sorted(r.value.decode() for r in spark.read.parquet(str(out)).collect()) == sorted(new)


def backlogs(broker: BrokerProcess, topic: str) -> list[int | None]:
    """Per partition, the backlog of ``SUBSCRIPTION`` (None: the subscription does not exist)."""
    name = topic.removeprefix("persistent://")
    out: list[int | None] = []
    for p in range(PARTITIONS):
        with urllib.request.urlopen(f"{broker.web_url}/admin/v2/persistent/{name}-partition-{p}/stats",
                                    timeout=30) as resp:
            subs = json.load(resp)["subscriptions"]
        out.append(int(subs[SUBSCRIPTION]["msgBacklog"]) if SUBSCRIPTION in subs else None)
    return out


def test_subscription_stands_where_the_last_available_now_batch_ended(
    spark: SparkSession, broker: BrokerProcess, client: Client, tmp_path: Path
) -> None:
    topic = topic_name("sub-now")
    produce(client, topic, 90, prefix="a")
    df = stream(spark, broker, topic=topic, startingOffsets="earliest", maxRecordsPerTrigger="40",
                subscriptionName=SUBSCRIPTION)
    out, checkpoint = tmp_path / "out", tmp_path / "cp"
    assert len(run_available_now(df, out, checkpoint)) >= 3
    assert backlogs(broker, topic) == [0] * PARTITIONS  # the last batch's end included, once the query ended
    produce(client, topic, 30, prefix="b")
    held = backlogs(broker, topic)
    assert sum(b or 0 for b in held) == 30, held  # what the query has not read is held for it
    run_available_now(df, out, checkpoint)
    assert backlogs(broker, topic) == [0] * PARTITIONS


def test_subscription_follows_a_running_query_without_waiting_for_its_next_batch(
    spark: SparkSession, broker: BrokerProcess, client: Client, tmp_path: Path
) -> None:
    topic = topic_name("sub-run")
    produce(client, topic, 60, prefix="a")
    df = stream(spark, broker, topic=topic, startingOffsets="earliest", subscriptionName=SUBSCRIPTION)
    query = (df.select("value").writeStream.format("parquet").option("path", str(tmp_path / "out"))
             .option("checkpointLocation", str(tmp_path / "cp")).start())
    try:
        # processAllAvailable returns once a trigger found nothing new after the last commit: no next batch
        query.processAllAvailable()
        assert backlogs(broker, topic) == [0] * PARTITIONS
        produce(client, topic, 30, prefix="b")
        query.processAllAvailable()
        assert backlogs(broker, topic) == [0] * PARTITIONS
        assert query.exception() is None, query.exception()
    finally:
        query.stop()
