"""PIP-160's buffered writer over a real managed ledger (in-memory and fault-injecting stores)."""

from __future__ import annotations

import asyncio
import random

import pytest

from magnetar.broker.transactions.buffered_writer import (
    BatchingConfig,
    BufferedWriter,
    FlushTrigger,
    RecordPosition,
    WriterClosed,
    WriterError,
)
from magnetar.broker.transactions.log_records import release, replay
from magnetar.ledger.api import InitialPosition, ManagedLedger
from magnetar.ledger.factory import LedgerFactory
from magnetar.metadata.memory import MemoryMetadataStore
from magnetar.protocol.txn_log_batch import LogKind, decode_entry, is_batched
from magnetar.storage.faulty import FaultPlan, FaultyLedgerStore
from magnetar.storage.memory import MemoryLedgerStore

WAIT_S = 10.0
ON = BatchingConfig(enabled=True, max_records=512, max_bytes=128 * 1024, max_delay_ms=1)
LOG = "pulsar/system/persistent/__transaction_log_0"


async def open_log(store: MemoryLedgerStore | FaultyLedgerStore | None = None,
                   metadata: MemoryMetadataStore | None = None) -> ManagedLedger:
    factory = LedgerFactory(store or MemoryLedgerStore(), metadata or MemoryMetadataStore())
    return await factory.open(LOG)


async def entries_of(ml: ManagedLedger) -> list[bytes]:
    reader = ml.new_non_durable_cursor(ml.first_position(), "check")
    out: list[bytes] = []
    for _ in range(10_000):
        batch = await reader.read_entries(100)
        if not batch:
            return out
        out.extend(e.data for e in batch)
    raise AssertionError("reader did not finish")


async def written(futures: list[asyncio.Future[RecordPosition]]) -> list[RecordPosition]:
    return list(await asyncio.wait_for(asyncio.gather(*futures), WAIT_S))


async def test_2000_small_records_with_max_512_make_4_entries_in_order() -> None:
    ml = await open_log()
    writer = BufferedWriter(ml, LogKind.TRANSACTION, ON)
    records = [f"r{i}".encode() for i in range(2000)]
    positions = await written([writer.write(r) for r in records])
    entries = await entries_of(ml)
    assert len(entries) == 4
    assert [len(decode_entry(LogKind.TRANSACTION, e)) for e in entries] == [512, 512, 512, 464]
    assert positions == sorted(positions)
    assert [(p.batch_size, p.batch_index) for p in positions[:2]] == [(512, 0), (512, 1)]
    assert [(p.batch_size, p.batch_index) for p in positions[-1:]] == [(464, 463)]
    flat = [r for e in entries for r in decode_entry(LogKind.TRANSACTION, e)]
    assert flat == records
    assert writer.metrics.triggers[FlushTrigger.MAX_RECORDS] == 3
    assert writer.metrics.triggers[FlushTrigger.MAX_DELAY] == 1


async def test_size_trigger_flushes_before_max_records() -> None:
    ml = await open_log()
    writer = BufferedWriter(ml, LogKind.PENDING_ACK, BatchingConfig(enabled=True, max_records=1000,
                                                                    max_bytes=128 * 1024, max_delay_ms=1000))
    record = b"x" * (32 * 1024)
    positions = await written([writer.write(record) for _ in range(4)])
    assert {p.batch_size for p in positions} == {4}
    assert writer.metrics.triggers[FlushTrigger.MAX_SIZE] == 1
    assert writer.metrics.triggers[FlushTrigger.MAX_DELAY] == 0


async def test_delay_trigger_writes_a_lone_record() -> None:
    ml = await open_log()
    writer = BufferedWriter(ml, LogKind.TRANSACTION, BatchingConfig(enabled=True, max_records=100,
                                                                    max_bytes=1 << 20, max_delay_ms=5))
    (position,) = await written([writer.write(b"only")])
    assert (position.batch_size, position.batch_index) == (1, 0)
    assert writer.metrics.triggers[FlushTrigger.MAX_DELAY] == 1
    (entry,) = await entries_of(ml)
    assert is_batched(entry)  # a batch of one: the delay flushed it, not the size rule


async def test_large_record_is_written_alone_after_what_was_pending_and_in_order() -> None:
    ml = await open_log()
    writer = BufferedWriter(ml, LogKind.TRANSACTION, ON)
    big = b"B" * ON.max_bytes
    futures = [writer.write(b"a"), writer.write(b"b"), writer.write(big), writer.write(b"c")]
    positions = await written(futures)
    assert positions == sorted(positions)
    entries = await entries_of(ml)
    assert [decode_entry(LogKind.TRANSACTION, e) for e in entries] == [[b"a", b"b"], [big], [b"c"]]
    assert not is_batched(entries[1])  # written plain, unbatched
    assert positions[2].batch_size == 1
    assert writer.metrics.triggers[FlushTrigger.LARGE_DATA] == 1


async def test_disabled_writes_plain_entries() -> None:
    ml = await open_log()
    writer = BufferedWriter(ml, LogKind.TRANSACTION, BatchingConfig(enabled=False))
    positions = await written([writer.write(f"p{i}".encode()) for i in range(5)])
    entries = await entries_of(ml)
    assert entries == [f"p{i}".encode() for i in range(5)]
    assert all(not p.batched for p in positions)
    assert writer.metrics.entries_written == 5


async def test_enabled_with_max_records_1_behaves_as_disabled() -> None:
    ml = await open_log()
    writer = BufferedWriter(ml, LogKind.TRANSACTION, BatchingConfig(enabled=True, max_records=1))
    await written([writer.write(b"x"), writer.write(b"y")])
    assert await entries_of(ml) == [b"x", b"y"]


