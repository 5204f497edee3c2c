"""magnetar.client against the real broker: produce/consume, batching, compression, acks, nacks,
DLQ, seek, readers, subscription types."""

from __future__ import annotations

import asyncio
import json
import urllib.request
from typing import Any

import pytest

from magnetar.client import Client, Consumer, DeadLetterPolicy, MessageId, Producer, errors
from tests.integration.broker_process import BrokerProcess
from tests.integration.client.conftest import RECEIVE_MS, topic_name

COMPRESSIONS = ["none", "lz4", "zlib", "zstd", "snappy"]


async def _producer(client: Client, topic: str, **kw: object) -> Producer:
    p = await client.create_producer(topic, **kw)  # type: ignore[arg-type]
    assert isinstance(p, Producer)
    return p


async def _consumer(client: Client, topic: str, sub: str = "sub", **kw: object) -> Consumer:
    c = await client.subscribe(topic, sub, initial_position="earliest", **kw)  # type: ignore[arg-type]
    assert isinstance(c, Consumer)
    return c


@pytest.mark.parametrize("compression", COMPRESSIONS)
@pytest.mark.parametrize("batching", [False, True])
async def test_send_receive_keys_properties_event_time(mclient: Client, compression: str, batching: bool) -> None:
    topic = topic_name("mc-basic")
    consumer = await _consumer(mclient, topic)
    producer = await _producer(mclient, topic, batching=batching, compression=compression)
    futures = [
        producer.send_nowait(f"m{i}".encode() * 20, key=f"k{i % 3}", properties={"i": str(i)}, event_time_ms=100 + i)
        for i in range(30)
    ]
    await producer.flush()
    sent = [f.result() for f in futures]
    got = [await consumer.receive(RECEIVE_MS) for _ in range(30)]
    assert [m.message_id for m in got] == sent
    assert [m.data for m in got] == [f"m{i}".encode() * 20 for i in range(30)]
    assert [m.key for m in got] == [f"k{i % 3}" for i in range(30)]
    assert [m.properties for m in got] == [{"i": str(i)} for i in range(30)]
    assert [m.event_time_ms for m in got] == [100 + i for i in range(30)]
    assert [m.sequence_id for m in got] == list(range(30))
    if batching:
        assert any(mid.batch_index > 0 for mid in sent)
    else:
        assert all(mid.batch_index == -1 for mid in sent)
    for m in got:
        await consumer.acknowledge(m)


async def test_async_for_and_receive_timeout(mclient: Client) -> None:
    topic = topic_name("mc-iter")
    consumer = await _consumer(mclient, topic)
    producer = await _producer(mclient, topic)
    for i in range(3):
        await producer.send(bytes([i]))
    seen = []
    async for msg in consumer:
        seen.append(msg.data)
        if len(seen) == 3:
            break
    assert seen == [b"\x00", b"\x01", b"\x02"]
    with pytest.raises(errors.OperationTimeout):
        await consumer.receive(timeout_ms=100)


async def test_unacked_messages_come_back_after_resubscribe(mclient: Client) -> None:
    topic = topic_name("mc-ack")
    consumer = await _consumer(mclient, topic)
    producer = await _producer(mclient, topic, batching=True)
    for i in range(6):
        producer.send_nowait(str(i).encode())
    await producer.flush()
    got = [await consumer.receive(RECEIVE_MS) for _ in range(6)]
    for m in got[:4]:  # a partly acked batch: the whole entry stays unacked
        await consumer.acknowledge(m)
    await consumer.close()
    consumer = await _consumer(mclient, topic)
    again = [await consumer.receive(RECEIVE_MS) for _ in range(6)]
    assert [m.data for m in again] == [str(i).encode() for i in range(6)]
    await consumer.close()


