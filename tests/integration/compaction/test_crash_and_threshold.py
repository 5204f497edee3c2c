"""Compaction across SIGKILL (during pass 1, pass 2, and right after the switch) and automatic compaction by
the namespace's compactionThreshold, each on a broker of its own."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pulsar
import pytest

from tests.integration.admin.http import call
from tests.integration.broker_process import BrokerProcess
from tests.integration.compaction.helpers import (
    COMPACTION_TIMEOUT_S,
    compact,
    compaction_status,
    finished,
    key_values,
    read_all,
    topic_path,
)
from tests.integration.conftest import make_client

pytestmark = pytest.mark.integration

KEYS = 500
ROUNDS = 40  # messages per key in the stream a kill interrupts: 20,000 messages in batches


def _publish(client: pulsar.Client, topic: str, tag: str, rounds: int) -> dict[str, bytes | None]:
    """Keyed puts (and a tombstone for every 7th key in the last round), batched; returns the last value
    of each key (None: deleted)."""
    producer = client.create_producer(topic, batching_enabled=True, batching_max_messages=500,
                                      batching_max_publish_delay_ms=5, block_if_queue_full=True)
    latest: dict[str, bytes | None] = {}
    for r in range(rounds):
        for k in range(KEYS):
            key = f"k{k}"
            value = None if r == rounds - 1 and k % 7 == 0 else f"{tag}-{r}-{k}".encode()
            producer.send_async(value, None, partition_key=key)
            latest[key] = value
    producer.flush()
    producer.close()
    return latest


def _view(client: pulsar.Client, topic: str) -> dict[str, bytes]:
    reader = client.create_reader(topic, pulsar.MessageId.earliest, is_read_compacted=True)
    table: dict[str, bytes] = {}
    for key, value in key_values(read_all(reader, limit=100_000)):
        table.pop(key, None)
        if value:  # the reader sees the live tail too: tombstones there have an empty body
            table[key] = value
    reader.close()
    return table


@pytest.fixture
def killable(tmp_path: Path) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(tmp_path / "data").start()
    try:
        yield proc
    finally:
        proc.kill()


@pytest.mark.parametrize("kill_at", ["compaction pass 1", "compaction pass 2 writes", "switched to compacted"])
def test_sigkill_during_compaction_keeps_a_whole_view(killable: BrokerProcess, kill_at: str) -> None:
    topic = f"persistent://public/default/compaction-crash-{kill_at.split()[-1]}"
    client = make_client(killable.url)
    model = _publish(client, topic, "old", 2)
    compact(killable, topic)  # the old view
    model.update(_publish(client, topic, "new", ROUNDS))
    expected = {k: v for k, v in model.items() if v is not None}
    seen = killable.log_text().count(f"{topic}: {kill_at}")
    status, _ = call(killable.web_url, "PUT", topic_path(topic) + "/compaction")
    assert status == 204
    assert killable.wait_for(lambda log: log.count(f"{topic}: {kill_at}") > seen, COMPACTION_TIMEOUT_S)
    killable.kill()
    client.close()
    killable.start()
    client = make_client(killable.url)
    before = finished(killable.log_text(), topic)
    assert _view(client, topic) == expected  # old view + live tail, or new view: never a lost or mixed key
    if kill_at != "switched to compacted":  # the interrupted compaction runs again when the topic loads
        assert killable.wait_for(lambda log: finished(log, topic) > before, COMPACTION_TIMEOUT_S)
        assert f"{topic}: a compaction was interrupted; it runs again" in killable.log_text()  # killed mid-way
        assert compaction_status(killable, topic) == {"status": "SUCCESS", "lastError": ""}
    else:
        compact(killable, topic)
    assert _view(client, topic) == expected
    stats = call(killable.web_url, "GET", topic_path(topic) + "/stats")[1]
    assert stats["compaction"]["lastCompactionSucceedTimestamp"] > 0
    client.close()


@pytest.fixture
def monitored(tmp_path: Path) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(tmp_path / "data", extra_args=(
        "--set", "brokerServiceCompactionMonitorIntervalInSeconds=1")).start()
    try:
        yield proc
    finally:
        proc.kill()


def test_namespace_threshold_compacts_automatically(monitored: BrokerProcess) -> None:
    topic = "persistent://public/default/compaction-auto"
    client = make_client(monitored.url)
    assert call(monitored.web_url, "PUT", "/admin/v2/namespaces/public/default/compactionThreshold", 20_000)[0] == 204
    producer = client.create_producer(topic)
    for i in range(10):
        producer.send(b"small", partition_key=f"k{i % 3}")
    assert compaction_status(monitored, topic)["status"] == "NOT_RUN"  # under the threshold
    for i in range(300):
        producer.send(b"x" * 100, partition_key=f"k{i % 3}")
    assert monitored.wait_for(lambda log: f"{topic}: compacted " in log, COMPACTION_TIMEOUT_S)
    assert "reach the threshold 20000" in monitored.log_text()
    assert compaction_status(monitored, topic)["status"] == "SUCCESS"
    assert len(_view(client, topic)) == 3
    client.close()
