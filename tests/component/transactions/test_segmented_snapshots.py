"""PIP-178 segmented transaction-buffer snapshots over real managed ledgers and a real compacted snapshot topic:
many keys for a big index, recovery from the snapshot (not the whole topic), a snapshot cut at every
possible write, trimming, compaction, deletion, and the switch between the two schemes."""

from __future__ import annotations

import asyncio

import pytest

from magnetar.broker.transactions.api import TxnId
from magnetar.broker.transactions.segmented_snapshot import (
    END,
    SegmentedSnapshotStore,
    SwitchedSnapshotStore,
    decode_segment,
    parse_key,
)
from magnetar.broker.transactions.snapshot import MetadataSnapshotStore
from magnetar.ledger.api import Position
from tests.component.transactions.segmented_world import TOPIC, SegmentedWorld


def keys_of(table: dict[str, bytes]) -> list[int | str | None]:
    return sorted((parse_key(TOPIC, k) for k in table), key=str)


async def test_a_big_index_spans_several_keys_and_recovery_reads_the_snapshot() -> None:
    world = SegmentedWorld(segment_ids=10_000)
    tb = await world.start()
    await world.abort_some(100_000, with_message=False)
    await world.commit_one()
    total = world.ledger.number_of_entries()
    await tb.take_snapshot()
    table = await world.snapshot_keys()
    assert keys_of(table) == sorted([*range(1, 10), END], key=str)  # 9 full segments + the rest in -end
    assert all(len(decode_segment(table[f"{TOPIC}-{n}"]).aborted) == 10_000 for n in range(1, 10))
    assert decode_segment(table[f"{TOPIC}-1"]).max_read_position == Position(-1, -1)  # only -end's is real
    assert decode_segment(table[f"{TOPIC}-{END}"]).max_read_position == world.ledger.last_confirmed

    tb = await world.restart()
    assert tb.recovered_entries == 0 < total  # nothing after the snapshot: no entry of the topic replayed
    assert {t for t, _ in tb.aborted_index()} == world.expected_aborted()
    assert all(tb.is_aborted(t) for t in world.truth_aborted)
    assert not any(tb.is_aborted(t) for t in world.truth_committed)
    index = tb.aborted_index()
    assert [p for _, p in index] == sorted(p for _, p in index)  # ordered by abort marker


async def test_a_small_index_writes_only_end() -> None:
    world = SegmentedWorld(segment_ids=5)
    tb = await world.start()
    await world.abort_some(3)
    await tb.take_snapshot()
    assert keys_of(await world.snapshot_keys()) == [END]


async def _cut_run(cut: int | None, *, trim: bool, compact_at_cut: bool = False) -> tuple[SegmentedWorld, int]:
    """Snapshot 1 complete, then more traffic (and maybe a trim), then snapshot 2 cut after ``cut`` writes
    (None: not cut). Returns the world and the keyed writes snapshot 2 made."""
    world = SegmentedWorld(segment_ids=5, entries_per_ledger=9)
    tb = await world.start()
    await world.abort_some(23)
    await world.commit_one()
    await tb.take_snapshot()
    if trim:
        await world.trim()
        await world.abort_some(4)
    else:
        await world.abort_some(17)
    await world.commit_one()
    before = world.snapshots.writes
    world.budget = cut
    await tb.take_snapshot()  # a cut fails a write: logged, the snapshot stays partial
    world.budget = None
    if compact_at_cut:
        await world.compact_snapshots()
    return world, world.snapshots.writes - before


@pytest.mark.parametrize("trim", [False, True], ids=["growing", "trimmed"])
async def test_recovery_is_correct_at_every_cut_point_of_a_snapshot(trim: bool) -> None:
    world, full = await _cut_run(None, trim=trim)
    await world.factory.close()
    assert full >= 4  # changed segments, -end (and tombstones when trimmed): several cut points
    for cut in range(full + 1):
        for compact_at_cut in (False, True):
            world, _ = await _cut_run(cut, trim=trim, compact_at_cut=compact_at_cut)
            tb = await world.restart()
            aborted = {t for t, _ in tb.aborted_index()}
            assert world.expected_aborted() <= aborted, (cut, compact_at_cut)  # nothing still needed is lost
            assert aborted <= set(world.truth_aborted), (cut, compact_at_cut)  # nothing else is aborted
            assert not any(tb.is_aborted(t) for t in world.truth_committed)
            assert tb.ongoing() == {}
            # the replay starts at the last complete -end: never the whole topic
            assert tb.recovered_entries < world.ledger.number_of_entries() or trim
            await world.factory.close()


