"""Spark reads a topic whose first ledgers live only in the offload store (filesystem driver, local copies
released): every message once, with its message id, exactly as before the offload; while the store fails,
the read fails with an error naming the ledger and the store's reason, and succeeds again once it heals."""

from __future__ import annotations

import re
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from magnetar.client.sync import Client
from tests.integration.broker_process import BrokerProcess

WAIT_S = 30.0


@pytest.fixture(scope="module")
def tiered(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    data = Path(tmp_path_factory.mktemp("spark-tiered"))
    (data / "offload").mkdir()
    proc = BrokerProcess(data / "broker", extra_args=(
        "--set", "managedLedgerMaxEntriesPerLedger=10", "--set", "defaultRetentionTimeInMinutes=-1",
        "--set", "defaultRetentionSizeInMB=-1", "--set", "retentionCheckIntervalInSeconds=1",
        "--set", "managedLedgerOffloadDriver=filesystem", "--set", f"fileSystemURI={data / 'offload'}",
        "--set", "managedLedgerOffloadDeletionLagMs=0",
        "--set", "dispatcherReadFailureBackoffInitialTimeInMs=100",
        "--set", "dispatcherReadFailureBackoffMaxTimeInMs=1000",
    )).start()
    proc.offload_dir = data / "offload"  # type: ignore[attr-defined]
    try:
        yield proc
    finally:
        proc.kill()


def offloaded_topic(tiered: BrokerProcess, local: str) -> dict[str, Any]:
    """45 messages, one entry each: 4 sealed ledgers offloaded and released, and the current one."""
    topic = f"persistent://public/default/{local}"
    with Client(tiered.url, operation_timeout_ms=15_000) as client:
        producer = client.create_producer(topic)
        sent = {f"v-{i}": producer.send(f"v-{i}".encode()) for i in range(45)}
    request = urllib.request.Request(f"{tiered.web_url}/admin/v2/persistent/public/default/{local}/offload",
                                     data=b'{"ledgerId": 9223372036854775807, "entryId": 0}', method="PUT",
                                     headers={"Content-Type": "application/json"})
    urllib.request.urlopen(request, timeout=15).close()
    pattern = f"{local}: deleted the local copy of offloaded ledger"
    assert tiered.wait_for(lambda log: log.count(pattern) >= 4, WAIT_S), tiered.log_text()[-3000:]
    return sent


def test_spark_reads_offloaded_ledgers(spark: SparkSession, tiered: BrokerProcess) -> None:
    local = f"spark-offloaded-{uuid.uuid4().hex[:6]}"
    topic = f"persistent://public/default/{local}"
    sent = offloaded_topic(tiered, local)

    rows = spark.read.format("pulsar").option("service.url", tiered.url).option("topic", topic).load().collect()
    assert sorted(r.value.decode() for r in rows) == sorted(sent)
    for row in rows:
        mid = sent[row.value.decode()]
        assert (row.messageId.ledgerId, row.messageId.entryId) == (mid.ledger_id, mid.entry_id)


def test_a_failing_store_fails_the_read_with_the_ledger_and_reason(spark: SparkSession, tiered: BrokerProcess) -> None:
    local = f"spark-store-down-{uuid.uuid4().hex[:6]}"
    topic = f"persistent://public/default/{local}"
    sent = offloaded_topic(tiered, local)
    store: Path = tiered.offload_dir  # type: ignore[attr-defined]
    hidden = store.with_name("offload-hidden")
    store.rename(hidden)  # every offloaded object is gone, as with the store down
    try:
        reader = (spark.read.format("pulsar").option("service.url", tiered.url).option("topic", topic)
                  .option("admin.url", tiered.web_url).option("pollTimeoutMs", "1000"))
        with pytest.raises(Exception, match="cannot read an offloaded ledger") as caught:
            reader.load().collect()
        assert re.search(r"ledger \d+ \(filesystem", str(caught.value)), str(caught.value)[-2000:]
    finally:
        hidden.rename(store)
    rows = reader.load().collect()  # the store is back: the same read succeeds
    assert sorted(r.value.decode() for r in rows) == sorted(sent)
