"""Subscription types with the official client: Shared, Failover, Key_Shared, Exclusive; redelivery, DLQ."""

from __future__ import annotations

import mmh3
import pulsar
import pytest

from tests.integration.collect import Collector
from tests.integration.naming import topic_name

pytestmark = pytest.mark.metadata_backends("sqlite", "zookeeper")

RECEIVE_MS = 10_000
Type = pulsar.ConsumerType



def test_shared_spreads_messages_exactly_once(client: pulsar.Client) -> None:
    topic = topic_name("shared")
    collector = Collector()
    consumers = [
        client.subscribe(topic, "sub", consumer_type=Type.Shared, consumer_name=f"c{i}",
                         message_listener=collector.listener(f"c{i}"), receiver_queue_size=10)
        for i in range(3)
    ]
    producer = client.create_producer(topic)
    for i in range(300):
        producer.send_async(f"m{i}".encode(), None)
    producer.flush()
    got = collector.wait_for(300)
    assert sorted(g.data for g in got) == sorted(f"m{i}".encode() for i in range(300))
    assert len({g.data for g in got}) == 300
    assert len(collector.by_consumer()) == 3, "every consumer should get a share"
    for c in consumers:
        c.close()


def test_shared_unacked_messages_go_to_another_consumer_when_one_closes(client: pulsar.Client) -> None:
    topic = topic_name("shared-close")
    first = client.subscribe(topic, "sub", consumer_type=Type.Shared, consumer_name="first")
    producer = client.create_producer(topic)
    for i in range(10):
        producer.send(f"m{i}".encode())
    held = [first.receive(RECEIVE_MS) for _ in range(10)]  # received, never acked
    assert [m.redelivery_count() for m in held] == [0] * 10
    second = client.subscribe(topic, "sub", consumer_type=Type.Shared, consumer_name="second")
    first.close()
    again = [second.receive(RECEIVE_MS) for _ in range(10)]
    assert sorted(m.data() for m in again) == sorted(m.data() for m in held)
    assert all(m.redelivery_count() == 1 for m in again)


def test_negative_ack_redelivers_exactly_that_message_with_a_count(client: pulsar.Client) -> None:
    topic = topic_name("nack")
    consumer = client.subscribe(topic, "sub", consumer_type=Type.Shared, negative_ack_redelivery_delay_ms=100)
    producer = client.create_producer(topic)
    for i in range(3):
        producer.send(f"m{i}".encode())
    msgs = [consumer.receive(RECEIVE_MS) for _ in range(3)]
    consumer.acknowledge(msgs[0])
    consumer.acknowledge(msgs[2])
    consumer.negative_acknowledge(msgs[1])
    again = consumer.receive(RECEIVE_MS)
    assert again.data() == b"m1" and again.redelivery_count() == 1
    consumer.acknowledge(again)
    with pytest.raises(pulsar.Timeout):
        consumer.receive(500)


def test_dead_letter_topic_after_max_redeliveries(client: pulsar.Client) -> None:
    topic = topic_name("dlq")
    dlq = client.subscribe(f"{topic}-sub-DLQ", "dlq-reader", initial_position=pulsar.InitialPosition.Earliest)
    consumer = client.subscribe(
        topic, "sub", consumer_type=Type.Shared, negative_ack_redelivery_delay_ms=100,
        dead_letter_policy=pulsar.ConsumerDeadLetterPolicy(max_redeliver_count=2),
    )
    client.create_producer(topic).send(b"poison", properties={"k": "v"})
    counts = []
    for _ in range(3):  # delivered max+1 times, then dead-lettered on the next nack
        msg = consumer.receive(RECEIVE_MS)
        counts.append(msg.redelivery_count())
        consumer.negative_acknowledge(msg)
    assert counts == [0, 1, 2]
    dead = dlq.receive(RECEIVE_MS)
    assert dead.data() == b"poison"
    assert dead.properties()["k"] == "v"
    assert dead.properties()["REAL_TOPIC"] == topic
    with pytest.raises(pulsar.Timeout):
        consumer.receive(500)


def test_failover_active_consumer_by_name_and_takeover(client: pulsar.Client) -> None:
    topic = topic_name("failover")
    collector = Collector(ack=False)
    b = client.subscribe(topic, "sub", consumer_type=Type.Failover, consumer_name="b",
                         message_listener=collector.listener("b"))
    a = client.subscribe(topic, "sub", consumer_type=Type.Failover, consumer_name="a",
                         message_listener=collector.listener("a"))
    producer = client.create_producer(topic)
    for i in range(10):
        producer.send(f"m{i}".encode())
    got = collector.wait_for(10)
    assert {g.consumer for g in got} == {"a"}, "the consumer that sorts first is active"
    a.close()  # nothing was acked: b takes over and gets everything again
    got = collector.wait_for(20)
    assert sorted(g.data for g in got if g.consumer == "b") == sorted(f"m{i}".encode() for i in range(10))
    b.close()


