"""The PIP-68 producer-access state machine, including races, without a network."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from magnetar.broker.errors import MetadataError, ProducerBusy, ProducerFenced
from magnetar.broker.topic.access import AccessState, Granted, ProducerAccess, Queued
from magnetar.broker.topic.producer import AccessMode, Producer

WAIT_S = 5.0


class Epochs:
    """An epoch store whose writes can be held open, to create races on purpose."""

    def __init__(self) -> None:
        self.epoch: int | None = None
        self.writes: list[int] = []
        self.gate: asyncio.Event | None = None
        self.writing = asyncio.Event()  # set when a write starts (and waits at the gate)
        self.fail_next = False

    def current_epoch(self) -> int | None:
        return self.epoch

    async def persist_epoch(self, epoch: int) -> None:
        self.writing.set()
        if self.gate is not None:
            await asyncio.wait_for(self.gate.wait(), WAIT_S)
        if self.fail_next:
            self.fail_next = False
            raise MetadataError("metadata store unavailable")
        self.writes.append(epoch)
        self.epoch = epoch


class Endpoint:
    remote_address = "test"
    client_version = "test"
    protocol_version = 20
    connected_since_ms = 0
    is_open = True

    def send_frame(self, frame: bytes) -> None:
        pass

    def send_frame_parts(self, head: bytes, payload: bytes) -> None:
        pass

    def forget_producer(self, producer_id: int) -> None:
        pass

    def forget_consumer(self, consumer_id: int) -> None:
        pass

    async def drain(self) -> None:
        pass

    def has_output_room(self) -> bool:
        return True

    def output_turn(self) -> contextlib.AbstractAsyncContextManager[None]:
        return contextlib.nullcontext()

    def output_turn_if_free(self) -> contextlib.AbstractAsyncContextManager[bool]:
        return contextlib.nullcontext(True)


def producer(name: str, mode: AccessMode) -> Producer:
    return Producer(
        endpoint=Endpoint(), producer_id=0, name=name, topic_name="t", partition=-1, epoch=0,
        access_mode=mode, user_provided_name=True, created_ms=0,
    )


def access() -> tuple[ProducerAccess, Epochs, list[Producer]]:
    epochs = Epochs()
    fenced: list[Producer] = []
    return ProducerAccess(epochs, fenced.append), epochs, fenced


async def test_each_row_of_the_table() -> None:
    acc, epochs, _ = access()
    assert await acc.admit(producer("s1", AccessMode.SHARED), None) == Granted(None)
    with pytest.raises(ProducerFenced):
        await acc.admit(producer("x", AccessMode.EXCLUSIVE), None)
    acc.release(next(iter(acc.shared)))
    assert acc.state is AccessState.IDLE
    assert await acc.admit(producer("x", AccessMode.EXCLUSIVE), None) == Granted(0)
    with pytest.raises(ProducerBusy):
        await acc.admit(producer("s2", AccessMode.SHARED), None)
    with pytest.raises(ProducerFenced):
        await acc.admit(producer("x2", AccessMode.EXCLUSIVE), None)
    assert epochs.writes == [0]


async def test_waiters_are_promoted_in_order_with_new_epochs() -> None:
    acc, epochs, _ = access()
    holder = producer("h", AccessMode.EXCLUSIVE)
    await acc.admit(holder, None)
    waiters = [producer(f"w{i}", AccessMode.WAIT_FOR_EXCLUSIVE) for i in range(3)]
    queued = [await acc.admit(w, None) for w in waiters]
    assert all(isinstance(q, Queued) for q in queued)
    futures = [q.promoted for q in queued if isinstance(q, Queued)]
    current = holder
    for i, future in enumerate(futures):
        acc.release(current)
        assert await asyncio.wait_for(future, WAIT_S) == i + 1
        assert acc.holder is waiters[i]
        assert not any(f.done() for f in futures[i + 1 :])
        current = waiters[i]
    assert epochs.writes == [0, 1, 2, 3]


async def test_waiter_behind_shared_producers_is_promoted_when_the_last_one_leaves() -> None:
    acc, _, _ = access()
    shared = [producer(f"s{i}", AccessMode.SHARED) for i in range(2)]
    for p in shared:
        await acc.admit(p, None)
    queued = await acc.admit(producer("w", AccessMode.WAIT_FOR_EXCLUSIVE), None)
    assert isinstance(queued, Queued)
    acc.release(shared[0])
    assert not queued.promoted.done()
    acc.release(shared[1])
    assert await asyncio.wait_for(queued.promoted, WAIT_S) == 0


async def test_fencing_closes_everyone_and_fails_waiters() -> None:
    acc, _, fenced = access()
    holder = producer("h", AccessMode.EXCLUSIVE)
    await acc.admit(holder, None)
    queued = await acc.admit(producer("w", AccessMode.WAIT_FOR_EXCLUSIVE), None)
    assert isinstance(queued, Queued)
    fencer = producer("f", AccessMode.EXCLUSIVE_WITH_FENCING)
    assert await acc.admit(fencer, None) == Granted(1)
    assert fenced == [holder] and holder.fenced
    with pytest.raises(ProducerFenced):
        await asyncio.wait_for(queued.promoted, WAIT_S)
    with pytest.raises(ProducerFenced):  # the fenced holder reconnecting with its old epoch
        await acc.admit(producer("h", AccessMode.EXCLUSIVE), 0)


async def test_two_takeovers_at_once_only_one_wins() -> None:
    acc, epochs, _ = access()
    epochs.gate = asyncio.Event()
    first = asyncio.ensure_future(acc.admit(producer("a", AccessMode.EXCLUSIVE), None))
    second = asyncio.ensure_future(acc.admit(producer("b", AccessMode.EXCLUSIVE), None))
    with pytest.raises(ProducerFenced):  # refused while the first one's epoch is being written
        await asyncio.wait_for(second, WAIT_S)
    epochs.gate.set()
    assert await asyncio.wait_for(first, WAIT_S) == Granted(0)
    assert epochs.writes == [0]


async def test_close_during_promotion_passes_the_topic_on() -> None:
    acc, epochs, _ = access()
    holder = producer("h", AccessMode.EXCLUSIVE)
    await acc.admit(holder, None)
    w1, w2 = producer("w1", AccessMode.WAIT_FOR_EXCLUSIVE), producer("w2", AccessMode.WAIT_FOR_EXCLUSIVE)
    q1, q2 = await acc.admit(w1, None), await acc.admit(w2, None)
    assert isinstance(q1, Queued) and isinstance(q2, Queued)
    epochs.gate = asyncio.Event()
    epochs.writing.clear()
    acc.release(holder)  # promotion of w1 starts and waits on the epoch write
    await asyncio.wait_for(epochs.writing.wait(), WAIT_S)
    assert acc.holder is w1
    w1.closed = True
    acc.release(w1)  # w1 goes away mid-promotion
    epochs.gate.set()
    assert await asyncio.wait_for(q2.promoted, WAIT_S) >= 1
    assert acc.holder is w2


async def test_a_failed_epoch_write_refuses_the_producer_and_frees_the_topic() -> None:
    acc, epochs, _ = access()
    epochs.fail_next = True
    with pytest.raises(MetadataError):
        await acc.admit(producer("a", AccessMode.EXCLUSIVE), None)
    assert acc.state is AccessState.IDLE and acc.holder is None
    assert await acc.admit(producer("b", AccessMode.EXCLUSIVE), None) == Granted(0)


async def test_reconnect_with_current_epoch_takes_the_topic_back_without_a_new_epoch() -> None:
    acc, epochs, _ = access()
    p = producer("a", AccessMode.EXCLUSIVE)
    await acc.admit(p, None)
    acc.release(p)
    assert await acc.admit(producer("a", AccessMode.EXCLUSIVE), 0) == Granted(0)
    assert epochs.writes == [0]
