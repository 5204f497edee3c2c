"""The pending-ack store's rules over a real cursor and an in-memory log: conflicts, batch indexes,
cumulative acks, commit and abort, a failed log write, replay."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence

import pytest

from magnetar.broker.errors import NotAllowed, PersistenceError
from magnetar.broker.subscription.consumer import SubType
from magnetar.broker.subscription.subscription import Subscription
from magnetar.broker.transactions.api import TransactionConflict, TxnAction, TxnId
from magnetar.broker.transactions.pending_ack import PendingAckStore
from magnetar.broker.transactions.pending_ack_log import (
    WHOLE,
    AckedId,
    AckRecord,
    EndRecord,
    Record,
    decode_record,
    encode_record,
)
from magnetar.core.clock import ManualClock
from magnetar.ledger.api import InitialPosition, ManagedLedgerError, Position
from magnetar.ledger.bitset import int_to_words
from magnetar.ledger.factory import LedgerFactory
from magnetar.metadata.memory import MemoryMetadataStore
from magnetar.storage.memory import MemoryLedgerStore

T1, T2 = TxnId(0, 1), TxnId(0, 2)


class MemoryLog:
    def __init__(self) -> None:
        self.records: list[bytes] = []
        self.released: set[int] = set()
        self.fail = False

    async def append(self, record: Record) -> object:
        if self.fail:
            raise ManagedLedgerError("disk full")
        self.records.append(encode_record(record))
        return len(self.records) - 1

    async def replay(self) -> Sequence[tuple[object, Record]]:
        return [(i, decode_record(r)) for i, r in enumerate(self.records) if i not in self.released]

    def release(self, handles: Iterable[object]) -> None:
        self.released.update(int(h) for h in handles)  # type: ignore[call-overload]

    async def close(self) -> None:
        pass

    async def delete(self) -> None:
        self.records.clear()


class Delay:
    """The store's wait before it flushes the cursor and releases committed records: the test ends it."""

    def __init__(self) -> None:
        self.over = asyncio.Event()

    async def sleep_ms(self, _delay_ms: int) -> None:
        await self.over.wait()


async def new_store(sub_type: int = SubType.SHARED, delay: Delay | None = None,
                    ) -> tuple[PendingAckStore, list[Position], MemoryLog]:
    factory = LedgerFactory(MemoryLedgerStore(), MemoryMetadataStore())
    ledger = await factory.open("public/default/persistent/t")
    positions = [await ledger.add_entry(b"m%d" % i) for i in range(4)]
    cursor = await ledger.open_cursor("sub", InitialPosition.EARLIEST)
    sub = Subscription("sub", ledger, cursor, ManualClock(), durable=True, read_batch_max=10, read_bytes_max=1 << 20)
    sub.sub_type = sub_type
    log = MemoryLog()
    store = PendingAckStore("persistent://public/default/t", sub, log, sleep_ms=(delay or Delay()).sleep_ms)
    return store, positions, log


async def released(store: PendingAckStore, delay: Delay) -> None:
    """Let the store's wait end and its release of committed records finish."""
    delay.over.set()
    await asyncio.wait_for(store.committed_released(), 10)


def whole(p: Position) -> AckedId:
    return AckedId(p, WHOLE, 0)


async def test_individual_acks_conflict_across_txns_not_within_one() -> None:
    store, pos, _ = await new_store()
    await store.acknowledge(T1, False, [whole(pos[0])])
    await store.acknowledge(T1, False, [whole(pos[0])])  # the same txn again: fine
    with pytest.raises(TransactionConflict, match="in pending ack status"):
        await store.acknowledge(T2, False, [whole(pos[1]), whole(pos[0])])
    assert not store.is_pending(pos[1])  # the whole ACK was refused: nothing of it reserved
    assert store.is_pending(pos[0])


async def test_batch_indexes_conflict_only_when_they_overlap() -> None:
    store, pos, _ = await new_store()
    await store.acknowledge(T1, False, [AckedId(pos[0], 0b0011, 4)])
    await store.acknowledge(T2, False, [AckedId(pos[0], 0b0100, 4)])
    with pytest.raises(TransactionConflict):
        await store.acknowledge(T2, False, [AckedId(pos[0], 0b0001, 4)])
    assert store.pending_mask(pos[0]) == 0b0111 and not store.is_pending(pos[0])
    await store.end(T1, TxnAction.COMMIT)
    cursor = store.sub.cursor
    assert cursor.batch_ack_set(pos[0]) == int_to_words(0b1100)  # indexes 2 and 3 still unacked
    with pytest.raises(TransactionConflict, match="already acked before"):
        await store.acknowledge(TxnId(0, 3), False, [AckedId(pos[0], 0b0001, 4)])


