"""A namespace's autoTopicCreation override decides what the official client's first use creates."""

from __future__ import annotations

import uuid

import pulsar
import pytest

from tests.integration.admin.http import call
from tests.integration.broker_process import BrokerProcess


def new_namespace(broker: BrokerProcess, override: dict[str, object]) -> str:
    ns = f"public/auto-{uuid.uuid4().hex[:6]}"
    assert call(broker.web_url, "PUT", f"/admin/v2/namespaces/{ns}")[0] in (200, 204)
    status, _ = call(broker.web_url, "POST", f"/admin/v2/namespaces/{ns}/autoTopicCreation", override)
    assert status in (200, 204)
    return ns


def test_override_forbids_auto_creation(broker: BrokerProcess, client: pulsar.Client) -> None:
    ns = new_namespace(broker, {"allowAutoTopicCreation": False})
    with pytest.raises(pulsar.TopicNotFound):
        client.create_producer(f"persistent://{ns}/nope")


def test_override_creates_partitioned_topics(broker: BrokerProcess, client: pulsar.Client) -> None:
    ns = new_namespace(broker, {"allowAutoTopicCreation": True, "topicType": "partitioned",
                                "defaultNumPartitions": 2})
    topic = f"persistent://{ns}/auto"
    assert client.get_topic_partitions(topic) == [f"{topic}-partition-0", f"{topic}-partition-1"]
    producer = client.create_producer(topic)
    producer.send(b"x")
    status, meta = call(broker.web_url, "GET", f"/admin/v2/persistent/{ns}/auto/partitions")
    assert status == 200 and meta["partitions"] == 2
