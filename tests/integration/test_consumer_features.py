"""Consumer features with the official client: batch-index acks, delayed delivery, seek, readers,
partitioned topics, chunking, pattern subscriptions, and bad input from consumers."""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pulsar
import pytest

from tests.integration.broker_process import BrokerProcess
from tests.integration.collect import Collector
from tests.integration.conftest import make_client
from tests.integration.naming import topic_name

RECEIVE_MS = 10_000
PATTERN_DISCOVERY_WAIT_S = 80.0
Type = pulsar.ConsumerType



def send_batch(producer: pulsar.Producer, bodies: list[bytes]) -> list[pulsar.MessageId]:
    ids: list[pulsar.MessageId | None] = [None] * len(bodies)

    def remember(i: int):  # type: ignore[no-untyped-def]
        def done(result: pulsar.Result, msg_id: pulsar.MessageId) -> None:
            ids[i] = msg_id
        return done

    for i, body in enumerate(bodies):
        producer.send_async(body, remember(i))
    producer.flush()
    assert all(i is not None for i in ids)
    return [i for i in ids if i is not None]


def test_batch_index_acks_redeliver_only_the_rest_and_persist(fresh_broker: BrokerProcess) -> None:
    topic = topic_name("batch-ack")
    client = make_client(fresh_broker.url)
    producer = client.create_producer(topic, batching_enabled=True, batching_max_messages=10,
                                      batching_max_publish_delay_ms=1000)
    consumer = client.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest,
                                batch_index_ack_enabled=True)
    ids = send_batch(producer, [f"m{i}".encode() for i in range(10)])
    assert len({(i.ledger_id(), i.entry_id()) for i in ids}) == 1, "one batch entry"
    msgs = [consumer.receive(RECEIVE_MS) for _ in range(10)]
    for m in msgs[:4]:
        consumer.acknowledge(m)
    consumer.close()
    client.close()
    fresh_broker.restart()
    client = make_client(fresh_broker.url)
    try:
        consumer = client.subscribe(topic, "sub", batch_index_ack_enabled=True)
        rest = [consumer.receive(RECEIVE_MS).data() for _ in range(6)]
        assert rest == [f"m{i}".encode() for i in range(4, 10)]
        with pytest.raises(pulsar.Timeout):
            consumer.receive(500)
    finally:
        client.close()


def test_delayed_delivery_is_not_early(client: pulsar.Client) -> None:
    topic = topic_name("delayed")
    consumer = client.subscribe(topic, "sub", consumer_type=Type.Shared)
    producer = client.create_producer(topic)
    sent_at_ms = int(time.time() * 1000)
    producer.send(b"later", deliver_at=sent_at_ms + 1500)
    producer.send(b"now")
    first = consumer.receive(RECEIVE_MS)
    assert first.data() == b"now"
    consumer.acknowledge(first)
    second = consumer.receive(RECEIVE_MS)
    assert second.data() == b"later"
    assert time.time() * 1000 >= sent_at_ms + 1500, "delivered before its time"


def test_delayed_message_survives_a_restart(fresh_broker: BrokerProcess) -> None:
    topic = topic_name("delayed-restart")
    client = make_client(fresh_broker.url)
    client.subscribe(topic, "sub", consumer_type=Type.Shared).close()
    due_ms = int(time.time() * 1000) + 2000
    client.create_producer(topic).send(b"later", deliver_at=due_ms)
    client.close()
    fresh_broker.restart()
    client = make_client(fresh_broker.url)
    try:
        consumer = client.subscribe(topic, "sub", consumer_type=Type.Shared)
        assert consumer.receive(RECEIVE_MS).data() == b"later"
        assert time.time() * 1000 >= due_ms
    finally:
        client.close()


def test_seek_by_message_id_and_by_publish_time(client: pulsar.Client) -> None:
    topic = topic_name("seek")
    consumer = client.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
    producer = client.create_producer(topic)
    ids = []
    for i in range(10):
        ids.append(producer.send(f"m{i}".encode()))
    msgs = [consumer.receive(RECEIVE_MS) for _ in range(10)]
    for m in msgs:
        consumer.acknowledge(m)
    consumer.seek(ids[3])  # the client treats the seek id as an exclusive start
    assert consumer.receive(RECEIVE_MS).data() == b"m4"
    consumer.seek(msgs[6].publish_timestamp())  # inclusive by time
    got = consumer.receive(RECEIVE_MS)
    assert got.publish_timestamp() >= msgs[6].publish_timestamp()
    assert int(got.data()[1:]) <= 6
    consumer.seek(pulsar.MessageId.earliest)
    assert consumer.receive(RECEIVE_MS).data() == b"m0"


