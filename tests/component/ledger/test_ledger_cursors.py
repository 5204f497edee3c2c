"""Cursors over a managed ledger on the in-memory stores: acks, reads, seeks, persistence, restore."""

from __future__ import annotations

import pytest
from ledger_world import NAME, World

from magnetar.ledger.api import (
    CursorNotFound,
    InitialPosition,
    ManagedLedgerClosed,
    ManagedLedgerFenced,
    Position,
)
from magnetar.ledger.cursor import ManagedCursor
from magnetar.ledger.formats import cursor_key, decode_cursor
from magnetar.ledger.managed import ManagedLedgerImpl

CURSORS = f"/managed-ledgers/{NAME}/cursors/"


async def setup(count: int, **config: int) -> tuple[World, ManagedLedgerImpl, list[Position]]:
    world = World(**config)
    ml = await world.factory().open(NAME)
    positions = [await ml.add_entry(b"e%d" % i) for i in range(count)]
    return world, ml, positions


async def datas(cursor: ManagedCursor, n: int = 100, max_bytes: int | None = None) -> list[bytes]:
    return [e.data for e in await cursor.read_entries(n, max_bytes)]


async def test_individual_acks_advance_mark_delete_and_reads_skip_them() -> None:
    _, ml, p = await setup(10, max_entries_per_ledger=4)
    cursor = await ml.open_cursor("s", InitialPosition.EARLIEST)
    assert cursor.backlog_entries() == 10
    cursor.acknowledge([p[2], p[3], p[4], p[7], p[42 % 10]])
    assert cursor.mark_delete_position == ml.first_position()
    assert cursor.backlog_entries() == 6
    # (open, closed] ranges; 3 and 4 cross a ledger boundary
    assert cursor.individually_deleted_ranges() == [
        (Position(p[2].ledger_id, 1), p[4]),
        (Position(p[7].ledger_id, p[7].entry_id - 1), p[7]),
    ]
    assert await datas(cursor) == [b"e0", b"e1", b"e5", b"e6", b"e8", b"e9"]
    cursor.acknowledge([p[0], p[1]])
    assert cursor.mark_delete_position == p[4]
    assert cursor.individually_deleted_ranges() == [(Position(p[7].ledger_id, p[7].entry_id - 1), p[7])]
    cursor.rewind()
    assert await datas(cursor) == [b"e5", b"e6", b"e8", b"e9"]
    cursor.acknowledge([p[5], p[6]])
    assert cursor.mark_delete_position == p[7] and cursor.individually_deleted_ranges() == []
    assert cursor.backlog_entries() == 2
    assert cursor.is_acknowledged(p[6]) and not cursor.is_acknowledged(p[8])


async def test_bad_acks_are_ignored() -> None:
    _, ml, p = await setup(3)
    cursor = await ml.open_cursor("s", InitialPosition.EARLIEST)
    cursor.acknowledge([Position(999, 0), Position(-1, -7), Position(p[0].ledger_id, 3), p[0], p[0]])
    cursor.acknowledge_cumulative(Position(p[0].ledger_id, 50))
    cursor.acknowledge_cumulative(Position(-3, 0))
    cursor.acknowledge_batch_indexes(p[1], [1], 0)
    cursor.acknowledge_batch_indexes(p[1], [1], 10**9)
    cursor.acknowledge_batch_indexes(Position(1234, 5), [0], 8)
    assert cursor.mark_delete_position == p[0] and cursor.backlog_entries() == 2
    assert cursor.batch_ack_set(p[1]) is None


async def test_cumulative_ack_drops_ranges_and_batches_below() -> None:
    _, ml, p = await setup(8, max_entries_per_ledger=3)
    cursor = await ml.open_cursor("s", InitialPosition.EARLIEST)
    cursor.acknowledge([p[2], p[5], p[6]])
    cursor.acknowledge_batch_indexes(p[3], [0b1100], 4)
    cursor.acknowledge_cumulative(p[4])
    assert cursor.mark_delete_position == p[6]  # contiguous with the range 5..6
    assert cursor.individually_deleted_ranges() == [] and cursor.batch_ack_set(p[3]) is None
    assert cursor.backlog_entries() == 1
    cursor.acknowledge_cumulative(p[1])  # behind the mark-delete: ignored
    assert cursor.mark_delete_position == p[6]


