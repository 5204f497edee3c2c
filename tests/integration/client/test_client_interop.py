"""magnetar.client and the official pulsar-client on one broker: each reads what the other wrote
(batched and compressed), ids equal; partitioned topics, chunking, multi-topic, sync facade."""

from __future__ import annotations

import os
import pickle

import pulsar
import pytest

from magnetar.client import Client, MultiTopicConsumer, PartitionedProducer, Producer
from magnetar.client import sync as msync
from tests.integration.broker_process import BrokerProcess
from tests.integration.client.conftest import RECEIVE_MS, topic_name
from tests.integration.conftest import make_client

OFFICIAL_CODECS = {
    "lz4": pulsar.CompressionType.LZ4,
    "zlib": pulsar.CompressionType.ZLib,
    "zstd": pulsar.CompressionType.ZSTD,
    "snappy": pulsar.CompressionType.SNAPPY,
}


def _official_id(mid: pulsar.MessageId) -> tuple[int, int, int, int]:
    return (mid.ledger_id(), mid.entry_id(), mid.partition(), mid.batch_index())


@pytest.mark.parametrize("codec", sorted(OFFICIAL_CODECS))
async def test_official_producer_to_magnetar_consumer(client: pulsar.Client, mclient: Client, codec: str) -> None:
    topic = topic_name("interop-in")
    consumer = await mclient.subscribe(topic, "sub", initial_position="earliest")
    producer = client.create_producer(
        topic, batching_enabled=True, batching_max_publish_delay_ms=50, compression_type=OFFICIAL_CODECS[codec]
    )
    sent = []
    for i in range(10):
        producer.send_async(f"o{i}".encode() * 10, lambda res, mid: sent.append(mid), partition_key=f"k{i}",
                            properties={"i": str(i)})
    producer.flush()
    got = [await consumer.receive(RECEIVE_MS) for _ in range(10)]
    assert [m.data for m in got] == [f"o{i}".encode() * 10 for i in range(10)]
    assert [m.key for m in got] == [f"k{i}" for i in range(10)]
    assert [m.properties for m in got] == [{"i": str(i)} for i in range(10)]
    assert sorted(_official_id(mid) for mid in sent) == [
        (m.message_id.ledger_id, m.message_id.entry_id, m.message_id.partition, m.message_id.batch_index)
        for m in got
    ]
    assert any(m.message_id.batch_index > 0 for m in got)


@pytest.mark.parametrize("codec", sorted(OFFICIAL_CODECS))
async def test_magnetar_producer_to_official_consumer(client: pulsar.Client, mclient: Client, codec: str) -> None:
    topic = topic_name("interop-out")
    consumer = client.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
    producer = await mclient.create_producer(topic, batching=True, compression=codec)
    futures = [producer.send_nowait(f"m{i}".encode() * 10, key=f"k{i}", properties={"i": str(i)}, event_time_ms=7)
               for i in range(10)]
    await producer.flush()
    sent = [f.result() for f in futures]
    got = [consumer.receive(RECEIVE_MS) for _ in range(10)]
    assert [m.data() for m in got] == [f"m{i}".encode() * 10 for i in range(10)]
    assert [m.partition_key() for m in got] == [f"k{i}" for i in range(10)]
    assert [m.properties() for m in got] == [{"i": str(i)} for i in range(10)]
    assert [m.event_timestamp() for m in got] == [7] * 10
    assert [_official_id(m.message_id()) for m in got] == [
        (s.ledger_id, s.entry_id, s.partition, s.batch_index) for s in sent
    ]
    for m in got:
        consumer.acknowledge(m)