async def test_trimming_shrinks_the_snapshot_and_stale_segments_are_tombstoned() -> None:
    world = SegmentedWorld(segment_ids=5, entries_per_ledger=9)
    tb = await world.start()
    await world.abort_some(30)
    await tb.take_snapshot()
    assert keys_of(await world.snapshot_keys()) == sorted([*range(1, 6), END], key=str)
    await world.trim()
    await world.commit_one()
    await tb.take_snapshot()
    kept = world.expected_aborted()
    assert len(kept) < 30 and {t for t, _ in tb.aborted_index()} == kept
    table = await world.snapshot_keys()
    expected_segments = max(0, (len(kept) - 1) // 5)
    assert keys_of(table) == sorted([*range(1, expected_segments + 1), END], key=str)
    ids = {t for value in table.values() for t, _ in decode_segment(value).aborted}
    assert ids == kept


async def test_compaction_keeps_only_the_latest_value_per_key() -> None:
    world = SegmentedWorld(segment_ids=5)
    tb = await world.start()
    for _ in range(4):
        await world.abort_some(6)
        await tb.take_snapshot()
    await world.compact_snapshots()
    compacted = world.host.compacted
    assert compacted is not None and compacted.view is not None
    held = await compacted.read(compacted.view, 0, compacted.view.entries - 1)
    assert compacted.view.entries == len(await world.snapshot_keys()) == 5  # -1..-4 and -end, once each
    assert len({e.position for e in held}) == 5
    tb = await world.restart()
    assert {t for t, _ in tb.aborted_index()} == world.expected_aborted()


async def test_a_snapshot_asks_for_compaction_once_enough_was_written() -> None:
    world = SegmentedWorld(segment_ids=5)
    world.compact_after_bytes = 2_000
    tb = await world.start()
    await world.abort_some(12)
    await tb.take_snapshot()
    assert world.compactions_asked == 0  # about 600 bytes past the horizon
    for _ in range(4):
        await world.abort_some(6)
        await tb.take_snapshot()
    assert world.compactions_asked > 0
    await world.compact_snapshots()
    asked = world.compactions_asked
    await tb.take_snapshot()  # the horizon moved: a small snapshot asks nothing
    assert world.compactions_asked == asked


async def test_deleting_the_topic_tombstones_its_keys_only() -> None:
    world = SegmentedWorld(segment_ids=5)
    tb = await world.start()
    await world.abort_some(12)
    await tb.take_snapshot()
    other = "persistent://public/default/t-1"  # its keys look like t's segment keys: they must stay
    await world.snapshots.save(other, tb.snapshot())
    await world.snapshots.delete(TOPIC)
    table = await world.snapshot_keys()
    assert table and all(parse_key(other, k) is not None for k in table)
    assert await world.snapshots.load(TOPIC) is None


async def test_the_switch_moves_a_topic_between_schemes_without_losing_ids() -> None:
    world = SegmentedWorld(segment_ids=5)
    tb = await world.start()
    single = MetadataSnapshotStore(world.metadata)
    await world.abort_some(12)
    await single.save(TOPIC, tb.snapshot())  # written by the single-entry scheme

    def switched(enabled: bool) -> SwitchedSnapshotStore:
        segmented = SegmentedSnapshotStore(world._keyed, segment_size=world.segment_size)
        return SwitchedSnapshotStore(segmented, single, segmented_enabled=enabled, pinned=lambda _: False)

    store = switched(True)
    loaded = await store.load(TOPIC)
    assert loaded is not None and {t for t, _ in loaded.aborted} == world.expected_aborted()
    await world.abort_some(3)
    await store.save(TOPIC, tb.snapshot())  # the next snapshot moves it: segments, and the record goes
    assert await single.load(TOPIC) is None
    assert len(await world.snapshot_keys()) == 3  # -1, -2 and -end
    info = store.info(TOPIC)
    assert info is not None and (info.kind, info.segments, info.aborted) == ("multiple", 2, 15)

    back = switched(False)
    loaded = await back.load(TOPIC)
    assert loaded is not None and {t for t, _ in loaded.aborted} == world.expected_aborted()
    await back.save(TOPIC, tb.snapshot())
    assert await world.snapshot_keys() == {}  # moved back: the segments are tombstoned
    restored = await single.load(TOPIC)
    assert restored is not None and {t for t, _ in restored.aborted} == world.expected_aborted()


async def test_one_snapshot_write_at_a_time() -> None:
    world = SegmentedWorld(segment_ids=1)
    tb = await world.start()
    await world.abort_some(20)
    await asyncio.gather(tb.take_snapshot(), tb.take_snapshot(), tb.take_snapshot())
    assert world.max_in_flight == 1
    assert {t for t, _ in (await world.snapshots.load(TOPIC) or tb.snapshot()).aborted} == world.expected_aborted()


async def test_aborts_bring_the_next_snapshot_forward() -> None:
    world = SegmentedWorld(segment_ids=5)
    tb = await world.start()
    tb._snapshot_max_txn_count = 10
    before = world.snapshots.writes
    await world.abort_some(9)
    assert tb._snapshot_task is not None  # scheduled after the min interval (never, here)
    await world.abort_some(1)
    task = tb._snapshot_task
    assert task is not None
    await task
    assert world.snapshots.writes > before
    assert {t for t, _ in (await world.snapshots.load(TOPIC) or tb.snapshot()).aborted} == set(world.truth_aborted)
    assert TxnId(7, 1) in world.truth_aborted