async def test_batch_index_acks_merge_and_complete() -> None:
    _, ml, p = await setup(3)
    cursor = await ml.open_cursor("s", InitialPosition.EARLIEST)
    cursor.acknowledge_batch_indexes(p[1], [0b1110], 4)  # index 0 acked
    assert cursor.batch_ack_set(p[1]) == [0b1110]
    cursor.acknowledge_batch_indexes(p[1], [0b1011], 4)  # index 2 acked: AND-merged
    assert cursor.batch_ack_set(p[1]) == [0b1010]
    assert not cursor.is_acknowledged(p[1]) and cursor.backlog_entries() == 3
    assert b"e1" in await datas(cursor)  # a partially acked entry is still delivered
    cursor.acknowledge_batch_indexes(p[1], [0b0101], 4)
    assert cursor.batch_ack_set(p[1]) is None and cursor.is_acknowledged(p[1])
    assert cursor.backlog_entries() == 2
    # 100-message batch, Java signed words, bits above the batch size ignored
    cursor.acknowledge_batch_indexes(p[2], [-1, -1], 100)
    assert cursor.batch_ack_set(p[2]) == [-1, (1 << 36) - 1]
    cursor.acknowledge_batch_indexes(p[2], [0, 1 << 40], 100)
    assert cursor.is_acknowledged(p[2])


async def test_backlog_counts_across_ledgers_without_reading() -> None:
    world, ml, p = await setup(25, max_entries_per_ledger=4)
    earliest = await ml.open_cursor("early", InitialPosition.EARLIEST)
    latest = await ml.open_cursor("late", InitialPosition.LATEST)
    assert earliest.backlog_entries() == 25 and latest.backlog_entries() == 0
    assert await datas(latest) == []
    await ml.add_entry(b"new")
    assert latest.backlog_entries() == 1 and await datas(latest) == [b"new"]
    earliest.acknowledge(p[3:19])
    assert earliest.backlog_entries() == 26 - 16
    assert world.metadata.inner is not None


async def test_read_limits_entries_and_bytes() -> None:
    _, ml, _ = await setup(10, max_entries_per_ledger=3)
    cursor = await ml.open_cursor("s", InitialPosition.EARLIEST)
    assert await datas(cursor, 4) == [b"e0", b"e1", b"e2", b"e3"]
    assert await datas(cursor, 100, max_bytes=5) == [b"e4", b"e5", b"e6"]  # stops once 5 bytes are read
    assert await datas(cursor, 100, max_bytes=1) == [b"e7"]  # always at least one entry
    assert await cursor.read_entries(0) == []
    assert await datas(cursor) == [b"e8", b"e9"]
    assert await datas(cursor) == []


async def test_seek_rewind_and_reset() -> None:
    world, ml, p = await setup(10, max_entries_per_ledger=3)
    cursor = await ml.open_cursor("s", InitialPosition.EARLIEST)
    cursor.acknowledge([p[5]])
    cursor.seek(p[4])
    assert cursor.read_position == p[4]
    assert await datas(cursor, 2) == [b"e4", b"e6"]
    cursor.rewind()
    assert await datas(cursor, 1) == [b"e0"]
    before = world.metadata.puts_under(CURSORS)
    await cursor.reset(p[7])
    assert world.metadata.puts_under(CURSORS) == before + 1  # persisted before returning
    assert cursor.mark_delete_position == Position(p[7].ledger_id, p[7].entry_id - 1)
    assert cursor.individually_deleted_ranges() == [] and cursor.backlog_entries() == 3
    assert await datas(cursor) == [b"e7", b"e8", b"e9"]
    await cursor.reset(p[2])  # back in time: everything from it on is unacked again
    assert cursor.backlog_entries() == 8 and not cursor.is_acknowledged(p[5])
    assert await datas(cursor, 2) == [b"e2", b"e3"]