def test_key_shared_keeps_each_key_on_one_consumer_in_order(client: pulsar.Client) -> None:
    topic = topic_name("key-shared")
    collector = Collector()
    consumers = [
        client.subscribe(topic, "sub", consumer_type=Type.KeyShared, consumer_name=f"c{i}",
                         message_listener=collector.listener(f"c{i}"), receiver_queue_size=20)
        for i in range(3)
    ]
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(300):
        producer.send_async(f"{i}".encode(), None, partition_key=f"key-{i % 20}")
    producer.flush()
    got = collector.wait_for(300)
    owners: dict[str, set[str]] = {}
    for g in got:
        owners.setdefault(g.key, set()).add(g.consumer)
    assert all(len(o) == 1 for o in owners.values()), owners
    assert len({next(iter(o)) for o in owners.values()}) > 1, "keys should spread over consumers"
    for per_consumer in collector.by_consumer().values():
        by_key: dict[str, list[int]] = {}
        for g in per_consumer:
            by_key.setdefault(g.key, []).append(int(g.data))
        assert all(seq == sorted(seq) for seq in by_key.values())
    for c in consumers:
        c.close()


def test_key_shared_order_per_key_holds_when_a_consumer_joins(client: pulsar.Client) -> None:
    topic = topic_name("key-shared-join")
    collector = Collector()
    first = client.subscribe(topic, "sub", consumer_type=Type.KeyShared, consumer_name="first",
                             message_listener=collector.listener("first"), receiver_queue_size=5)
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(200):
        producer.send_async(f"{i}".encode(), None, partition_key=f"key-{i % 10}")
    joined = client.subscribe(topic, "sub", consumer_type=Type.KeyShared, consumer_name="joined",
                              message_listener=collector.listener("joined"), receiver_queue_size=5)
    for i in range(200, 400):
        producer.send_async(f"{i}".encode(), None, partition_key=f"key-{i % 10}")
    producer.flush()
    got = collector.wait_for(400)
    assert sorted(int(g.data) for g in got) == list(range(400))
    for key in {g.key for g in got}:
        at_first = [int(g.data) for g in got if g.key == key and g.consumer == "first"]
        at_joined = [int(g.data) for g in got if g.key == key and g.consumer == "joined"]
        assert at_first == sorted(at_first) and at_joined == sorted(at_joined)
        if at_first and at_joined:
            assert max(at_first) < min(at_joined), f"{key}: moved to the new consumer out of order"
    first.close()
    joined.close()


def pulsar_hash(key: str) -> int:
    return (mmh3.hash(key.encode(), 0, signed=False) & 0x7FFF_FFFF) % 65536


def test_key_shared_sticky_ranges_and_overlap_refused(client: pulsar.Client) -> None:
    topic = topic_name("sticky")
    collector = Collector()
    low = pulsar.ConsumerKeySharedPolicy(pulsar.KeySharedMode.Sticky, sticky_ranges=[(0, 32767)])
    high = pulsar.ConsumerKeySharedPolicy(pulsar.KeySharedMode.Sticky, sticky_ranges=[(32768, 65535)])
    client.subscribe(topic, "sub", consumer_type=Type.KeyShared, consumer_name="low", key_shared_policy=low,
                     message_listener=collector.listener("low"))
    client.subscribe(topic, "sub", consumer_type=Type.KeyShared, consumer_name="high", key_shared_policy=high,
                     message_listener=collector.listener("high"))
    overlap = pulsar.ConsumerKeySharedPolicy(pulsar.KeySharedMode.Sticky, sticky_ranges=[(30000, 40000)])
    with pytest.raises(pulsar.ConsumerAssignError):
        client.subscribe(topic, "sub", consumer_type=Type.KeyShared, key_shared_policy=overlap)
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(100):
        producer.send_async(b"x", None, partition_key=f"k{i}")
    producer.flush()
    for g in collector.wait_for(100):
        expected = "low" if pulsar_hash(g.key) <= 32767 else "high"
        assert g.consumer == expected, (g.key, pulsar_hash(g.key))


def test_subscription_type_mismatch_is_refused(client: pulsar.Client) -> None:
    topic = topic_name("mismatch")
    client.subscribe(topic, "sub", consumer_type=Type.Shared)
    with pytest.raises(pulsar.ConsumerBusy):
        client.subscribe(topic, "sub", consumer_type=Type.Failover)
