"""Locks and leader election on the in-memory store, whose session a test ends with ``expire_session``
(the same code runs on ZooKeeper: tests/component/zookeeper/test_zk_coordination.py)."""

from __future__ import annotations

import pytest

from magnetar.metadata import BadVersion, MemoryMetadataStore, MetadataError
from magnetar.metadata.coordination import Ownership, SessionEvent
from magnetar.metadata.election import ElectionState, LeaderElection
from magnetar.metadata.locks import LockBusy, LockManager, LockState, ResourceLock
from tests.zk_server import Events


async def test_ephemeral_and_sequential_keys() -> None:
    store = MemoryMetadataStore()
    a = await store.create("/locks/a", b"x", ephemeral=True)
    assert (await store.get_owned("/locks/a")) == (a, Ownership.THIS_SESSION)
    with pytest.raises(BadVersion):
        await store.create("/locks/a", b"y", ephemeral=True)
    with pytest.raises(MetadataError, match="ephemeral"):
        await store.put("/locks/a/child", b"1")
    first = await store.create("/ids/id-", b"", sequential=True)
    second = await store.create("/ids/id-", b"", sequential=True)
    assert (first.key, second.key) == ("/ids/id-0000000000", "/ids/id-0000000001")
    persistent = await store.put("/p", b"1")
    assert (await store.get_owned("/p")) == (persistent, Ownership.PERSISTENT)
    session = Events()
    store.listen(session)
    await store.expire_session()
    assert await store.get("/locks/a") is None, "an ephemeral key goes with its session"
    assert session.items == [SessionEvent.SESSION_LOST, SessionEvent.SESSION_REESTABLISHED]


async def test_a_lock_is_exclusive_and_released() -> None:
    store = MemoryMetadataStore()
    locks = LockManager(store, "/namespace")
    lock = await locks.acquire("/namespace/t/ns/0x0_0x1", b"broker-1")
    with pytest.raises(LockBusy):
        await locks.acquire("/namespace/t/ns/0x0_0x1", b"broker-1")
    await lock.release()
    assert lock.state is LockState.RELEASED and lock.expired.done()
    assert await store.get("/namespace/t/ns/0x0_0x1") is None
    again = await locks.acquire("/namespace/t/ns/0x0_0x1", b"broker-1")
    await again.update_value(b"broker-1 v2")
    assert await locks.read("/namespace/t/ns/0x0_0x1") == b"broker-1 v2"
    await locks.close()
    assert await store.get("/namespace/t/ns/0x0_0x1") is None


async def test_a_lock_whose_key_another_session_took_is_reported_lost() -> None:
    store = MemoryMetadataStore()
    other = store.another_session()
    lost: list[ResourceLock] = []
    locks = LockManager(store, "/namespace", on_lost=lost.append)
    lock = await locks.acquire("/namespace/b", b"broker-1")
    with pytest.raises(LockBusy):
        await LockManager(other, "/namespace").acquire("/namespace/b", b"broker-2")
    # Our session ends; before our revalidation (a task) runs, the other broker takes the bundle (the
    # memory store's operations never suspend, so nothing else runs in between).
    await store.expire_session()
    await LockManager(other, "/namespace").acquire("/namespace/b", b"broker-2")
    await locks.revalidations_done(timeout_s=5)
    assert lost == [lock] and lock.state is LockState.LOST and lock.expired.done()
    assert await locks.read("/namespace/b") == b"broker-2"
    await locks.close()
    assert await locks.read("/namespace/b") == b"broker-2", "a lost lock is not ours to delete"


async def test_a_lock_is_taken_again_after_its_session_expired() -> None:
    store = MemoryMetadataStore()
    locks = LockManager(store, "/namespace")
    lock = await locks.acquire("/namespace/b", b"broker-1")
    await store.expire_session()
    await locks.revalidations_done(timeout_s=5)
    assert lock.held
    assert (await store.get_owned("/namespace/b"))[1] is Ownership.THIS_SESSION  # type: ignore[index]
    await locks.close()


async def test_our_value_left_by_an_older_session_is_replaced() -> None:
    store = MemoryMetadataStore()
    before_restart = store.another_session()
    await before_restart.create("/namespace/b", b"broker-1", ephemeral=True)
    await before_restart.create("/namespace/c", b"broker-2", ephemeral=True)
    locks = LockManager(store, "/namespace")
    lock = await locks.acquire("/namespace/b", b"broker-1")
    assert lock.held and (await store.get_owned("/namespace/b"))[1] is Ownership.THIS_SESSION  # type: ignore[index]
    with pytest.raises(LockBusy):
        await locks.acquire("/namespace/c", b"broker-1")
    await locks.close()


async def test_election_leads_follows_and_fails_over() -> None:
    store = MemoryMetadataStore()
    first_states, second_states = Events(), Events()
    first = LeaderElection(store, b"broker-1", on_change=first_states)
    second = LeaderElection(store, b"broker-2", on_change=second_states)
    assert await first.start() is ElectionState.LEADING
    assert await second.start() is ElectionState.FOLLOWING
    assert second.leader == b"broker-1" and await second.read_leader() == b"broker-1"
    await first.close()
    await second_states.until(lambda items: ElectionState.LEADING in items, timeout_s=5)
    assert await second.read_leader() == b"broker-2"
    await second.close()
    assert await store.get("/loadbalance/leader") is None


async def test_a_closed_session_takes_its_ephemeral_keys_and_the_follower_leads() -> None:
    store = MemoryMetadataStore()
    other = store.another_session()
    states = Events()
    leader = LeaderElection(store, b"broker-1")
    follower = LeaderElection(other, b"broker-2", on_change=states)
    await leader.start()
    assert await follower.start() is ElectionState.FOLLOWING
    await store.close()  # the leader's process ends without resigning
    await states.until(lambda items: ElectionState.LEADING in items, timeout_s=5)
    await follower.close()


async def test_a_leader_steps_down_when_its_session_is_lost_and_elects_again() -> None:
    store = MemoryMetadataStore()
    states = Events()
    election = LeaderElection(store, b"broker-1", on_change=states)
    await election.start()
    await store.expire_session()
    await states.until(lambda items: items[-2:] == [ElectionState.NO_LEADER, ElectionState.LEADING], timeout_s=5)
    await election.close()