async def test_reset_and_seek_clamp_nonsense_positions() -> None:
    _, ml, p = await setup(6, max_entries_per_ledger=3)
    cursor = await ml.open_cursor("s", InitialPosition.EARLIEST)
    await cursor.reset(Position(-10, -10))
    assert await datas(cursor, 1) == [b"e0"]
    await cursor.reset(Position(10**12, 5))
    assert cursor.backlog_entries() == 0 and await datas(cursor) == []
    await cursor.reset(Position(p[0].ledger_id, 999))  # past a sealed ledger's end: the next ledger
    assert await datas(cursor, 1) == [b"e3"]
    cursor.seek(Position(p[5].ledger_id, 10**9))
    assert await datas(cursor) == []
    await ml.add_entry(b"e6")
    assert await datas(cursor) == [b"e6"]


async def test_debounced_persistence_merges_acks_into_one_write() -> None:
    world, ml, p = await setup(50)
    cursor = await ml.open_cursor("s", InitialPosition.EARLIEST)
    key = cursor_key(NAME, "s")
    created = world.metadata.puts[key]
    for position in p[::2]:
        cursor.acknowledge([position])
    cursor.acknowledge_batch_indexes(p[1], [0b10], 2)
    assert world.metadata.puts[key] == created  # nothing written yet
    await world.timer.wait_sleeping()
    assert len(world.timer.waiting) == 1  # one pending persist task for all of it
    assert world.timer.delays_ms == [ml.config.cursor_persist_interval_ms]
    world.timer.fire()
    await world.metadata.wait_puts(key, created + 1)
    stored = await world.metadata.get(key)
    assert stored is not None
    record = decode_cursor(stored.value, key)
    assert record.mark_delete == p[0] and len(record.ranges) == 24 and record.batches == ((p[1], (0b10,)),)
    await cursor.flush()  # nothing changed since: no write
    assert world.metadata.puts[key] == created + 1
    cursor.acknowledge([p[3]])
    await cursor.flush()  # immediate
    assert world.metadata.puts[key] == created + 2
    world.timer.fire()  # the task scheduled by that ack finds nothing to write
    await cursor.flush()
    assert world.metadata.puts[key] == created + 2


async def test_restart_restores_cursor_state_and_read_position() -> None:
    world, ml, p = await setup(12, max_entries_per_ledger=5)
    cursor = await ml.open_cursor("sub/1", InitialPosition.EARLIEST)
    cursor.acknowledge([p[0], p[1], p[3], p[9]])
    cursor.acknowledge_batch_indexes(p[4], [0b1], 3)
    await cursor.set_properties({"x": 7})
    await ml.close()  # close persists
    again = await world.factory().open(NAME)
    restored = again.cursors["sub/1"]
    assert restored.durable and restored.properties == {"x": 7}
    assert restored.mark_delete_position == p[1]
    assert restored.read_position == p[2]
    assert restored.individually_deleted_ranges() == cursor.individually_deleted_ranges()
    assert restored.batch_ack_set(p[4]) == [0b1]
    assert restored.backlog_entries() == 8
    assert await datas(restored, 3) == [b"e2", b"e4", b"e5"]


async def test_unclean_stop_keeps_flushed_acks() -> None:
    world, ml, p = await setup(6)
    cursor = await ml.open_cursor("s", InitialPosition.EARLIEST)
    cursor.acknowledge_cumulative(p[2])
    await cursor.flush()
    cursor.acknowledge([p[3]])  # not yet persisted: lost by the crash, redelivered
    again = await world.factory().open(NAME)
    assert again.cursors["s"].mark_delete_position == p[2]
    assert again.cursors["s"].backlog_entries() == 3


