"""The transaction buffer's bookkeeping over an in-memory managed ledger: maxReadPosition, ending,
the aborted index, snapshots and recovery."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from magnetar import protocol as proto
from magnetar.broker.errors import PersistenceError
from magnetar.broker.transactions.api import InvalidTxnStatus, TxnAction, TxnId
from magnetar.broker.transactions.buffer import TransactionBuffer, before, txn_of
from magnetar.broker.transactions.snapshot import AbortedSnapshot, MetadataSnapshotStore, decode_snapshot
from magnetar.core.clock import ManualClock
from magnetar.ledger.api import ManagedLedger, ManagedLedgerError, Position
from magnetar.ledger.factory import LedgerFactory
from magnetar.metadata.memory import MemoryMetadataStore
from magnetar.storage.memory import MemoryLedgerStore

T1, T2, T3 = TxnId(0, 1), TxnId(0, 2), TxnId(1, 1)


def message(body: bytes, txn: TxnId | None = None) -> bytes:
    meta = proto.pb.MessageMetadata(producer_name="p", sequence_id=0, publish_time=1)
    if txn is not None:
        meta.txnid_most_bits, meta.txnid_least_bits = txn.most, txn.least
    return proto.make_entry(meta, body)


class World:
    def __init__(self, ledger: ManagedLedger, metadata: MemoryMetadataStore, factory: LedgerFactory) -> None:
        self.ledger = ledger
        self.factory = factory
        self.snapshots = MetadataSnapshotStore(metadata)
        self.changes = 0
        self.fail_appends = False

    async def append(self, data: bytes) -> Position:
        if self.fail_appends:
            raise ManagedLedgerError("disk full")
        return await self.ledger.add_entry(data)

    def changed(self) -> None:
        self.changes += 1

    def buffer(self, **options: Any) -> TransactionBuffer:
        return TransactionBuffer("persistent://public/default/t", self.ledger, ManualClock(), self.append,
                                 self.snapshots, on_change=self.changed, **options)

    async def send(self, tb: TransactionBuffer, body: bytes, txn: TxnId | None = None) -> Position:
        if txn is None:
            return await self.ledger.add_entry(message(body))
        tb.check_send(txn)
        tracked = tb.send_started(txn)
        position = await self.ledger.add_entry(message(body, txn))
        tb.send_finished(txn, position, tracked=tracked)
        return position


@pytest.fixture
async def world() -> World:
    metadata = MemoryMetadataStore()
    factory = LedgerFactory(MemoryLedgerStore(), metadata)
    return World(await factory.open("public/default/persistent/t"), metadata, factory)


async def test_max_read_position_follows_the_oldest_open_txn(world: World) -> None:
    tb = world.buffer()
    await tb.recover()
    assert tb.max_read_position() is None
    await world.send(tb, b"plain")
    first = await world.send(tb, b"a", T1)
    await world.send(tb, b"b", T2)
    await world.send(tb, b"c", T1)
    assert tb.max_read_position() == before(first)
    await tb.end(T1, TxnAction.COMMIT)
    assert tb.max_read_position() == before(tb.ongoing()[T2])
    marker = await tb.end(T2, TxnAction.ABORT) or world.ledger.last_confirmed
    assert tb.max_read_position() is None
    assert tb.aborted_index() == [(T2, marker)]
    assert world.changes >= 3


async def test_the_fence_holds_while_a_first_send_is_in_flight(world: World) -> None:
    tb = world.buffer()
    await tb.recover()
    before_send = await world.send(tb, b"plain-0")
    tb.send_started(T1)  # T1's first entry is being written; its position is not known yet
    assert tb.max_read_position() == before_send
    await world.send(tb, b"plain-1")  # lands after T1's place: must stay hidden
    assert tb.max_read_position() == before_send
    tb.send_finished(T1, None)  # the write failed: nothing of T1 holds readers back
    assert tb.max_read_position() is None


async def test_ending_is_idempotent_and_the_opposite_action_is_refused(world: World) -> None:
    tb = world.buffer()
    await tb.recover()
    await world.send(tb, b"a", T1)
    await tb.end(T1, TxnAction.ABORT)
    entries = world.ledger.number_of_entries()
    await tb.end(T1, TxnAction.ABORT)
    assert world.ledger.number_of_entries() == entries  # no second marker
    with pytest.raises(InvalidTxnStatus):
        await tb.end(T1, TxnAction.COMMIT)
    with pytest.raises(InvalidTxnStatus):
        tb.check_send(T1)
    await world.send(tb, b"b", T2)
    await asyncio.gather(tb.end(T2, TxnAction.COMMIT), tb.end(T2, TxnAction.COMMIT))
    assert world.ledger.number_of_entries() == entries + 2  # one entry and one marker
    with pytest.raises(InvalidTxnStatus):
        tb.check_send(T2)


async def test_a_failed_marker_write_changes_nothing(world: World) -> None:
    tb = world.buffer()
    await tb.recover()
    first = await world.send(tb, b"a", T1)
    world.fail_appends = True
    with pytest.raises(PersistenceError):
        await tb.end(T1, TxnAction.COMMIT)
    assert tb.max_read_position() == before(first)
    world.fail_appends = False
    await tb.end(T1, TxnAction.COMMIT)  # the coordinator's retry
    assert tb.max_read_position() is None


async def test_markers_carry_the_txn_and_an_empty_payload(world: World) -> None:
    tb = world.buffer()
    await tb.recover()
    await tb.end(T3, TxnAction.ABORT)
    entry = await world.ledger.read_entry(world.ledger.last_confirmed)
    meta = proto.parse_entry_metadata(entry.data)
    assert meta.marker_type == proto.markers.TXN_ABORT and txn_of(meta) == T3
    assert proto.entry_payload(entry.data) == b""


async def scenario(world: World, tb: TransactionBuffer) -> None:
    await world.send(tb, b"a", T1)
    await world.send(tb, b"p")
    await world.send(tb, b"b", T2)
    await tb.end(T2, TxnAction.ABORT)
    await world.send(tb, b"c", T3)
    await tb.end(T3, TxnAction.COMMIT)


@pytest.mark.parametrize("snapshot", ["none", "taken", "unreadable"])
async def test_recovery_rebuilds_the_same_view(world: World, snapshot: str) -> None:
    tb = world.buffer()
    await tb.recover()
    await scenario(world, tb)
    key = MetadataSnapshotStore.key(tb.topic)
    metadata = world.snapshots._metadata
    if snapshot == "taken":
        await tb.take_snapshot()
        saved = decode_snapshot((await metadata.get(key)).value)  # type: ignore[union-attr]
        assert saved.max_read_position == tb.max_read_position() and saved.aborted == tuple(tb.aborted_index())
    elif snapshot == "none":  # recovery takes no snapshot of a topic that replayed nothing: there may be none
        if await metadata.get(key) is not None:
            await metadata.delete(key)
        assert await metadata.get(key) is None
    else:
        await metadata.put(key, b"{not json")
    again = world.buffer()
    await again.recover()
    assert again.max_read_position() == tb.max_read_position()
    assert again.ongoing() == tb.ongoing()
    assert again.aborted_index() == tb.aborted_index()
    assert again.is_aborted(T2) and not again.is_aborted(T3)


async def test_recovery_replays_only_after_the_snapshot(world: World) -> None:
    tb = world.buffer()
    await tb.recover()
    for i in range(20):
        await world.send(tb, b"plain-%d" % i)
    await tb.take_snapshot()
    await world.send(tb, b"open", T1)
    again = world.buffer()
    await again.recover()
    assert again.recovered_entries == 1
    assert again.ongoing() == tb.ongoing()


def test_snapshot_round_trip_and_refusals() -> None:
    from magnetar.broker.transactions.snapshot import encode_snapshot

    snap = AbortedSnapshot(Position(3, 7), ((T1, Position(3, 2)), (T2, Position(3, 5))), 99)
    assert decode_snapshot(encode_snapshot(snap)) == snap
    for bad in (b"[]", b'{"version": 2}', b'{"version": 1}'):
        with pytest.raises(ValueError):
            decode_snapshot(bad)


async def test_first_sends_confirmed_out_of_order_keep_the_fence(world: World) -> None:
    """Found by the txn simulator: across a ledger rollover appends may be confirmed out of order."""
    tb = world.buffer()
    await tb.recover()
    fence = await world.send(tb, b"plain")
    assert tb.send_started(T1) and tb.send_started(T1)
    first = await world.ledger.add_entry(message(b"a", T1))
    second = await world.ledger.add_entry(message(b"b", T1))
    tb.send_finished(T1, second)  # the later one is confirmed first
    assert tb.max_read_position() == fence  # the earlier one is still unplaced: hold at the fence
    tb.send_finished(T1, first)
    assert tb.max_read_position() == before(first) and tb.ongoing() == {T1: first}
    assert not tb.send_started(T1)  # its first entry is known: later SENDs land after it


async def test_aborted_transactions_of_trimmed_ledgers_are_forgotten(world: World) -> None:
    from magnetar.ledger.api import RetentionPolicy

    tb = world.buffer()
    await tb.recover()
    await world.send(tb, b"a", T1)
    await tb.end(T1, TxnAction.ABORT)
    cursor = await world.ledger.open_cursor("all")
    await world.send(tb, b"b", T2)
    await tb.end(T2, TxnAction.ABORT)
    assert tb.prune_trimmed() == 0
    cursor.acknowledge_cumulative(world.ledger.last_confirmed)
    await cursor.flush()
    await world.ledger.close()  # the next ledger takes the writes; the old one can be trimmed
    world.ledger = await world.factory.open("public/default/persistent/t")
    await world.ledger.trim(RetentionPolicy())
    assert world.ledger.first_position() > dict(tb.aborted_index())[T2]
    tb._ledger = world.ledger
    assert tb.prune_trimmed() == 2 and tb.aborted_index() == []


async def test_an_end_while_a_first_send_is_in_flight(world: World) -> None:
    tb = world.buffer()
    await tb.recover()
    tracked = tb.send_started(T1)
    position = await world.ledger.add_entry(message(b"a", T1))
    await tb.end(T1, TxnAction.ABORT)  # its place came before the marker: the entry is T1's, and aborted
    tb.send_finished(T1, position, tracked=tracked)
    assert tb.max_read_position() is None and tb.ongoing() == {} and tb.is_aborted(T1)


async def test_plain_traffic_moves_the_snapshot_forward(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    import magnetar.broker.transactions.buffer as buffer_module

    monkeypatch.setattr(buffer_module, "SNAPSHOT_EVERY_ENTRIES", 3)
    tb = world.buffer(snapshot_min_interval_ms=0)
    await tb.recover()
    for i in range(3):
        await world.send(tb, b"p%d" % i)
        tb.note_appended()
    task = tb._snapshot_task
    assert task is not None
    await asyncio.wait_for(task, 5)
    saved = await world.snapshots.load(tb.topic)
    assert saved is not None and saved.max_read_position == world.ledger.last_confirmed


async def test_close_writes_a_snapshot_only_when_something_was_stored(world: World) -> None:
    tb = world.buffer()
    await tb.recover()
    await tb.close()
    assert await world.snapshots.load(tb.topic) is None  # an empty topic: nothing to remember, no write
    again = world.buffer()
    await again.recover()
    await world.send(again, b"open", T1)
    await again.close()
    saved = await world.snapshots.load(tb.topic)
    assert saved is not None and saved.max_read_position < world.ledger.last_confirmed  # before T1's entry
    third = world.buffer()
    await third.recover()
    assert third.recovered_entries == 1 and third.ongoing() == again.ongoing()  # the open txn, from its start
