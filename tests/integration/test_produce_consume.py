"""The official client against the real broker: produce, consume, ack, restart."""

from __future__ import annotations

from pathlib import Path

import pulsar
import pytest

from tests.integration.broker_process import BrokerProcess
from tests.integration.conftest import make_client
from tests.integration.naming import topic_name

pytestmark = pytest.mark.metadata_backends("sqlite", "zookeeper")

RECEIVE_TIMEOUT_MS = 10_000



def test_unbatched_send_and_receive_in_order_with_ids_keys_properties_event_time(client: pulsar.Client) -> None:
    topic = topic_name("plain")
    consumer = client.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
    producer = client.create_producer(topic)
    sent = []
    for i in range(20):
        msg_id = producer.send(
            f"m{i}".encode(), partition_key=f"k{i % 3}", properties={"i": str(i)}, event_timestamp=1000 + i
        )
        sent.append(msg_id)
    received = [consumer.receive(RECEIVE_TIMEOUT_MS) for _ in range(20)]
    assert [m.data() for m in received] == [f"m{i}".encode() for i in range(20)]
    assert [m.message_id() for m in received] == sent
    assert [m.partition_key() for m in received] == [f"k{i % 3}" for i in range(20)]
    assert [m.properties() for m in received] == [{"i": str(i)} for i in range(20)]
    assert [m.event_timestamp() for m in received] == [1000 + i for i in range(20)]
    assert all(m.publish_timestamp() > 0 for m in received)
    ids = [(m.ledger_id(), m.entry_id()) for m in sent]
    assert ids == sorted(ids) and len(set(ids)) == 20


@pytest.mark.parametrize(
    "compression",
    [
        pulsar.CompressionType.NONE,
        pulsar.CompressionType.LZ4,
        pulsar.CompressionType.ZLib,
        pulsar.CompressionType.ZSTD,
        pulsar.CompressionType.SNAPPY,
    ],
)
@pytest.mark.parametrize("batching", [False, True])
def test_each_compression_type_batched_and_not(
    client: pulsar.Client, compression: pulsar.CompressionType, batching: bool
) -> None:
    topic = topic_name("codec")
    consumer = client.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
    producer = client.create_producer(
        topic,
        compression_type=compression,
        batching_enabled=batching,
        batching_max_messages=10,
        batching_max_publish_delay_ms=5,
    )
    bodies = [(f"payload-{i}-" * 20).encode() for i in range(30)]
    ids: list[pulsar.MessageId | None] = [None] * len(bodies)

    def remember(index: int):  # type: ignore[no-untyped-def]
        def callback(result: pulsar.Result, msg_id: pulsar.MessageId) -> None:
            assert result == pulsar.Result.Ok
            ids[index] = msg_id
        return callback

    for i, body in enumerate(bodies):
        producer.send_async(body, remember(i), properties={"n": str(i)})
    producer.flush()
    received = [consumer.receive(RECEIVE_TIMEOUT_MS) for _ in bodies]
    assert [m.data() for m in received] == bodies
    assert [m.properties()["n"] for m in received] == [str(i) for i in range(30)]
    assert [m.message_id() for m in received] == ids
    if batching:
        assert any(m.message_id().batch_index() > 0 for m in received)


def test_acked_messages_are_not_seen_again_by_a_reconnecting_consumer(client: pulsar.Client) -> None:
    topic = topic_name("acks")
    consumer = client.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
    producer = client.create_producer(topic)
    for i in range(10):
        producer.send(f"m{i}".encode())
    for _ in range(6):
        consumer.acknowledge(consumer.receive(RECEIVE_TIMEOUT_MS))
    consumer.close()  # flushes pending acks
    again = client.subscribe(topic, "sub")
    rest = [again.receive(RECEIVE_TIMEOUT_MS).data() for _ in range(4)]
    assert rest == [f"m{i}".encode() for i in range(6, 10)]
    with pytest.raises(pulsar.Timeout):
        again.receive(500)


