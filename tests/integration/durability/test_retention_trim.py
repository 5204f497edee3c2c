"""A standalone broker trims consumed ledgers outside retention, even on a quiet topic with dedup on."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.admin.http import call
from tests.integration.broker_process import BrokerProcess
from tests.integration.conftest import make_client

WAIT_S = 30.0


@pytest.fixture(scope="module")
def trimming_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    args = ("--set", "managedLedgerMaxEntriesPerLedger=5", "--set", "defaultRetentionTimeInMinutes=0",
            "--set", "defaultRetentionSizeInMB=0", "--set", "retentionCheckIntervalInSeconds=1",
            "--set", "brokerDeduplicationSnapshotIntervalSeconds=1")
    proc = BrokerProcess(Path(tmp_path_factory.mktemp("trim")), extra_args=args).start()
    try:
        yield proc
    finally:
        proc.kill()


def test_consumed_ledgers_go_and_the_unconsumed_stay(trimming_broker: BrokerProcess) -> None:
    local = f"trim-{uuid.uuid4().hex[:8]}"
    topic = f"persistent://public/default/{local}"
    client = make_client(trimming_broker.url)
    try:
        consumer = client.subscribe(topic, "sub")
        producer = client.create_producer(topic, batching_enabled=False)
        for i in range(23):  # 5 entries per ledger: four full ledgers and a current one
            producer.send(f"m{i}".encode())
        for _ in range(12):  # the first two ledgers and part of the third are consumed
            consumer.acknowledge(consumer.receive(10_000))
        consumer.close()
        pattern = re.compile(rf"public/default/persistent/{local}: trimmed (\d+) ledgers")
        trimmed = trimming_broker.wait_for(lambda log: sum(int(n) for n in pattern.findall(log)) >= 2, WAIT_S)
        assert trimmed, trimming_broker.log_text()[-2000:]
        path = f"/admin/v2/persistent/public/default/{local}/internalStats"
        status, internal = call(trimming_broker.web_url, "GET", path)
        assert status == 200
        assert sum(x["entries"] for x in internal["ledgers"]) == 23 - 10
        again = make_client(trimming_broker.url).subscribe(topic, "sub")
        assert again.receive(10_000).data() == b"m12"
    finally:
        client.close()
