"""magnetar.client's producer access modes (PIP-68) against the real broker."""

from __future__ import annotations

import asyncio

import pytest

from magnetar.client import Client, errors
from tests.integration.broker_process import BrokerProcess
from tests.integration.client.conftest import topic_name

WAIT_S = 15.0


async def read_all(client: Client, topic: str) -> list[bytes]:
    return [m.data async for m in client.read(topic, start="earliest", end="latest")]


async def test_exclusive_refuses_others(mclient: Client) -> None:
    topic = topic_name("c-excl")
    await mclient.create_producer(topic, access_mode="exclusive")
    with pytest.raises(errors.ProducerFenced):
        await mclient.create_producer(topic, access_mode="exclusive")
    with pytest.raises(errors.ProducerBusy):
        await mclient.create_producer(topic)


async def test_wait_for_exclusive_is_promoted_when_the_holder_closes(mclient: Client, broker: BrokerProcess) -> None:
    topic = topic_name("c-wait")
    holder = await mclient.create_producer(topic, access_mode="exclusive")
    waiting = asyncio.ensure_future(mclient.create_producer(topic, access_mode="wait_for_exclusive"))
    queued = await asyncio.to_thread(broker.wait_for_log, f"waiting for exclusive access to {topic}", WAIT_S)
    assert queued and not waiting.done()
    await holder.send(b"holder")
    await holder.close()
    promoted = await asyncio.wait_for(waiting, WAIT_S)
    await promoted.send(b"waiter")
    assert await read_all(mclient, topic) == [b"holder", b"waiter"]


async def test_fencing_takes_the_topic(mclient: Client) -> None:
    topic = topic_name("c-fence")
    holder = await mclient.create_producer(topic, access_mode="exclusive")
    await holder.send(b"before")
    fencer = await mclient.create_producer(topic, access_mode="exclusive_with_fencing")
    await fencer.send(b"after")
    with pytest.raises(errors.PulsarClientError):
        await asyncio.wait_for(holder.send(b"late"), WAIT_S)
    assert await read_all(mclient, topic) == [b"before", b"after"]