def test_readers_from_earliest_latest_and_an_id(client: pulsar.Client) -> None:
    topic = topic_name("reader")
    producer = client.create_producer(topic)
    ids = [producer.send(f"m{i}".encode()) for i in range(5)]
    earliest = client.create_reader(topic, pulsar.MessageId.earliest)
    assert [earliest.read_next(RECEIVE_MS).data() for _ in range(5)] == [f"m{i}".encode() for i in range(5)]
    assert not earliest.has_message_available()
    exclusive = client.create_reader(topic, ids[2])
    assert exclusive.read_next(RECEIVE_MS).data() == b"m3"
    inclusive = client.create_reader(topic, ids[2], start_message_id_inclusive=True)
    assert inclusive.read_next(RECEIVE_MS).data() == b"m2"
    latest = client.create_reader(topic, pulsar.MessageId.latest)
    assert not latest.has_message_available()
    producer.send(b"new")
    assert latest.read_next(RECEIVE_MS).data() == b"new"
    for r in (earliest, exclusive, inclusive, latest):
        r.close()


def test_chunked_message_far_larger_than_the_limit(client: pulsar.Client) -> None:
    topic = topic_name("chunks")
    consumer = client.subscribe(topic, "sub")
    producer = client.create_producer(topic, chunking_enabled=True, batching_enabled=False)
    body = bytes(range(256)) * (10 * 1024 * 1024 // 256)
    producer.send(body)
    producer.send(b"small")
    got = consumer.receive(30_000)
    assert got.data() == body
    consumer.acknowledge(got)
    assert consumer.receive(RECEIVE_MS).data() == b"small"


def test_pattern_subscription_picks_up_a_new_topic(client: pulsar.Client) -> None:
    tag = uuid.uuid4().hex[:8]
    client.create_producer(f"persistent://public/default/pat-{tag}-a").send(b"from-a")
    collector = Collector()
    consumer = client.subscribe(
        re.compile(f"persistent://public/default/pat-{tag}-.*"), "sub",
        initial_position=pulsar.InitialPosition.Earliest, message_listener=collector.listener("c"),
    )
    assert collector.wait_for(1)[0].data == b"from-a"
    # The topic appears after the subscription; pulsar-client 3.13 ignores pattern_auto_discovery_period
    # (apache/pulsar-client-python#171) and lists the namespace every 60 s, so this waits for one round.
    client.create_producer(f"persistent://public/default/pat-{tag}-b").send(b"from-b")
    got = collector.wait_for(2, timeout_s=PATTERN_DISCOVERY_WAIT_S)
    assert [g.data for g in got] == [b"from-a", b"from-b"]
    consumer.close()


@pytest.fixture(scope="module")
def partitioned_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    args = ("--set", "allowAutoTopicCreationType=partitioned", "--set", "defaultNumPartitions=3")
    proc = BrokerProcess(Path(tmp_path_factory.mktemp("partitioned")), extra_args=args).start()
    try:
        yield proc
    finally:
        proc.kill()


def test_partitioned_topic_produce_and_consume_across_partitions(partitioned_broker: BrokerProcess) -> None:
    topic = topic_name("parts")
    client = make_client(partitioned_broker.url)
    try:
        assert client.get_topic_partitions(topic) == [f"{topic}-partition-{i}" for i in range(3)]
        collector = Collector()
        consumer = client.subscribe(topic, "sub", message_listener=collector.listener("c"),
                                    initial_position=pulsar.InitialPosition.Earliest)
        producer = client.create_producer(topic, batching_enabled=False)
        for i in range(30):
            producer.send(f"m{i}".encode())
        got = collector.wait_for(30)
        assert sorted(g.data for g in got) == sorted(f"m{i}".encode() for i in range(30))
        assert {g.message_id.partition() for g in got} == {0, 1, 2}
        consumer.close()
    finally:
        client.close()


def test_nonsense_seek_and_unknown_acks_are_harmless(client: pulsar.Client) -> None:
    topic = topic_name("nonsense")
    consumer = client.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
    producer = client.create_producer(topic)
    for i in range(3):
        producer.send(f"m{i}".encode())
    consumer.acknowledge(pulsar.MessageId(-1, 999_999, 123, -1))
    consumer.seek(pulsar.MessageId(-1, 999_999, 5, -1))  # past the end: clamped, nothing crashes
    producer.send(b"after")
    assert consumer.receive(RECEIVE_MS).data() == b"after"
    consumer.seek(pulsar.MessageId.earliest)
    assert consumer.receive(RECEIVE_MS).data() == b"m0"