async def test_persisted_ranges_are_capped_oldest_kept() -> None:
    world, ml, p = await setup(40, max_unacked_ranges_to_persist=3)
    cursor = await ml.open_cursor("s", InitialPosition.EARLIEST)
    cursor.acknowledge(p[1::2])  # 20 separate ranges
    assert len(cursor.individually_deleted_ranges()) == 20
    await ml.close()
    restored = (await world.factory(max_unacked_ranges_to_persist=3).open(NAME)).cursors["s"]
    assert [last for _, last in restored.individually_deleted_ranges()] == [p[1], p[3], p[5]]
    assert restored.backlog_entries() == 40 - 3


async def test_non_durable_cursor_is_not_persisted_and_starts_clamped() -> None:
    world, ml, p = await setup(6, max_entries_per_ledger=4)
    before = world.metadata.puts_under(CURSORS)
    reader = ml.new_non_durable_cursor(p[2], "reader")
    assert not reader.durable and "reader" not in ml.cursors
    assert await datas(reader, 1) == [b"e2"]
    reader.acknowledge([p[3]])
    await reader.flush()
    await reader.reset(p[0])
    assert world.metadata.puts_under(CURSORS) == before
    assert await datas(ml.new_non_durable_cursor(Position(-1, -1), "r2"), 1) == [b"e0"]
    assert await datas(ml.new_non_durable_cursor(Position(10**9, 0), "r3")) == []
    tail = ml.new_non_durable_cursor(ml.next_valid_position(ml.last_confirmed), "r4")
    await ml.add_entry(b"e6")
    assert await datas(tail) == [b"e6"]
    await reader.close()
    with pytest.raises(ManagedLedgerClosed):
        await reader.read_entries(1)


async def test_open_cursor_is_idempotent_and_delete_cursor_removes_it() -> None:
    world, ml, _ = await setup(3)
    a = await ml.open_cursor("s")
    assert await ml.open_cursor("s", InitialPosition.EARLIEST) is a
    await ml.delete_cursor("s")
    assert "s" not in ml.cursors and not await world.metadata.exists(cursor_key(NAME, "s"))
    with pytest.raises(ManagedLedgerClosed):
        a.acknowledge([])
    with pytest.raises(CursorNotFound):
        await ml.delete_cursor("s")
    await ml.close()
    assert "s" not in (await world.factory().open(NAME)).cursors


async def test_cursor_cas_conflict_fences_cursor_and_ledger() -> None:
    world, ml, p = await setup(3)
    cursor = await ml.open_cursor("s", InitialPosition.EARLIEST)
    key = cursor_key(NAME, "s")
    stored = await world.metadata.get(key)
    assert stored is not None
    await world.metadata.inner.put(key, stored.value)
    cursor.acknowledge([p[0]])
    with pytest.raises(ManagedLedgerFenced):
        await cursor.flush()
    with pytest.raises(ManagedLedgerFenced):
        cursor.acknowledge([p[1]])
    with pytest.raises(ManagedLedgerFenced):
        await ml.add_entry(b"x")


async def test_closed_cursor_refuses_calls() -> None:
    _, ml, p = await setup(2)
    cursor = await ml.open_cursor("s")
    await cursor.close()
    await cursor.close()  # idempotent
    with pytest.raises(ManagedLedgerClosed):
        cursor.acknowledge([p[0]])
    with pytest.raises(ManagedLedgerClosed):
        await cursor.flush()


async def test_a_previous_owner_cannot_overwrite_cursors_after_a_new_open() -> None:
    world, old, p = await setup(4)
    cursor = await old.open_cursor("s", InitialPosition.EARLIEST)
    new = await world.factory().open(NAME)  # claims the ledger and its cursors
    cursor.acknowledge([p[0], p[1]])
    with pytest.raises(ManagedLedgerFenced):
        await cursor.flush()
    fresh = new.cursors["s"]
    fresh.acknowledge([p[3]])
    await fresh.flush()  # the new owner is not fenced by the old one
    assert fresh.backlog_entries() == 3 and new.cursors["s"] is fresh
