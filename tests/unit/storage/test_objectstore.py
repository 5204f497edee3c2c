"""The object ledger store's contract on an in-memory bucket: chunks, group commit, reads, seal, delete."""

from __future__ import annotations

import asyncio

import pytest

from magnetar.storage import EntryCorrupted, EntryNotFound, LedgerNotFound, LedgerSealed, StorageIOError, StoreClosed
from magnetar.storage.objectstore import ObjectStoreRefused
from magnetar.storage.objectstore._chunks import HEADER_BYTES, decode_data, decode_header
from tests.unit.storage.objectstore_world import WAIT_S, Timer, World


async def test_append_read_info_seal_delete() -> None:
    world = World()
    store = await world.store()
    info = await store.create_ledger({"component": "managed-ledger"})
    assert (info.ledger_id, info.entries, info.sealed, info.created_ms) == (1, 0, False, world.clock.now_ms())
    assert [await store.append(info.ledger_id, d) for d in (b"a", memoryview(b"bc"))] == [0, 1]
    assert await store.read(info.ledger_id, 0, 1) == [b"a", b"bc"]
    sealed = await store.seal(info.ledger_id)
    assert (sealed.entries, sealed.size_bytes, sealed.sealed) == (2, 3, True)
    assert await store.seal(info.ledger_id) == sealed
    with pytest.raises(LedgerSealed):
        await store.append(info.ledger_id, b"x")
    assert await store.list_ledgers() == [info.ledger_id]
    await store.delete(info.ledger_id)
    assert await store.list_ledgers() == []
    with pytest.raises(LedgerNotFound):
        await store.info(info.ledger_id)
    # the seal stays as the tombstone that refuses a paused writer; the data and the metadata are gone
    assert [k.rsplit("/", 1)[1] for k in world.chunk_keys(info.ledger_id)] == ["0000000002"]
    assert not [k for k in world.bucket.objects if k.startswith("t/ledger-meta/")]


async def test_concurrent_appends_share_one_chunk_and_get_consecutive_ids() -> None:
    world = World()
    store = await world.store()
    ledger_id = (await store.create_ledger({})).ledger_id
    ids = await asyncio.gather(*(store.append(ledger_id, bytes([i])) for i in range(20)))
    assert ids == list(range(20))
    assert len(world.chunk_keys(ledger_id)) == 1  # one PUT for the twenty
    assert await store.read(ledger_id, 0, 19) == [bytes([i]) for i in range(20)]


async def test_chunks_hold_at_most_flush_max_bytes_and_land_in_order() -> None:
    world = World()
    store = await world.store(flush_max_bytes=10)
    ledger_id = (await store.create_ledger({})).ledger_id
    ids = await asyncio.gather(*(store.append(ledger_id, b"%04d" % i) for i in range(9)))
    assert ids == list(range(9))
    keys = world.chunk_keys(ledger_id)
    assert len(keys) == 5  # two 4-byte entries per chunk (a third would pass 10 bytes), the last alone
    firsts = [decode_header(world.bucket.objects[k], ledger_id, i).first_entry for i, k in enumerate(keys)]
    assert firsts == [0, 2, 4, 6, 8]
    _, payloads = decode_data(world.bucket.objects[keys[1]], ledger_id, 1)
    assert payloads == [b"0002", b"0003"]


async def test_the_flush_window_holds_a_chunk_until_it_passes_or_the_size_is_reached() -> None:
    world = World()
    timer = Timer()
    store = await world.store(sleep_ms=timer.sleep_ms, flush_max_delay_ms=50, flush_max_bytes=8)
    ledger_id = (await store.create_ledger({})).ledger_id
    first = store.start_append(ledger_id, b"ab")
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert not first.done() and timer.slept_ms == [50] and not world.chunk_keys(ledger_id)
    world.clock.advance(50)
    timer.fire()
    assert await asyncio.wait_for(first, WAIT_S) == 0
    assert len(world.chunk_keys(ledger_id)) == 1
    # reaching flush_max_bytes does not wait for the window
    big = [store.start_append(ledger_id, b"1234"), store.start_append(ledger_id, b"5678")]
    assert await asyncio.wait_for(asyncio.gather(*big), WAIT_S) == [1, 2]
    assert len(world.chunk_keys(ledger_id)) == 2


async def test_another_store_reads_metadata_entries_and_the_seal() -> None:
    world = World()
    writer = await world.store()
    info = await writer.create_ledger({"pulsar/managed-ledger": "t/ns/persistent/x"})
    for i in range(5):
        await writer.append(info.ledger_id, b"e%d" % i)
    reader = await world.store()
    seen = await reader.info(info.ledger_id)
    assert (seen.entries, seen.sealed) == (5, False)
    assert seen.custom_metadata == {"pulsar/managed-ledger": "t/ns/persistent/x"}
    assert seen.created_ms == info.created_ms and seen.size_bytes == 10
    await writer.append(info.ledger_id, b"e5")
    assert await reader.read(info.ledger_id, 4, 5) == [b"e4", b"e5"]  # looked again: the ledger grew
    with pytest.raises(EntryNotFound):
        await reader.read(info.ledger_id, 6, 6)
    with pytest.raises(StorageIOError, match="only its creator appends"):
        await reader.append(info.ledger_id, b"no")
    await writer.seal(info.ledger_id)
    sealed = await reader.info(info.ledger_id)
    assert (sealed.entries, sealed.sealed) == (6, True)
    assert await reader.read(info.ledger_id, 0, 5) == [b"e%d" % i for i in range(6)]


