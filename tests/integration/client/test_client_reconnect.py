"""magnetar.client across a broker restart: pending sends are resent, consumers re-subscribe,
nothing is lost and nothing acknowledged comes back."""

from __future__ import annotations

import asyncio

from magnetar.client import Client, Consumer, Producer
from tests.integration.broker_process import BrokerProcess
from tests.integration.client.conftest import topic_name

WAIT_S = 30


async def test_restart_resends_pending_and_resubscribes(fresh_broker: BrokerProcess) -> None:
    topic = topic_name("mc-restart")
    async with Client(fresh_broker.url, operation_timeout_ms=10_000, backoff_max_ms=500) as mc:
        consumer = await mc.subscribe(topic, "sub", initial_position="earliest")
        producer = await mc.create_producer(topic, batching=True, batching_max_delay_ms=5)
        assert isinstance(producer, Producer) and isinstance(consumer, Consumer)
        before = [await producer.send(f"a{i}".encode()) for i in range(10)]
        first = [await consumer.receive(5_000) for _ in range(10)]
        for m in first:
            await consumer.acknowledge(m)
        consumer.flush_acknowledgements()  # acked before the restart: must not come back
        await asyncio.to_thread(fresh_broker.stop)
        pending = [producer.send_nowait(f"b{i}".encode()) for i in range(10)]  # while the broker is down
        await asyncio.to_thread(fresh_broker.start)
        after = await asyncio.wait_for(asyncio.gather(*pending), WAIT_S)
        assert len(set(before + after)) == 20
        got = []
        while len(got) < 10:  # bounded by the receive timeout
            m = await consumer.receive(WAIT_S * 1000)
            got.append(m.data)
            await consumer.acknowledge(m)
        assert got == [f"b{i}".encode() for i in range(10)]
