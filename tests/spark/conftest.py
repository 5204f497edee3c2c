"""Fixtures for the Spark connector: one shared ``local[2]`` SparkSession for the whole run (starting a
JVM costs tens of seconds), and a real ``magnetar standalone`` with auto-created partitioned topics
and small ledgers (so reads cross ledger boundaries) that keeps its data (retention -1)."""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from magnetar.client.sync import Client
from tests.integration.broker_process import BrokerProcess
from tests.s3_server import CREDENTIALS

PARTITIONS = 3
ENTRIES_PER_LEDGER = 40


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    # the AWS credential chain of every Python worker (moto's test keys, for the tests that read a bucket): a
    # data source's workers get the environment the session started with, so it is set before it starts
    os.environ.update(CREDENTIALS)
    session = (
        SparkSession.builder.master("local[2]")
        .appName("magnetar-spark-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.driver.memory", "1g")
        .config("spark.sql.streaming.stopTimeout", "30s")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture(scope="session")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(
        Path(tmp_path_factory.mktemp("magnetar-spark")),
        extra_args=(
            "--set", "allowAutoTopicCreationType=partitioned", "--set", f"defaultNumPartitions={PARTITIONS}",
            "--set", f"managedLedgerMaxEntriesPerLedger={ENTRIES_PER_LEDGER}",
            "--set", "defaultRetentionTimeInMinutes=-1", "--set", "defaultRetentionSizeInMB=-1",
        ),
    ).start()
    try:
        yield proc
    finally:
        proc.kill()


@pytest.fixture(scope="session")
def client(broker: BrokerProcess) -> Iterator[Client]:
    with Client(broker.url, operation_timeout_ms=15_000) as c:
        yield c


def topic_name(prefix: str) -> str:
    return f"persistent://public/default/{prefix}-{uuid.uuid4().hex[:8]}"


def produce(client: Client, topic: str, count: int, *, first: int = 0, prefix: str = "m") -> dict[str, dict]:
    """Send ``count`` keyed messages with properties; what was sent by value."""
    producer = client.create_producer(topic)
    sent: dict[str, dict] = {}
    try:
        futures = []
        for i in range(first, first + count):
            value = f"{prefix}-{i}"
            props = {"i": str(i)}
            futures.append((value, props, producer.send_async(value.encode(), key=f"k{i}", properties=props,
                                                              event_time_ms=1_700_000_000_000 + i)))
        for value, props, future in futures:
            mid = future.result(30)
            sent[value] = {"id": mid, "properties": props}
    finally:
        producer.close()
    return sent