async def test_cumulative_ack_and_not_on_shared(mclient: Client) -> None:
    topic = topic_name("mc-cum")
    consumer = await _consumer(mclient, topic)
    producer = await _producer(mclient, topic)
    for i in range(5):
        await producer.send(str(i).encode())
    got = [await consumer.receive(RECEIVE_MS) for _ in range(5)]
    await consumer.acknowledge_cumulative(got[2])
    await consumer.close()
    consumer = await _consumer(mclient, topic)
    assert (await consumer.receive(RECEIVE_MS)).data == b"3"
    shared = await _consumer(mclient, topic, "shared-sub", subscription_type="shared")
    msg = await shared.receive(RECEIVE_MS)
    with pytest.raises(errors.CumulativeAckNotAllowed):
        await shared.acknowledge_cumulative(msg)


def _stats(broker: BrokerProcess, topic: str) -> dict[str, Any]:
    name = topic.removeprefix("persistent://")
    with urllib.request.urlopen(f"{broker.web_url}/admin/v2/persistent/{name}/stats", timeout=30) as resp:
        stats: dict[str, Any] = json.load(resp)
        return stats


async def test_cumulative_ack_with_receipt_is_applied_when_it_returns(mclient: Client, broker: BrokerProcess) -> None:
    topic = topic_name("mc-receipt")
    consumer = await _consumer(mclient, topic, ack_group_time_ms=600_000)  # a grouped ack would wait 10 minutes
    producer = await _producer(mclient, topic)
    for i in range(5):
        await producer.send(str(i).encode())
    got = [await consumer.receive(RECEIVE_MS) for _ in range(5)]
    await consumer.acknowledge_cumulative(got[2], receipt=True)
    stats = await asyncio.to_thread(_stats, broker, topic)
    assert stats["subscriptions"]["sub"]["msgBacklog"] == 2


async def test_batch_index_ack_is_kept_by_the_broker(mclient: Client) -> None:
    topic = topic_name("mc-bia")
    consumer = await _consumer(mclient, topic, batch_index_ack=True)
    producer = await _producer(mclient, topic, batching=True)
    for i in range(4):
        producer.send_nowait(str(i).encode())
    await producer.flush()
    got = [await consumer.receive(RECEIVE_MS) for _ in range(4)]
    await consumer.acknowledge(got[0])
    await consumer.acknowledge(got[2])
    await consumer.close()
    consumer = await _consumer(mclient, topic, batch_index_ack=True)
    again = [await consumer.receive(RECEIVE_MS) for _ in range(2)]
    assert [m.data for m in again] == [b"1", b"3"]


async def test_negative_ack_redelivers_with_count_then_dead_letters(mclient: Client) -> None:
    topic = topic_name("mc-dlq")
    policy = DeadLetterPolicy(max_redeliver_count=2)
    consumer = await _consumer(mclient, topic, subscription_type="shared", negative_ack_delay_ms=100,
                               dead_letter_policy=policy)
    dlq = await _consumer(mclient, f"{topic}-sub-DLQ", "dlq-sub")
    producer = await _producer(mclient, topic)
    mid = await producer.send(b"poison", key="pk", properties={"p": "v"})
    counts = []
    for _ in range(3):
        msg = await consumer.receive(RECEIVE_MS)
        counts.append(msg.redelivery_count)
        consumer.negative_acknowledge(msg)
    assert counts == [0, 1, 2]
    dead = await dlq.receive(RECEIVE_MS)
    assert dead.data == b"poison" and dead.key == "pk"
    assert dead.properties == {"p": "v", "ORIGIN_MESSAGE_ID": str(mid), "REAL_TOPIC": topic}
    with pytest.raises(errors.OperationTimeout):
        await consumer.receive(timeout_ms=500)


async def test_seek_by_id_and_by_time(mclient: Client) -> None:
    topic = topic_name("mc-seek")
    consumer = await _consumer(mclient, topic)
    producer = await _producer(mclient, topic)
    ids = [await producer.send(str(i).encode()) for i in range(5)]
    got = [await consumer.receive(RECEIVE_MS) for _ in range(5)]
    await consumer.acknowledge_cumulative(got[-1])
    await consumer.seek(ids[1])
    assert (await consumer.receive(RECEIVE_MS)).data == b"2"  # the seek id itself is exclusive
    await consumer.seek(got[3].publish_time_ms)
    assert (await consumer.receive(RECEIVE_MS)).publish_time_ms >= got[3].publish_time_ms


