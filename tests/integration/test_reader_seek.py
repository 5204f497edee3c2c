"""Readers seek from any start position (the official client): a reader made at ``MessageId.latest`` that
seeks back to the earliest id, or to a publish time, reads what is there."""

from __future__ import annotations

import json
import urllib.request
import uuid

import pulsar
import pytest

from tests.integration.broker_process import BrokerProcess

pytestmark = pytest.mark.integration

READ_TIMEOUT_MS = 10_000


def _produce(client: pulsar.Client, topic: str, count: int) -> None:
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(count):
        producer.send(f"m{i}".encode(), partition_key=str(i))
    producer.close()


def _read_all(reader: pulsar.Reader, count: int) -> list[bytes]:
    return sorted(reader.read_next(READ_TIMEOUT_MS).data() for _ in range(count))


@pytest.mark.parametrize("seek_to", ["earliest", "time"])
def test_reader_at_latest_seeks_back(client: pulsar.Client, seek_to: str) -> None:
    topic = f"reader-seek-{seek_to}-{uuid.uuid4().hex[:6]}"
    _produce(client, topic, 3)
    reader = client.create_reader(topic, pulsar.MessageId.latest)
    assert not reader.has_message_available()
    reader.seek(pulsar.MessageId.earliest if seek_to == "earliest" else 0)
    assert _read_all(reader, 3) == [b"m0", b"m1", b"m2"]
    reader.close()


def test_partitioned_reader_at_latest_seeks_to_a_time(client: pulsar.Client, broker: BrokerProcess) -> None:
    topic = f"reader-seek-part-{uuid.uuid4().hex[:6]}"
    url = f"{broker.web_url}/admin/v2/persistent/public/default/{topic}/partitions"
    request = urllib.request.Request(url, data=json.dumps(2).encode(), method="PUT",
                                     headers={"Content-Type": "application/json"})
    urllib.request.urlopen(request, timeout=30).close()
    _produce(client, topic, 4)
    reader = client.create_reader(topic, pulsar.MessageId.latest)
    reader.seek(0)
    assert _read_all(reader, 4) == [b"m0", b"m1", b"m2", b"m3"]
    reader.close()