async def test_partitioned_topic_routing_and_consumer(partitioned_broker: BrokerProcess) -> None:
    async with Client(partitioned_broker.url, operation_timeout_ms=10_000) as mc:
        topic = topic_name("mc-part")
        assert len(await mc.get_topic_partitions(topic)) == 3
        consumer = await mc.subscribe(topic, "sub", initial_position="earliest", subscription_type="shared")
        assert isinstance(consumer, MultiTopicConsumer) and len(consumer.consumers) == 3
        producer = await mc.create_producer(topic, batching=True)
        assert isinstance(producer, PartitionedProducer)
        plain = [await producer.send(str(i).encode()) for i in range(6)]
        assert sorted(mid.partition for mid in plain) == [0, 0, 1, 1, 2, 2]
        keyed = {(await producer.send(b"k", key="same")).partition for _ in range(4)}
        assert len(keyed) == 1
        got = [await consumer.receive(RECEIVE_MS) for _ in range(10)]
        assert sorted(m.data for m in got) == sorted([str(i).encode() for i in range(6)] + [b"k"] * 4)
        assert {m.message_id.partition for m in got} == {0, 1, 2}
        assert all(m.topic.endswith(f"-partition-{m.message_id.partition}") for m in got)
        for m in got:
            await consumer.acknowledge(m)
        official = make_client(partitioned_broker.url)
        try:
            oc = official.subscribe(topic, "sub", consumer_type=pulsar.ConsumerType.Shared)
            with pytest.raises(pulsar.Timeout):
                oc.receive(300)  # everything was acked through the partition consumers
        finally:
            official.close()


async def test_chunked_messages_both_ways(partitioned_broker: BrokerProcess) -> None:
    async with Client(partitioned_broker.url, operation_timeout_ms=10_000) as mc:
        topic = "persistent://public/default/" + topic_name("mc-chunk").rsplit("/", 1)[1] + "-partition-0"
        body = os.urandom(200 * 1024)  # against a 64 KiB limit, incompressible
        consumer = await mc.subscribe(topic, "sub", initial_position="earliest")
        producer = await mc.create_producer(topic, chunking=True, compression="zlib")
        assert isinstance(producer, Producer)
        await producer.send(body, key="big")
        msg = await consumer.receive(RECEIVE_MS)
        assert msg.data == body and msg.key == "big" and len(msg.chunk_ids) > 1
        await consumer.acknowledge(msg)
        official = make_client(partitioned_broker.url)
        try:
            oc = official.subscribe(topic, "official", initial_position=pulsar.InitialPosition.Earliest)
            assert oc.receive(RECEIVE_MS).data() == body
            op = official.create_producer(topic, chunking_enabled=True, batching_enabled=False)
            op.send(body[::-1])
            assert (await consumer.receive(RECEIVE_MS)).data == body[::-1]
        finally:
            official.close()


async def test_multi_topic_consumer(mclient: Client) -> None:
    topics = [topic_name("mc-multi-a"), topic_name("mc-multi-b")]
    consumer = await mclient.subscribe(topics, "sub", initial_position="earliest")
    assert isinstance(consumer, MultiTopicConsumer)
    for t in topics:
        p = await mclient.create_producer(t)
        await p.send(t.encode())
    got = sorted([(await consumer.receive(RECEIVE_MS)).topic for _ in range(2)])
    assert got == sorted(topics)


def test_sync_facade_and_pickled_client(broker: BrokerProcess) -> None:
    topic = topic_name("mc-sync")
    original = msync.Client(broker.url, operation_timeout_ms=10_000)
    with pickle.loads(pickle.dumps(original)) as client:
        consumer = client.subscribe(topic, "sub", initial_position="earliest")
        producer = client.create_producer(topic, batching=True)
        futures = [producer.send_async(str(i).encode()) for i in range(5)]
        producer.flush()
        ids = [f.result(10) for f in futures]
        msgs = [consumer.receive(RECEIVE_MS) for _ in range(5)]
        assert [m.message_id for m in msgs] == ids
        consumer.acknowledge(msgs[-1])
        assert [m.data for m in client.read(topic)] == [str(i).encode() for i in range(5)]
    original.close()
