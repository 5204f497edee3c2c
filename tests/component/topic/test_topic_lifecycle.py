"""A topic's lifecycle through the registry, over the TopicHarness (no socket): load, the listener fan-out,
unload and delete through one close path, what a closing topic refuses, and a get racing a close."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from magnetar.broker.errors import ServiceNotReady, TopicNotFound
from magnetar.broker.names import TopicName
from magnetar.broker.topic.listener import TopicListener
from magnetar.broker.topic.persistent import PersistentTopic
from magnetar.broker.topic.state import CloseReason, TopicState
from tests.topic_harness import T, TopicHarness


class Recorder(TopicListener):
    def __init__(self, fail_load: bool = False) -> None:
        self.events: list[tuple[str, str, str]] = []
        self.fail_load = fail_load

    async def topic_loaded(self, topic: PersistentTopic) -> None:
        self.events.append(("loaded", str(topic.name), topic.state.value))
        if self.fail_load:
            raise RuntimeError("this feature cannot serve the topic")

    async def topic_closing(self, topic: PersistentTopic, reason: CloseReason) -> None:
        # clients are already closed; the ledger is not yet
        self.events.append(("closing", reason.value, topic.state.value))

    async def unloaded_topic_deleting(self, topic: TopicName, cursors: list[str]) -> None:
        self.events.append(("deleting unloaded", str(topic), ",".join(sorted(cursors))))


class Gate(TopicListener):
    """Holds a topic's close in its middle until released."""

    def __init__(self) -> None:
        self.entered, self.release = asyncio.Event(), asyncio.Event()

    async def topic_closing(self, topic: PersistentTopic, reason: CloseReason) -> None:
        self.entered.set()
        await self.release.wait()


@pytest.fixture
async def harness() -> AsyncIterator[TopicHarness]:
    h = await TopicHarness.start()
    try:
        yield h
    finally:
        await h.close()


async def test_unload_closes_clients_and_the_next_get_loads_the_topic_afresh(harness: TopicHarness) -> None:
    recorder = Recorder()
    harness.registry.add_listener(recorder)
    topic = await harness.topic("unload")
    producer = await harness.producer(topic)
    await harness.send(topic, producer, 0, b"m0")
    consumer = await harness.subscribe(topic, "sub")
    assert await harness.received(consumer, 1) == [b"m0"]

    assert await harness.registry.unload(topic.name)

    assert topic.state is TopicState.CLOSED and topic.close_reason is CloseReason.MOVING
    assert str(topic.name) not in harness.registry.loaded
    assert len(producer.endpoint.commands(T.CLOSE_PRODUCER)) == 1  # type: ignore[attr-defined]
    assert len(consumer.endpoint.commands(T.CLOSE_CONSUMER)) == 1  # type: ignore[attr-defined]
    assert recorder.events == [("loaded", str(topic.name), "active"), ("closing", "moving", "closing")]
    reloaded = await harness.topic("unload", create=False)
    assert reloaded is not topic and reloaded.state is TopicState.ACTIVE
    assert reloaded.last_sequence_id("p") == 0  # deduplication recovered from the ledger
    again = await harness.subscribe(reloaded, "sub")
    assert await harness.received(again, 1) == [b"m0"]  # the message was never acknowledged


async def test_a_closing_topic_refuses_new_clients_with_look_it_up_again(harness: TopicHarness) -> None:
    topic = await harness.topic("closing")
    assert topic.begin_closing(CloseReason.MOVING)
    with pytest.raises(ServiceNotReady, match="look it up again"):
        await harness.producer(topic)
    with pytest.raises(ServiceNotReady, match="look it up again"):
        await harness.subscribe(topic, "sub")
    assert not topic.begin_closing(CloseReason.DELETED)  # closes once, for the first reason
    await topic.close()
    assert topic.state is TopicState.CLOSED and topic.close_reason is CloseReason.MOVING


async def test_delete_tells_every_listener_and_removes_the_ledger(harness: TopicHarness) -> None:
    recorder = Recorder()
    harness.registry.add_listener(recorder)
    loaded = await harness.topic("gone")
    await harness.subscribe(loaded, "sub")
    await harness.topic("cold")
    assert await harness.registry.unload(harness.name("cold"))

    assert await harness.registry.delete(loaded.name, force=True)
    assert await harness.registry.delete(harness.name("cold"), force=False)  # not loaded: not loaded for this

    assert loaded.state is TopicState.CLOSED and loaded.close_reason is CloseReason.DELETED
    assert ("closing", "deleted", "closing") in recorder.events
    assert ("deleting unloaded", str(harness.name("cold")), "") in recorder.events
    assert not await harness.ledgers.exists(loaded.name.managed_ledger_name)
    assert not await harness.ledgers.exists(harness.name("cold").managed_ledger_name)
    with pytest.raises(TopicNotFound):
        await harness.topic("gone", create=False)
    assert not await harness.registry.delete(loaded.name, force=True)  # nothing left to delete


async def test_a_get_during_a_close_waits_for_it_and_loads_a_new_topic(harness: TopicHarness) -> None:
    gate = Gate()
    harness.registry.add_listener(gate)
    topic = await harness.topic("race")
    producer = await harness.producer(topic)
    await harness.send(topic, producer, 0, b"before")

    unloading = asyncio.ensure_future(harness.registry.unload(topic.name))
    async with asyncio.timeout(5):
        await gate.entered.wait()  # the close is under way: the topic is closing, still in the map
    assert topic.state is TopicState.CLOSING and harness.registry.loaded[str(topic.name)] is topic
    getting = asyncio.ensure_future(harness.topic("race", create=False))
    await asyncio.sleep(0)
    assert not getting.done()  # waits for the close: never two topics over one managed ledger
    gate.release.set()

    assert await unloading
    reloaded = await getting
    assert topic.state is TopicState.CLOSED
    assert reloaded is not topic and reloaded.state is TopicState.ACTIVE
    assert harness.registry.loaded[str(topic.name)] is reloaded


async def test_a_listener_that_fails_the_load_gets_the_topic_closed_again(harness: TopicHarness) -> None:
    recorder = Recorder(fail_load=True)
    harness.registry.add_listener(recorder)
    with pytest.raises(RuntimeError, match="cannot serve"):
        await harness.topic("refused")
    assert "persistent://public/default/refused" not in harness.registry.loaded
    assert [e[0] for e in recorder.events] == ["loaded", "closing"]
    recorder.fail_load = False
    assert (await harness.topic("refused", create=False)).state is TopicState.ACTIVE  # the ledger was closed