def test_cumulative_ack(client: pulsar.Client) -> None:
    topic = topic_name("cumulative")
    consumer = client.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
    producer = client.create_producer(topic)
    for i in range(10):
        producer.send(f"m{i}".encode())
    msgs = [consumer.receive(RECEIVE_TIMEOUT_MS) for _ in range(7)]
    consumer.acknowledge_cumulative(msgs[-1])
    consumer.close()
    again = client.subscribe(topic, "sub")
    assert again.receive(RECEIVE_TIMEOUT_MS).data() == b"m7"


def test_latest_subscription_sees_only_new_messages(client: pulsar.Client) -> None:
    topic = topic_name("latest")
    producer = client.create_producer(topic)
    producer.send(b"old")
    consumer = client.subscribe(topic, "sub")  # Latest is the default
    producer.send(b"new")
    assert consumer.receive(RECEIVE_TIMEOUT_MS).data() == b"new"


def test_get_last_message_id(client: pulsar.Client) -> None:
    topic = topic_name("last-id")
    producer = client.create_producer(topic)
    consumer = client.subscribe(topic, "sub")
    last = None
    for i in range(3):
        last = producer.send(f"m{i}".encode())
    got = consumer.get_last_message_id()
    assert (got.ledger_id(), got.entry_id()) == (last.ledger_id(), last.entry_id())


def test_exclusive_subscription_rejects_a_second_consumer(client: pulsar.Client) -> None:
    topic = topic_name("exclusive")
    client.subscribe(topic, "sub")
    with pytest.raises(pulsar.ConsumerBusy):
        client.subscribe(topic, "sub")


def test_invalid_topic_name_is_refused(client: pulsar.Client) -> None:
    with pytest.raises(pulsar.InvalidTopicName):
        client.create_producer("a/b")


def test_data_and_cursors_survive_a_graceful_restart(fresh_broker: BrokerProcess) -> None:
    topic = topic_name("restart")
    client = make_client(fresh_broker.url)
    producer = client.create_producer(topic)
    consumer = client.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
    for i in range(50):
        producer.send(f"m{i}".encode())
    for _ in range(20):
        consumer.acknowledge(consumer.receive(RECEIVE_TIMEOUT_MS))
    consumer.close()
    client.close()

    assert fresh_broker.restart() is fresh_broker

    client = make_client(fresh_broker.url)
    try:
        consumer = client.subscribe(topic, "sub")
        rest = [consumer.receive(RECEIVE_TIMEOUT_MS).data() for _ in range(30)]
        assert rest == [f"m{i}".encode() for i in range(20, 50)]
        producer = client.create_producer(topic)
        producer.send(b"after-restart")
        assert consumer.receive(RECEIVE_TIMEOUT_MS).data() == b"after-restart"
    finally:
        client.close()
    assert "stopped cleanly" in fresh_broker.log_text()


def test_a_config_file_reaches_the_client(tmp_path: Path) -> None:
    conf = tmp_path / "magnetar.conf"
    conf.write_text("maxMessageSize=2048\n")
    proc = BrokerProcess(tmp_path / "data", extra_args=("--config", str(conf))).start()
    client = make_client(proc.url)
    try:
        producer = client.create_producer(topic_name("small-limit"))
        producer.send(b"x" * 1000)
        with pytest.raises(pulsar.MessageTooBig):  # CONNECTED told the client the broker's limit
            producer.send(b"x" * 5000)
    finally:
        client.close()
        proc.kill()


def test_clients_with_string_and_json_schemas_work(client: pulsar.Client) -> None:
    """The broker keeps no schema registry yet, but clients that declare a schema must still work."""
    from pulsar.schema import Integer, JsonSchema, Record, String, StringSchema

    class Order(Record):
        item = String()
        count = Integer()

    text_topic, json_topic = topic_name("schema-string"), topic_name("schema-json")
    texts = client.subscribe(text_topic, "s", schema=StringSchema())
    client.create_producer(text_topic, schema=StringSchema()).send("hello")
    assert texts.receive(RECEIVE_TIMEOUT_MS).value() == "hello"
    orders = client.subscribe(json_topic, "s", schema=JsonSchema(Order))
    client.create_producer(json_topic, schema=JsonSchema(Order)).send(Order(item="tea", count=3))
    got = orders.receive(RECEIVE_TIMEOUT_MS).value()
    assert (got.item, got.count) == ("tea", 3)
