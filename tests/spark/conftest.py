"""Fixtures for the Spark connector: one shared ``local[2]`` SparkSession for the whole run (starting a
JVM costs tens of seconds), and a real ``magnetar standalone`` with auto-created partitioned topics
and small ledgers (so reads cross ledger boundaries) that keeps its data (retention -1); for direct reads,
``s3_broker``, the same kind of broker with its ledgers in a bucket of a real ``moto_server`` process, and
``send_kinds``, which writes every kind of entry a reader must decode or leave to the broker."""

from __future__ import annotations

import asyncio
import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from magnetar.client.sync import Client
from tests import s3_server
from tests.integration.broker_process import BrokerProcess
from tests.s3_server import CREDENTIALS, MotoServer

PARTITIONS = 3
ENTRIES_PER_LEDGER = 40
BUCKET = "spark-direct"  # s3_broker's ledgers, on the module's moto server
PREFIX = "broker-1"
S3_ENTRIES_PER_LEDGER = 10
MAX_MESSAGE_BYTES = 64 * 1024  # send_kinds' chunked messages are bigger than this
moto = s3_server.moto  # the module-scoped S3 server fixture


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


@pytest.fixture(scope="module")
def s3_broker(moto: MotoServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    moto.create_bucket(BUCKET)
    proc = BrokerProcess(
        Path(tmp_path_factory.mktemp("magnetar-direct")),
        extra_args=(
            "--set", "allowAutoTopicCreationType=partitioned", "--set", f"defaultNumPartitions={PARTITIONS}",
            "--set", f"managedLedgerMaxEntriesPerLedger={S3_ENTRIES_PER_LEDGER}",
            "--set", "defaultRetentionTimeInMinutes=-1", "--set", "defaultRetentionSizeInMB=-1",
            "--set", f"maxMessageSize={MAX_MESSAGE_BYTES}",
            "--set", f"ledgerStoreUrl=s3://{BUCKET}/{PREFIX}", "--set", f"ledgerStoreServiceEndpoint={moto.endpoint}",
            "--set", "ledgerStoreRegion=us-east-1",
        ),
        env=dict(CREDENTIALS),
    ).start()
    try:
        yield proc
    finally:
        proc.kill()


@pytest.fixture(scope="module")
def s3_client(s3_broker: BrokerProcess) -> Iterator[Client]:
    with Client(s3_broker.url, operation_timeout_ms=15_000) as c:
        yield c


def send_kinds(client: Client, topic: str, *, chunks: bool, txns: bool) -> None:
    """Plain sends, lz4 and zstd batches; optionally chunked messages and transactions, some aborted."""
    plain = client.create_producer(topic)
    for i in range(60):
        plain.send(f"plain-{i}".encode(), key=f"k{i}", properties={"i": str(i)}, event_time_ms=1_700_000_000_000 + i)
    for compression in ("lz4", "zstd"):
        batched = client.create_producer(topic, batching=True, batching_max_messages=30, compression=compression)
        futures = [batched.send_async(f"{compression}-{i}".encode() * 20, key=f"b{i % 7}") for i in range(400)]
        for future in futures:
            future.result(30)
        batched.close()
    if chunks:
        chunked = client.create_producer(topic, chunking=True, compression="none")
        for i in range(6):
            chunked.send(bytes([65 + i]) * (MAX_MESSAGE_BYTES * 2 + 1000), key=f"c{i}")
        chunked.close()
    if txns:
        txn_producer = client.create_producer(topic)
        for n in range(8):
            txn = client.new_transaction()
            for i in range(15):
                txn_producer.send(f"txn-{n}-{i}".encode(), key=f"t{i}", txn=txn)
            if n % 3 == 1:
                txn.abort()
            else:
                txn.commit()
        txn_producer.close()
    for i in range(40):  # after everything: some of it stays in the open ledger
        plain.send(f"tail-{i}".encode(), key=f"z{i}")
    plain.close()


def storage_options(moto: MotoServer) -> dict[str, str]:
    """The source options of a direct read of ``s3_broker``'s topics."""
    return {"readFrom": "storage", "ledgerStore.url": f"s3://{BUCKET}/{PREFIX}", "ledgerStore.endpoint": moto.endpoint,
            "ledgerStore.region": "us-east-1"}


def planned_ledger_ranges(url: str, admin_url: str, topic: str, storage: dict[str, str]) -> int:
    """How many ledger ranges a direct read of ``topic`` plans to read from the store (the driver's plan)."""
    from magnetar.client import Client as AsyncClient
    from magnetar.spark.direct import LedgerTask, plan_direct
    from magnetar.spark.options import parse_source
    from magnetar.spark.planning import plan_batch

    opts = parse_source({"service.url": url, "admin.url": admin_url, "topic": topic, **storage}, streaming=False)

    async def plan() -> int:
        async with AsyncClient(url) as client:
            tasks = await plan_direct(await plan_batch(client, opts), opts)
        return sum(len(t.ranges) for t in tasks if isinstance(t, LedgerTask))

    return asyncio.run(plan())