async def test_ids_are_unique_across_stores_on_one_bucket_and_across_restarts() -> None:
    world = World()
    first, second = await world.store(), await world.store()
    a = [(await first.create_ledger({})).ledger_id for _ in range(3)]
    b = [(await second.create_ledger({})).ledger_id for _ in range(3)]
    assert a == [1, 2, 3] and b == [1001, 1002, 1003]
    await first.close()
    again = await world.store()
    assert (await again.create_ledger({})).ledger_id == 2001


async def test_reads_verify_checksums_and_serve_the_good_entries_before_damage() -> None:
    world = World()
    store = await world.store(read_cache_bytes=0)
    ledger_id = (await store.create_ledger({})).ledger_id
    await asyncio.gather(*(store.append(ledger_id, b"entry-%d" % i) for i in range(4)))
    (key,) = world.chunk_keys(ledger_id)
    body = bytearray(world.bucket.objects[key])
    body[-3] ^= 0xFF  # inside the last record's data
    world.bucket.objects[key] = bytes(body)
    assert await store.read(ledger_id, 0, 2) == [b"entry-0", b"entry-1", b"entry-2"]
    with pytest.raises(EntryCorrupted) as damaged:
        await store.read(ledger_id, 1, 3)
    assert (damaged.value.ledger_id, damaged.value.entry_id) == (ledger_id, 3)


async def test_big_chunks_are_read_by_byte_range() -> None:
    world = World()
    store = await world.store(read_cache_bytes=0, whole_chunk_bytes_max=0)
    ledger_id = (await store.create_ledger({})).ledger_id
    payloads = [bytes([i]) * (i + 1) for i in range(30)]
    await asyncio.gather(*(store.append(ledger_id, p) for p in payloads))
    reader = await world.store(read_cache_bytes=0, whole_chunk_bytes_max=0)
    assert (await reader.info(ledger_id)).entries == 30  # the metadata and the chain's end, read once
    before = reader.requests.client.requests["get"]  # type: ignore[attr-defined]
    assert await reader.read(ledger_id, 10, 12) == payloads[10:13]
    assert reader.requests.client.requests["get"] - before == 2  # type: ignore[attr-defined]  # table, records
    assert await reader.read(ledger_id, 0, 29) == payloads


async def test_tail_reads_of_a_live_ledger_come_from_the_cache() -> None:
    world = World()
    store = await world.store()
    ledger_id = (await store.create_ledger({})).ledger_id
    gets = store.requests.client.requests  # type: ignore[attr-defined]
    before = gets["get"]
    for i in range(50):
        entry_id = await store.append(ledger_id, b"m%d" % i)
        assert await store.read(ledger_id, entry_id, entry_id) == [b"m%d" % i]
    assert gets["get"] == before and store.cache.hits == 50


async def test_the_cache_is_bounded_and_a_miss_reads_a_whole_chunk_ahead() -> None:
    world = World()
    store = await world.store(read_cache_bytes=300)
    ledger_id = (await store.create_ledger({})).ledger_id
    await asyncio.gather(*(store.append(ledger_id, b"%09d" % i) for i in range(50)))  # one chunk, 450 bytes
    assert store.cache.bytes <= 300
    assert await store.read(ledger_id, 0, 0) == [b"000000000"]
    gets = store.requests.client.requests["get"]  # type: ignore[attr-defined]
    assert await store.read(ledger_id, 1, 16) == [b"%09d" % i for i in range(1, 17)]  # read ahead: 150 bytes
    assert store.requests.client.requests["get"] == gets  # type: ignore[attr-defined]
    assert store.cache.bytes <= 300


async def test_a_store_without_conditional_writes_is_refused() -> None:
    world = World(conditional_writes=False)
    with pytest.raises(ObjectStoreRefused, match="does not honour conditional writes"):
        await world.store()
    assert not world.bucket.objects  # the probe key is gone


async def test_back_pressure_queues_appends_in_call_order() -> None:
    world = World()
    store = await world.store(pending_bytes_max=4, flush_max_bytes=4)
    ledger_id = (await store.create_ledger({})).ledger_id
    futures = [store.start_append(ledger_id, b"%04d" % i) for i in range(6)]
    assert await asyncio.wait_for(asyncio.gather(*futures), WAIT_S) == list(range(6))
    assert await store.read(ledger_id, 0, 5) == [b"%04d" % i for i in range(6)]


async def test_close_completes_pending_appends_then_refuses() -> None:
    world = World()
    store = await world.store()
    ledger_id = (await store.create_ledger({})).ledger_id
    pending = [store.start_append(ledger_id, b"x%d" % i) for i in range(3)]
    await store.close()
    assert [f.result() for f in pending] == [0, 1, 2]
    with pytest.raises(StoreClosed):
        await store.append(ledger_id, b"late")
    with pytest.raises(StoreClosed):
        await store.list_ledgers()
    reader = await world.store()
    assert (await reader.info(ledger_id)).entries == 3


async def test_header_layout_is_fixed() -> None:
    assert HEADER_BYTES == 48
