"""Sessions, ephemeral keys, locks and leader election on a real ZooKeeper; a broker's link is cut through
a proxy until the server expires its session."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from magnetar.metadata import BadVersion, EventKind, MetadataError, WatchEvent
from magnetar.metadata.coordination import Ownership, SessionEvent
from magnetar.metadata.election import ElectionState, LeaderElection
from magnetar.metadata.locks import LockBusy, LockManager, LockState, ResourceLock
from magnetar.metadata.zookeeper import ZooKeeperMetadataStore
from tests.zk_server import Events, TcpProxy, ZooKeeperServer, unique_chroot

SESSION_MS = 2000  # short: the tests wait for the server to expire it
WAIT_S = 30.0


async def _open(hosts: str, chroot: str, session_timeout_ms: int = SESSION_MS) -> ZooKeeperMetadataStore:
    return await ZooKeeperMetadataStore(hosts, chroot=chroot, session_timeout_ms=session_timeout_ms,
                                        operation_timeout_s=30.0).start()


async def _gone(store: ZooKeeperMetadataStore, key: str) -> None:
    """Wait (bounded) until ``key`` is deleted, as told by a watch."""
    events = Events()
    unwatch = store.watch(key, events)
    try:
        await store.watches_in_place()
        if await store.exists(key):
            await events.until(lambda items: WatchEvent(key, EventKind.DELETED) in items, WAIT_S)
    finally:
        unwatch()


async def test_ephemeral_and_sequential_keys(zk_server: ZooKeeperServer) -> None:
    chroot = unique_chroot()
    a, b = await _open(zk_server.hosts, chroot), await _open(zk_server.hosts, chroot)
    try:
        created = await a.create("/loadbalance/brokers/b1:6650", b'{"pulsarServiceUrl": "x"}', ephemeral=True)
        assert (await a.get_owned(created.key)) == (created, Ownership.THIS_SESSION)
        assert (await b.get_owned(created.key))[1] is Ownership.OTHER_SESSION  # type: ignore[index]
        with pytest.raises(BadVersion):
            await b.create(created.key, b"other", ephemeral=True)
        with pytest.raises(MetadataError, match="ephemeral"):
            await b.put(created.key + "/child", b"1")
        first = await a.create("/counters/id-", b"", sequential=True)
        second = await b.create("/counters/id-", b"", sequential=True)
        assert first.key.startswith("/counters/id-") and len(first.key) == len("/counters/id-") + 10
        assert second.key > first.key
        assert (await a.get_owned(first.key))[1] is Ownership.PERSISTENT  # type: ignore[index]
        await a.close()
        assert await b.get(created.key) is None, "a closed session's ephemeral keys go at once"
        assert await b.get(first.key) is not None
    finally:
        await a.close()
        await b.close()


async def test_session_expiry_is_told_and_a_lock_taken_meanwhile_is_lost(
    zk_server: ZooKeeperServer, zk_proxy: TcpProxy
) -> None:
    chroot = unique_chroot()
    cut_off = await _open(zk_proxy.hosts, chroot)
    other = await _open(zk_server.hosts, chroot)
    lost: list[ResourceLock] = []
    session = Events()
    cut_off.listen(session)
    locks = LockManager(cut_off, "/namespace", on_lost=lost.append)
    other_locks = LockManager(other, "/namespace")
    try:
        lock = await locks.acquire("/namespace/public/default/0x00000000_0x40000000", b"broker-1")
        with pytest.raises(LockBusy):
            await other_locks.acquire(lock.key, b"broker-2")
        zk_proxy.cut()
        await session.until(lambda items: SessionEvent.SESSION_LOST in items, WAIT_S)
        await _gone(other, lock.key)  # the server expired broker-1's session
        await other_locks.acquire(lock.key, b"broker-2")
        assert lock.held, "nobody could tell broker-1 yet"
        zk_proxy.restore()
        await session.until(lambda items: SessionEvent.SESSION_REESTABLISHED in items, WAIT_S)
        await asyncio.wait_for(asyncio.shield(lock.expired), WAIT_S)
        assert lost == [lock] and lock.state is LockState.LOST
        assert await locks.read(lock.key) == b"broker-2"
        assert session.items[:2] == [SessionEvent.CONNECTION_LOST, SessionEvent.SESSION_LOST]
    finally:
        await locks.close()
        await other_locks.close()
        await cut_off.close()
        await other.close()


async def test_a_lock_is_taken_again_after_its_session_expired(
    zk_server: ZooKeeperServer, zk_proxy: TcpProxy
) -> None:
    chroot = unique_chroot()
    cut_off = await _open(zk_proxy.hosts, chroot)
    watcher = await _open(zk_server.hosts, chroot)
    session = Events()
    cut_off.listen(session)
    locks = LockManager(cut_off, "/namespace")
    try:
        lock = await locks.acquire("/namespace/t/ns/0x0_0x1", b"broker-1")
        zk_proxy.cut()
        await _gone(watcher, lock.key)
        zk_proxy.restore()
        await session.until(lambda items: SessionEvent.SESSION_REESTABLISHED in items, WAIT_S)
        await locks.revalidations_done(WAIT_S)
        assert lock.held
        found = await cut_off.get_owned(lock.key)
        assert found is not None and found[0].value == b"broker-1" and found[1] is Ownership.THIS_SESSION
    finally:
        await locks.close()
        await cut_off.close()
        await watcher.close()


async def test_leader_fails_over_when_the_leaders_session_ends(
    zk_server: ZooKeeperServer, zk_proxy: TcpProxy
) -> None:
    chroot = unique_chroot()
    leader_store = await _open(zk_proxy.hosts, chroot)
    follower_store = await _open(zk_server.hosts, chroot)
    leader_states, follower_states = Events(), Events()
    leader = LeaderElection(leader_store, b"http://b1:8080", on_change=leader_states)
    follower = LeaderElection(follower_store, b"http://b2:8080", on_change=follower_states)
    try:
        assert await leader.start() is ElectionState.LEADING
        assert await follower.start() is ElectionState.FOLLOWING
        assert follower.leader == b"http://b1:8080"
        zk_proxy.cut()
        await leader_states.until(lambda items: ElectionState.NO_LEADER in items, WAIT_S)
        await follower_states.until(lambda items: ElectionState.LEADING in items, WAIT_S)
        assert await follower.read_leader() == b"http://b2:8080"
        zk_proxy.restore()
        await leader_states.until(lambda items: items[-1] is ElectionState.FOLLOWING, WAIT_S)
        assert leader.leader == b"http://b2:8080"
    finally:
        await leader.close()
        await follower.close()
        await leader_store.close()
        await follower_store.close()


async def test_ledger_ids_from_zookeeper_ascend_across_brokers(zk_server: ZooKeeperServer) -> None:
    from magnetar.ledger.id_counter import MetadataLedgerIdAllocator

    chroot = unique_chroot()
    stores = [await _open(zk_server.hosts, chroot, 10_000) for _ in range(3)]
    try:
        allocators = [MetadataLedgerIdAllocator(s) for s in stores]
        ticks = itertools.count()
        calls: list[tuple[int, int, int]] = []  # (started, ended, id) in one order of events

        async def allocate(allocator: MetadataLedgerIdAllocator) -> None:
            for _ in range(30):
                started = next(ticks)
                allocated = await allocator.next_id()
                calls.append((started, next(ticks), allocated))

        await asyncio.gather(*(allocate(a) for a in allocators))
        assert sorted(c[2] for c in calls) == list(range(1, 91)), "unique across brokers"
        disordered = [(a, b) for a in calls for b in calls if a[1] < b[0] and a[2] >= b[2]]
        assert not disordered, "an id handed out after another returned must be larger"
    finally:
        for s in stores:
            await s.close()