async def test_reader_start_end_and_inclusive(mclient: Client) -> None:
    topic = topic_name("mc-read")
    producer = await _producer(mclient, topic, batching=True)
    for i in range(5):
        producer.send_nowait(str(i).encode())
    await producer.flush()
    ids = [await producer.send(str(i).encode()) for i in range(5, 8)]
    assert [m.data async for m in mclient.read(topic)] == [str(i).encode() for i in range(8)]
    assert [m.data async for m in mclient.read(topic, start=ids[0], end=ids[1])] == [b"6"]
    assert [m.data async for m in mclient.read(topic, start=ids[0], inclusive=True)] == [b"5", b"6", b"7"]
    reader = await mclient.create_reader(topic, "latest")
    assert not await reader.has_message_available()
    await producer.send(b"new")
    assert (await reader.read_next(RECEIVE_MS)).data == b"new"
    empty = topic_name("mc-read-empty")
    await _producer(mclient, empty)
    assert [m async for m in mclient.read(empty)] == []


async def test_shared_subscription_spreads_and_exclusive_is_busy(mclient: Client) -> None:
    topic = topic_name("mc-types")
    a = await _consumer(mclient, topic, "s", subscription_type="shared", receiver_queue_size=10)
    b = await _consumer(mclient, topic, "s", subscription_type="shared", receiver_queue_size=10)
    producer = await _producer(mclient, topic)
    for i in range(40):
        producer.send_nowait(str(i).encode())
    await producer.flush()
    seen: list[bytes] = []
    counts = {}
    for name, c in (("a", a), ("b", b)):
        n = 0
        while True:
            try:
                msg = await c.receive(timeout_ms=300)
            except errors.OperationTimeout:
                break
            await c.acknowledge(msg)
            seen.append(msg.data)
            n += 1
        counts[name] = n
    assert sorted(seen, key=int) == [str(i).encode() for i in range(40)]
    assert counts["a"] > 0 and counts["b"] > 0
    await _consumer(mclient, topic, "ex")
    with pytest.raises(errors.ConsumerBusy):
        await _consumer(mclient, topic, "ex")
    failover = await _consumer(mclient, topic, "fo", subscription_type="failover")
    assert (await failover.receive(RECEIVE_MS)).data == b"0"


async def test_many_pending_sends_respect_the_queue_limit(mclient: Client) -> None:
    topic = topic_name("mc-pending")
    producer = await _producer(mclient, topic, max_pending_messages=10, block_if_queue_full=False)
    futures = [producer.send_nowait(b"x") for _ in range(10)]
    with pytest.raises(errors.ProducerQueueIsFull):
        producer.send_nowait(b"x")
    await asyncio.gather(*futures)
    blocking = await _producer(mclient, topic, max_pending_messages=5)
    ids = await asyncio.gather(*(blocking.send(b"y") for _ in range(50)))
    assert len(set(ids)) == 50


async def test_message_too_big_and_closed_errors(mclient: Client) -> None:
    topic = topic_name("mc-big")
    producer = await _producer(mclient, topic)
    with pytest.raises(errors.MessageTooBig):
        await producer.send(b"x" * (6 * 1024 * 1024))
    await producer.close()
    with pytest.raises(errors.AlreadyClosed):
        await producer.send(b"x")


async def test_sequence_ids_continue_for_a_named_producer(mclient: Client) -> None:
    topic = topic_name("mc-seq")
    producer = await _producer(mclient, topic, producer_name="named")
    for _ in range(3):
        await producer.send(b"x")
    await producer.close()
    again = await _producer(mclient, topic, producer_name="named")
    assert again.last_sequence_id == 2
    await again.send(b"y")
    consumer = await _consumer(mclient, topic)
    seqs = [(await consumer.receive(RECEIVE_MS)).sequence_id for _ in range(4)]
    assert seqs == [0, 1, 2, 3]
    assert MessageId(1, 2) > MessageId(1, 1)
