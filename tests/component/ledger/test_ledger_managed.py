"""The managed ledger over the in-memory stores: adds, rollover, ordering, properties, fencing, deletion."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

import pytest
from ledger_world import NAME, WAIT_S, GatedStore, World

from magnetar.ledger.api import (
    InitialPosition,
    InvalidPosition,
    ManagedLedgerClosed,
    ManagedLedgerError,
    ManagedLedgerFenced,
    Position,
)
from magnetar.ledger.factory import LedgerFactory
from magnetar.ledger.formats import decode_ledger, ledger_key
from magnetar.ledger.managed import ManagedLedgerImpl
from magnetar.ledger.states import LedgerState
from magnetar.storage.api import LedgerInfo, StorageIOError
from magnetar.storage.memory import MemoryLedgerStore


async def add_many(ml: ManagedLedgerImpl, count: int, prefix: bytes = b"m") -> list[Position]:
    return [await ml.add_entry(prefix + str(i).encode()) for i in range(count)]


async def read_all(ml: ManagedLedgerImpl) -> list[bytes]:
    cursor = ml.new_non_durable_cursor(ml.first_position(), "reader")
    out: list[bytes] = []
    for _ in range(1000):
        batch = await cursor.read_entries(7)
        if not batch:
            return out
        out.extend(e.data for e in batch)
    raise AssertionError("reader did not finish")


async def test_rollover_by_entries_and_reads_cross_ledgers() -> None:
    world = World(max_entries_per_ledger=3)
    ml = await world.factory().open(NAME)
    positions = await add_many(ml, 10)
    assert [p.entry_id for p in positions] == [0, 1, 2, 0, 1, 2, 0, 1, 2, 0]
    assert positions == sorted(positions) and len(set(positions)) == 10
    assert [x.entries for x in ml.ledgers()] == [3, 3, 3, 1]
    assert ml.number_of_entries() == 10 and ml.entries_added == 10
    assert ml.last_confirmed == positions[-1]
    assert await read_all(ml) == [b"m%d" % i for i in range(10)]
    assert ml.next_valid_position(positions[2]) == positions[3]
    assert (await ml.read_entry(positions[4])).data == b"m4"


async def test_rollover_by_size() -> None:
    world = World(max_size_per_ledger_bytes=10)
    ml = await world.factory().open(NAME)
    await ml.add_entry(b"123456")
    await ml.add_entry(b"123456")  # the ledger reaches 12 bytes: the next add rolls over
    third = await ml.add_entry(b"1")
    assert [x.entries for x in ml.ledgers()] == [2, 1]
    assert third.entry_id == 0 and ml.total_size_bytes() == 13


async def test_rollover_by_age_only_when_not_empty() -> None:
    world = World(max_ledger_rollover_time_ms=1000)
    ml = await world.factory().open(NAME)
    world.clock.advance(5000)
    first = await ml.add_entry(b"a")  # the old current ledger is empty: no rollover
    second = await ml.add_entry(b"b")  # now it is old and not empty
    assert second.ledger_id > first.ledger_id and second.entry_id == 0
    world.clock.advance(999)
    assert (await ml.add_entry(b"c")).ledger_id == second.ledger_id
    world.clock.advance(1)
    fourth = await ml.add_entry(b"d")
    assert fourth.ledger_id > second.ledger_id and fourth.entry_id == 0
    assert [x.entries for x in ml.ledgers()] == [1, 2, 1]


async def test_concurrent_adds_complete_in_call_order_across_rollovers() -> None:
    world = World(max_entries_per_ledger=4)
    gated = GatedStore(world.store)
    factory = LedgerFactory(gated, world.metadata, config=world.config, clock=world.clock)
    ml = await factory.open(NAME)
    completed: list[int] = []

    async def add(i: int) -> Position:
        position = await ml.add_entry(b"%d" % i)
        completed.append(i)
        return position

    tasks = [asyncio.ensure_future(add(i)) for i in range(3)]
    await gated.wait_for_gates(3)  # the three appends reached the store
    assert len(gated.gates) == 3
    for gate in reversed(gated.gates):  # the store finishes them last-first
        gate.set_result(None)
    await asyncio.wait_for(asyncio.gather(*tasks), WAIT_S)
    assert completed == [0, 1, 2]
    more = [asyncio.ensure_future(add(i)) for i in range(3, 30)]
    gated.release_all()
    await asyncio.wait_for(asyncio.gather(*more), WAIT_S)
    positions = [t.result() for t in tasks + more]
    assert completed == list(range(30))
    assert positions == sorted(positions) and len(set(positions)) == 30
    assert [x.entries for x in ml.ledgers()][:-1] == [4] * 7
    assert await read_all(ml) == [b"%d" % i for i in range(30)]


async def test_close_and_reopen_keeps_entries_properties_and_cursors() -> None:
    world = World(max_entries_per_ledger=5)
    factory = world.factory()
    ml = await factory.open(NAME)
    await add_many(ml, 12)
    await ml.set_properties({"pulsar.epoch": "3"})
    cursor = await ml.open_cursor("sub", InitialPosition.EARLIEST)
    cursor.acknowledge_cumulative(Position(ml.ledgers()[0].ledger_id, 3))
    await factory.close()
    assert ml.state is LedgerState.CLOSED
    with pytest.raises(ManagedLedgerClosed):
        await ml.add_entry(b"late")

    again = await world.factory().open(NAME)
    assert again is not ml
    assert again.number_of_entries() == 12 and again.properties == {"pulsar.epoch": "3"}
    assert await read_all(again) == [b"m%d" % i for i in range(12)]
    restored = again.cursors["sub"]
    assert restored.backlog_entries() == 8
    assert [e.data for e in await restored.read_entries(2)] == [b"m4", b"m5"]


async def test_unclean_stop_seals_the_old_ledger_and_keeps_every_entry() -> None:
    world = World(max_entries_per_ledger=5)
    old = await world.factory().open(NAME)
    await add_many(old, 8)  # the record still says the current ledger has 0 entries
    stored = await world.metadata.get(ledger_key(NAME))
    assert stored is not None
    assert [x.entries for x in decode_ledger(stored.value, "t").ledgers] == [5, 0]

    new = await world.factory().open(NAME)  # no close: a crash
    assert [x.entries for x in new.ledgers()] == [5, 3, 0]
    assert (await world.store.info(new.ledgers()[1].ledger_id)).sealed
    assert await read_all(new) == [b"m%d" % i for i in range(8)]
    with pytest.raises(ManagedLedgerFenced):
        await old.add_entry(b"zombie")
    assert old.state is LedgerState.FENCED
    with pytest.raises(ManagedLedgerFenced):
        await old.set_properties({"a": "b"})
    await new.add_entry(b"next")
    assert new.number_of_entries() == 9


async def test_empty_ledger_of_a_previous_run_is_dropped_and_deleted() -> None:
    world = World()
    ml = await world.factory().open(NAME)
    await ml.add_entry(b"one")
    await ml.close()
    second = await world.factory().open(NAME)  # seals the ledger with one entry, creates an empty one
    empty_id = second.ledgers()[-1].ledger_id
    await second.close()
    third = await world.factory().open(NAME)
    ids = [x.ledger_id for x in third.ledgers()]
    assert empty_id not in ids and len(ids) == 2
    assert empty_id not in await world.store.list_ledgers()
    assert third.number_of_entries() == 1


async def test_ledgers_carry_owner_custom_metadata() -> None:
    world = World()
    ml = await world.factory().open(NAME)
    info = await world.store.info(ml.ledgers()[0].ledger_id)
    assert info.custom_metadata == {
        "application": "magnetar",
        "component": "managed-ledger",
        "pulsar/managed-ledger": NAME,
    }


async def test_properties_merge_and_cas_conflict_fences() -> None:
    world = World()
    ml = await world.factory().open(NAME)
    await ml.set_properties({"a": "1"})
    await ml.set_properties({"b": "2"})
    assert ml.properties == {"a": "1", "b": "2"}
    key = ledger_key(NAME)
    stored = await world.metadata.get(key)
    assert stored is not None and decode_ledger(stored.value, key).properties == {"a": "1", "b": "2"}
    await world.metadata.inner.put(key, stored.value)  # someone else writes the record
    with pytest.raises(ManagedLedgerFenced):
        await ml.set_properties({"c": "3"})
    assert ml.properties == {"a": "1", "b": "2"}
    with pytest.raises(ManagedLedgerFenced):
        await ml.add_entry(b"x")
    await ml.close()  # a fenced ledger still closes, without writing
    assert ml.state is LedgerState.CLOSED


async def test_two_openers_the_second_wins() -> None:
    world = World(max_entries_per_ledger=2)
    first = await world.factory().open(NAME)
    await first.add_entry(b"a")
    second = await world.factory().open(NAME)
    with pytest.raises(ManagedLedgerFenced):
        await first.add_entry(b"b")
    with pytest.raises(ManagedLedgerFenced):
        await first.open_cursor("c")
    assert (await second.add_entry(b"b")).ledger_id > 0


async def test_delete_removes_ledgers_cursors_and_metadata() -> None:
    world = World(max_entries_per_ledger=2)
    factory = world.factory()
    ml = await factory.open(NAME)
    await add_many(ml, 5)
    await ml.open_cursor("s1")
    await ml.open_cursor("s/2 %")
    other = await factory.open("public/default/persistent/other")
    await ml.delete()
    assert ml.state is LedgerState.DELETED
    assert not await factory.exists(NAME)
    assert await factory.list_names() == ["public/default/persistent/other"]
    assert await world.store.list_ledgers() == [x.ledger_id for x in other.ledgers()]
    assert [k for k in world.metadata.inner._records if NAME in k] == []
    reopened = await factory.open(NAME)  # a fresh ledger, not the deleted one
    assert reopened is not ml and reopened.number_of_entries() == 0 and reopened.cursors == {}


async def test_factory_open_is_shared_and_lists_names() -> None:
    world = World()
    factory = world.factory()
    a, b = await asyncio.gather(factory.open(NAME), factory.open(NAME))
    assert a is b and await factory.open(NAME) is a
    await factory.open("t/ns/persistent/cursors")
    await (await factory.open("t/ns/persistent/x")).open_cursor("c")
    assert await factory.list_names() == [NAME, "t/ns/persistent/cursors", "t/ns/persistent/x"]
    assert await factory.exists(NAME) and not await factory.exists("t/ns/persistent/none")
    await a.close()
    assert await factory.open(NAME) is not a
    await factory.close()
    with pytest.raises(ManagedLedgerClosed):
        await factory.open(NAME)


async def test_read_entry_of_missing_positions() -> None:
    world = World()
    ml = await world.factory().open(NAME)
    p = await ml.add_entry(b"x")
    for bad in (Position(p.ledger_id, 1), Position(p.ledger_id, -1), Position(999, 0), Position(-5, -5)):
        with pytest.raises(InvalidPosition):
            await ml.read_entry(bad)


async def test_first_and_last_positions_of_an_empty_ledger() -> None:
    world = World()
    ml = await world.factory().open(NAME)
    current = ml.ledgers()[0].ledger_id
    assert ml.last_confirmed == Position(current, -1)
    assert ml.first_position() == Position(current, -1)
    assert ml.next_valid_position(ml.last_confirmed) == Position(current, 0)


async def test_storage_failure_on_append_pauses_adds_then_rolls_over() -> None:
    world = World()
    ml = await world.factory().open(NAME)
    await ml.add_entry(b"ok")
    with pytest.raises(ManagedLedgerError) as info:
        await ml.add_entry(b"x" * (17 * 1024 * 1024))  # over the store's entry limit
    assert not isinstance(info.value, ManagedLedgerFenced)
    assert ml.writes_paused
    with pytest.raises(ManagedLedgerError):  # nothing lands until the owner has settled and resumes
        await ml.add_entry(b"too early")
    assert ml.resume_writes()
    after = await ml.add_entry(b"after")
    assert after.entry_id == 0 and [x.entries for x in ml.ledgers()] == [1, 1]


async def test_memory_store_type_is_usable_directly() -> None:
    factory = LedgerFactory(MemoryLedgerStore(), World().metadata)
    ml = await factory.open("a/b/persistent/c")
    assert (await ml.add_entry(memoryview(b"view"))).entry_id == 0
    await factory.close()


async def test_a_failed_rollover_fails_the_adds_queued_behind_it() -> None:
    """Those adds must not land before the failed one is sent again (a resend would then be taken for a
    duplicate of a later sequence id: receipted, never stored)."""
    world = World(max_entries_per_ledger=2)
    ml = await world.factory().open(NAME)
    await add_many(ml, 2)
    create, failures = world.store.create_ledger, [StorageIOError("No space left on device (injected)")]

    async def fail_once(metadata: Mapping[str, str]) -> LedgerInfo:
        if failures:
            raise failures.pop()
        return await create(metadata)

    world.store.create_ledger = fail_once  # type: ignore[method-assign]
    queued = [ml.add_entry_future(b"q%d" % i) for i in range(3)]  # the first one rolls over, and fails
    results = await asyncio.gather(*queued, return_exceptions=True)
    assert all(isinstance(r, ManagedLedgerError) for r in results), results
    assert ml.writes_paused and ml.resume_writes()
    await add_many(ml, 3, b"q")
    assert await read_all(ml) == [b"m0", b"m1", b"q0", b"q1", b"q2"]
