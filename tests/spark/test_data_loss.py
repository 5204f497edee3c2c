"""``failOnDataLoss``: a topic trimmed by retention under a streaming query fails it (naming the lost
range) with ``true`` and is skipped with ``false``. A broker of its own: tiny ledgers, retention 0
(consumed ledgers go at once: with no durable cursor every ledger but the current one counts as
consumed) and a retention check every second."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.errors import StreamingQueryException
from pyspark.sql import SparkSession

from magnetar.client.sync import Client
from tests.integration.broker_process import BrokerProcess
from tests.spark.conftest import produce, topic_name

TRIM_WAIT_S = 60.0


@pytest.fixture(scope="module")
def trimming_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(
        Path(tmp_path_factory.mktemp("magnetar-trim")),
        extra_args=("--set", "managedLedgerMaxEntriesPerLedger=5", "--set", "defaultRetentionTimeInMinutes=0",
                    "--set", "defaultRetentionSizeInMB=0", "--set", "retentionCheckIntervalInSeconds=1",
                    "--set", "brokerDeduplicationSnapshotIntervalSeconds=1"),
    ).start()
    try:
        yield proc
    finally:
        proc.kill()


def _wait_trimmed(client: Client, topic: str, first_value: str) -> None:
    """Bounded: until the topic's earliest message is no longer ``first_value`` (retention ran)."""
    import time

    deadline = time.monotonic() + TRIM_WAIT_S
    while time.monotonic() < deadline:  # polls the broker; each read waits up to 2 s for a message
        earliest = next(iter(client.read(topic, start="earliest", end="latest", timeout_ms=2_000)), None)
        if earliest is not None and earliest.data.decode() != first_value:
            return
    raise AssertionError(f"retention did not trim {topic} within {TRIM_WAIT_S} s")


def _query(spark: SparkSession, broker: BrokerProcess, topic: str, tmp: Path, fail: str):  # type: ignore[no-untyped-def]
    return (
        spark.readStream.format("pulsar").option("service.url", broker.url).option("topic", topic)
        .option("startingOffsets", "earliest").option("failOnDataLoss", fail).option("maxRecordsPerTrigger", "3")
        .load().select("value").writeStream.format("parquet").option("path", str(tmp / "out"))
        .option("checkpointLocation", str(tmp / "cp")).trigger(availableNow=True).start()
    )


@pytest.mark.parametrize("fail", ["true", "false"])
def test_trimmed_topic_fails_or_skips(
    spark: SparkSession, trimming_broker: BrokerProcess, tmp_path: Path, fail: str
) -> None:
    topic = topic_name("trim")
    with Client(trimming_broker.url, operation_timeout_ms=15_000) as client:
        produce(client, topic, 3, prefix="first")
        first = _query(spark, trimming_broker, topic, tmp_path, fail)
        assert first.awaitTermination(120) and first.exception() is None
        produce(client, topic, 30, prefix="later")
        _wait_trimmed(client, topic, "first-0")
        survivors = {m.data.decode() for m in client.read(topic, start="earliest", end="latest", timeout_ms=5_000)}
    second = _query(spark, trimming_broker, topic, tmp_path, fail)
    if fail == "true":
        with pytest.raises(StreamingQueryException) as failed:  # a failed query raises from awaitTermination
            second.awaitTermination(120)
        assert "data loss" in str(failed.value) and topic in str(failed.value)
        assert second.exception() is not None
    else:
        assert second.awaitTermination(120)
        assert second.exception() is None
        values = {r.value.decode() for r in spark.read.parquet(str(tmp_path / "out")).collect()}
        assert {f"first-{i}" for i in range(3)} <= values
        assert survivors <= values
        assert len(survivors) < 30
