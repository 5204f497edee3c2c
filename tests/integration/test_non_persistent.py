"""Non-persistent topics with the official client: at-most-once fan-out with no storage, every subscription
type, drops counted in stats, and regex subscriptions in PersistentOnly / NonPersistentOnly / AllTopics."""

from __future__ import annotations

import re
import urllib.request
import uuid

import pulsar
import pytest

from tests.integration.admin.http import call
from tests.integration.broker_process import BrokerProcess

pytestmark = pytest.mark.integration

TIMEOUT_MS = 10_000
DRAIN_MS = 300  # a drained consumer's last receive: the bounded wait that shows nothing more is there


def np_topic(prefix: str = "np") -> str:
    return f"non-persistent://public/default/{prefix}-{uuid.uuid4().hex[:8]}"


def drain(*consumers: pulsar.Consumer) -> list[bytes]:
    got = []
    for consumer in consumers:
        while True:
            try:
                got.append(consumer.receive(DRAIN_MS).data())
            except pulsar.Timeout:
                break
    return got


def test_fan_out_to_every_subscription_type(client: pulsar.Client) -> None:
    topic = np_topic()
    exclusive = client.subscribe(topic, "exclusive")
    failover = [client.subscribe(topic, "failover", consumer_type=pulsar.ConsumerType.Failover, consumer_name=n)
                for n in ("f1", "f2")]
    shared = [client.subscribe(topic, "shared", consumer_type=pulsar.ConsumerType.Shared) for _ in range(2)]
    keyed = [client.subscribe(topic, "keyed", consumer_type=pulsar.ConsumerType.KeyShared) for _ in range(2)]
    producer = client.create_producer(topic, batching_enabled=False)
    sent = [f"m{i}".encode() for i in range(20)]
    for i, body in enumerate(sent):
        producer.send(body, partition_key=f"k{i % 4}")
    assert [exclusive.receive(TIMEOUT_MS).data() for _ in sent] == sent  # in order, each once
    assert sorted(drain(*failover)) == sorted(sent) and not drain(failover[1])  # one active consumer
    assert sorted(drain(*shared)) == sorted(sent)  # spread, each message to one of them
    by_consumer = [set(), set()]
    for index, consumer in enumerate(keyed):
        while True:
            try:
                msg = consumer.receive(DRAIN_MS)
            except pulsar.Timeout:
                break
            by_consumer[index].add(msg.partition_key())
    assert by_consumer[0] | by_consumer[1] == {"k0", "k1", "k2", "k3"} and not by_consumer[0] & by_consumer[1]


def test_nothing_is_stored_and_drops_are_counted(client: pulsar.Client, broker: BrokerProcess) -> None:
    topic = np_topic()
    producer = client.create_producer(topic, batching_enabled=False)
    producer.send(b"before anyone listened")
    late = client.subscribe(topic, "late")
    producer.send(b"after")
    assert late.receive(TIMEOUT_MS).data() == b"after"  # the earlier message was never kept
    slow = client.subscribe(topic, "slow", receiver_queue_size=1)  # one permit, never read until the end
    for i in range(30):
        producer.send(f"x{i}".encode())
    delivered = drain(slow)
    assert 1 <= len(delivered) < 30  # at most once: no permit, no delivery
    local = topic.rsplit("/", 1)[1]
    status, stats = call(broker.web_url, "GET", f"/admin/v2/non-persistent/public/default/{local}/stats")
    assert status == 200 and stats["msgInCounter"] == 32 and stats["storageSize"] == 0
    assert stats["subscriptions"]["slow"]["msgDropCounter"] == 30 - len(delivered)
    assert stats["subscriptions"]["late"]["msgOutCounter"] == 31 and len(stats["publishers"]) == 1
    assert topic in call(broker.web_url, "GET", "/admin/v2/non-persistent/public/default")[1]
    with urllib.request.urlopen(f"{broker.web_url}/metrics", timeout=15) as answer:
        metrics = answer.read().decode()
    labels = f'cluster="standalone",namespace="public/default",topic="{topic}"'
    assert f"pulsar_in_messages_total{{{labels}}} 32.0" in metrics
    with pytest.raises(pulsar.PulsarException):
        late.seek(pulsar.MessageId.earliest)  # nothing to seek in


def test_regex_subscription_modes(client: pulsar.Client, broker: BrokerProcess) -> None:
    ns = f"public/rx-{uuid.uuid4().hex[:6]}"
    assert call(broker.web_url, "PUT", f"/admin/v2/namespaces/{ns}")[0] == 204
    persistent = client.create_producer(f"persistent://{ns}/rx-p")
    non_persistent = client.create_producer(f"non-persistent://{ns}/rx-np")
    modes = pulsar.RegexSubscriptionMode
    consumers = {
        mode: client.subscribe(re.compile(f"persistent://{ns}/rx-.*"), f"sub-{mode}", regex_subscription_mode=mode)
        for mode in (modes.PersistentOnly, modes.NonPersistentOnly, modes.AllTopics)
    }
    persistent.send(b"p")
    non_persistent.send(b"np")
    assert drain(consumers[modes.PersistentOnly]) == [b"p"]
    assert drain(consumers[modes.NonPersistentOnly]) == [b"np"]
    assert sorted(drain(consumers[modes.AllTopics])) == [b"np", b"p"]


def test_partitioned_non_persistent_topic(client: pulsar.Client, broker: BrokerProcess) -> None:
    local = f"np-part-{uuid.uuid4().hex[:6]}"
    assert call(broker.web_url, "PUT", f"/admin/v2/non-persistent/public/default/{local}/partitions", 3)[0] == 204
    assert call(broker.web_url, "GET", f"/admin/v2/non-persistent/public/default/{local}/partitions") == (
        200, {"partitions": 3})
    topic = f"non-persistent://public/default/{local}"
    consumer = client.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Shared)
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(9):
        producer.send(f"m{i}".encode(), partition_key=f"k{i}")
    assert sorted(consumer.receive(TIMEOUT_MS).data() for _ in range(9)) == [f"m{i}".encode() for i in range(9)]
    assert len(client.get_topic_partitions(topic)) == 3