async def test_commit_makes_acks_real_and_abort_drops_them() -> None:
    delay = Delay()
    store, pos, log = await new_store(delay=delay)
    await store.acknowledge(T1, False, [whole(pos[0]), whole(pos[2])])
    await store.acknowledge(T2, False, [whole(pos[1])])
    await store.end(T1, TxnAction.COMMIT)
    await store.end(T2, TxnAction.ABORT)
    await store.end(T2, TxnAction.ABORT)  # again: nothing left, nothing written
    cursor = store.sub.cursor
    assert [cursor.is_acknowledged(p) for p in pos] == [True, False, True, False]
    assert not store.is_pending(pos[1]) and store.in_progress() == {}
    assert [type(decode_record(r)) for r in log.records] == [AckRecord, AckRecord, EndRecord, EndRecord]
    assert log.released == {1, 3}  # the abort's records at once; the commit's wait for the cursor's write
    await released(store, delay)
    assert log.released == {0, 1, 2, 3}  # every record of an ended transaction is released
    with pytest.raises(TransactionConflict, match="already acked before"):
        await store.acknowledge(T2, False, [whole(pos[0])])


async def test_cumulative_acks() -> None:
    store, pos, _ = await new_store(SubType.SHARED)
    with pytest.raises(NotAllowed):
        await store.acknowledge(T1, True, [whole(pos[1])])
    store, pos, _ = await new_store(SubType.EXCLUSIVE)
    with pytest.raises(NotAllowed):
        await store.acknowledge(T1, True, [whole(pos[1]), whole(pos[2])])
    await store.acknowledge(T2, False, [whole(pos[0])])
    with pytest.raises(TransactionConflict):
        await store.acknowledge(T1, True, [whole(pos[1])])  # across T2's pending individual ack
    await store.end(T2, TxnAction.ABORT)
    await store.acknowledge(T1, True, [whole(pos[1])])
    with pytest.raises(TransactionConflict):
        await store.acknowledge(T2, True, [whole(pos[2])])
    with pytest.raises(TransactionConflict):
        await store.acknowledge(T2, False, [whole(pos[0])])
    await store.end(T1, TxnAction.COMMIT)
    assert store.sub.cursor.mark_delete_position == pos[1]


async def test_a_failed_log_write_reserves_nothing() -> None:
    store, pos, log = await new_store()
    log.fail = True
    with pytest.raises(PersistenceError):
        await store.acknowledge(T1, False, [whole(pos[0])])
    assert not store.is_pending(pos[0]) and store.in_progress() == {}
    log.fail = False
    await store.acknowledge(T2, False, [whole(pos[0])])


async def test_replay_brings_back_exactly_the_pending_acks() -> None:
    delay = Delay()
    store, pos, log = await new_store(delay=delay)
    await store.acknowledge(T1, False, [whole(pos[0])])
    await store.acknowledge(T2, False, [AckedId(pos[1], 0b10, 2)])
    await store.end(T1, TxnAction.COMMIT)
    await released(store, delay)
    assert log.released == {0, 2}
    log.released.discard(2)  # a crash before the release of T1's end reached the log
    again = PendingAckStore(store.topic, store.sub, log, sleep_ms=delay.sleep_ms)
    await again.recover()
    await asyncio.wait_for(again.committed_released(), 10)
    assert log.released == {0, 2}  # replay releases what an end record settles
    assert set(again.in_progress()) == {T2}
    assert again.pending_mask(pos[1]) == 0b10 and not again.is_pending(pos[0])


async def test_a_cumulative_ack_inside_a_batch_acks_before_it_and_those_indexes() -> None:
    store, pos, log = await new_store(SubType.EXCLUSIVE)
    await store.acknowledge(T1, True, [AckedId(pos[2], 0b0011, 4)])
    assert store.cumulative == (T1, pos[1]) and store.pending_mask(pos[2]) == 0b0011
    await store.end(T1, TxnAction.COMMIT)
    cursor = store.sub.cursor
    assert cursor.mark_delete_position == pos[1]
    assert cursor.batch_ack_set(pos[2]) == int_to_words(0b1100) and not cursor.is_acknowledged(pos[2])
    again = PendingAckStore(store.topic, store.sub, log)
    await again.recover()
    assert again.in_progress() == {}


async def test_a_logged_commit_the_cursor_never_persisted_is_applied_again_by_replay() -> None:
    store, pos, log = await new_store()
    await store.acknowledge(T1, False, [whole(pos[0]), AckedId(pos[2], 0b01, 2)])
    await store.end(T1, TxnAction.COMMIT)
    assert log.released == set()  # the cursor has not been written since the commit: the log keeps it
    ledger = store.sub.ledger
    fresh = await ledger.open_cursor("after-crash", InitialPosition.EARLIEST)  # what a crash leaves: no acks
    sub = Subscription("after-crash", ledger, fresh, ManualClock(), durable=True, read_batch_max=10,
                       read_bytes_max=1 << 20)
    delay = Delay()
    again = PendingAckStore(store.topic, sub, log, sleep_ms=delay.sleep_ms)
    await again.recover()
    assert fresh.is_acknowledged(pos[0]) and fresh.batch_ack_set(pos[2]) == int_to_words(0b10)
    assert again.in_progress() == {} and not again.has_pending()
    await released(again, delay)
    assert log.released == {0, 1}  # the cursor is flushed now: the commit's records can go