@pytest.mark.parametrize("probability", [1.0, 0.3])
async def test_failing_storage_fails_every_affected_caller_exactly_once_and_recovers(probability: float) -> None:
    plan = FaultPlan(random.Random(7))
    ml = await open_log(FaultyLedgerStore(MemoryLedgerStore(), plan))
    writer = BufferedWriter(ml, LogKind.TRANSACTION, BatchingConfig(enabled=True, max_records=10,
                                                                    max_bytes=128 * 1024, max_delay_ms=1))
    plan.arm(fail_probability=probability)
    futures = [writer.write(f"f{i}".encode()) for i in range(200)]
    done, _ = await asyncio.wait(futures, timeout=WAIT_S)
    assert len(done) == len(futures)  # every caller heard, once (a future settles once)
    failed = [f for f in futures if f.exception() is not None]
    assert failed, "the plan injected no fault"
    assert all(isinstance(f.exception(), WriterError) for f in failed)
    if probability == 1.0:
        assert len(failed) == len(futures)
    plan.disarm()
    await asyncio.wait_for(writer.flush(), WAIT_S)
    # the writer resumed the ledger: later writes succeed and land after the ones that did
    positions = await written([writer.write(b"after") for _ in range(3)])
    stored = [r for e in await entries_of(ml) for r in decode_entry(LogKind.TRANSACTION, e)]
    ok = [f.result() for f in futures if f.exception() is None]
    assert all(p < positions[0] for p in ok)
    assert stored.count(b"after") == 3
    assert len(stored) == len(ok) + 3  # a failed record is never stored


async def test_close_fails_pending_records_and_completes_flushed_ones() -> None:
    ml = await open_log()
    writer = BufferedWriter(ml, LogKind.TRANSACTION, BatchingConfig(enabled=True, max_records=10,
                                                                    max_bytes=128 * 1024, max_delay_ms=10_000))
    flushed = [writer.write(f"f{i}".encode()) for i in range(10)]  # max records: handed to storage
    pending = [writer.write(b"late-1"), writer.write(b"late-2")]
    await asyncio.wait_for(writer.close(), WAIT_S)
    assert all(f.done() and f.exception() is None for f in flushed)
    assert all(isinstance(f.exception(), WriterClosed) for f in pending)
    after = writer.write(b"after-close")
    assert isinstance(after.exception(), WriterClosed)
    assert len(await entries_of(ml)) == 1


async def test_mixed_plain_and_batched_log_replays_to_the_same_records() -> None:
    metadata = MemoryMetadataStore()
    store = MemoryLedgerStore()
    ml = await open_log(store, metadata)
    cursor = await ml.open_cursor("log-cursor", InitialPosition.EARLIEST)
    plain = BufferedWriter(ml, LogKind.PENDING_ACK, BatchingConfig(enabled=False))
    await written([plain.write(b"p1"), plain.write(b"p2")])
    batched = BufferedWriter(ml, LogKind.PENDING_ACK, ON)  # switched on at runtime: a new writer
    await written([batched.write(f"b{i}".encode()) for i in range(5)])
    await written([plain.write(b"p3")])
    replayed = [record async for _, record in replay(cursor, LogKind.PENDING_ACK)]
    assert replayed == [b"p1", b"p2", b"b0", b"b1", b"b2", b"b3", b"b4", b"p3"]


async def test_entry_kept_until_every_index_released_and_released_records_not_replayed_after_restart() -> None:
    metadata = MemoryMetadataStore()
    store = MemoryLedgerStore()
    factory = LedgerFactory(store, metadata)
    ml = await factory.open(LOG)
    cursor = await ml.open_cursor("log-cursor", InitialPosition.EARLIEST)
    writer = BufferedWriter(ml, LogKind.TRANSACTION, ON)
    positions = await written([writer.write(f"t{i}".encode()) for i in range(4)])
    plain = BufferedWriter(ml, LogKind.TRANSACTION, BatchingConfig(enabled=False))
    (lone,) = await written([plain.write(b"lone")])
    for p in positions[:3]:
        release(cursor, p)
    assert not cursor.is_acknowledged(positions[0].entry)  # index 3 is still needed
    release(cursor, lone)
    await cursor.flush()
    await factory.close()

    factory = LedgerFactory(store, metadata)
    ml = await factory.open(LOG)
    cursor = ml.cursors["log-cursor"]
    assert [r async for _, r in replay(cursor, LogKind.TRANSACTION)] == [b"t3"]
    release(cursor, positions[3])
    assert cursor.is_acknowledged(positions[3].entry)  # the whole entry goes with its last index
    assert [r async for _, r in replay(cursor, LogKind.TRANSACTION)] == []


@pytest.mark.parametrize(
    ("config", "key"),
    [
        (BatchingConfig(enabled=True, max_records=9), "transactionLogBatchedWriteMaxRecords"),
        (BatchingConfig(enabled=True, max_bytes=1024), "transactionLogBatchedWriteMaxSize"),
        (BatchingConfig(enabled=True, max_delay_ms=0), "transactionLogBatchedWriteMaxDelayInMillis"),
    ],
)
def test_validator_names_the_bad_key(config: BatchingConfig, key: str) -> None:
    (problem,) = config.problems("transactionLogBatchedWrite")
    assert problem.startswith(key)
    assert BatchingConfig(enabled=False, max_records=0).problems("x") == []
    assert ON.problems("transactionLogBatchedWrite") == []
