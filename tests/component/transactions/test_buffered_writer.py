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
from magnetar.ledger.api import InitialPosition, ManagedLedger, Position
from magnetar.ledger.factory import LedgerFactory
from magnetar.metadata.memory import MemoryMetadataStore
from magnetar.protocol.txn_log_batch import LogKind, decode_entry, encode_batch, is_batched
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


class GatedLedger:
    """A managed ledger whose appends wait at a gate: what the writer does while an append is in flight."""

    def __init__(self, ml: ManagedLedger) -> None:
        self.ml = ml
        self.gate = asyncio.Event()
        self.requested: list[bytes] = []
        self.appends_seen = asyncio.Condition()

    def add_entry_future(self, data: bytes | memoryview) -> asyncio.Future[Position]:
        self.requested.append(bytes(data))
        result: asyncio.Future[Position] = asyncio.get_running_loop().create_future()

        async def later() -> None:
            await self.gate.wait()
            try:
                result.set_result(await self.ml.add_entry(bytes(data)))
            except Exception as exc:
                result.set_exception(exc)

        task = asyncio.ensure_future(later())
        TASKS.add(task)
        task.add_done_callback(TASKS.discard)
        self._notify()
        return result

    def _notify(self) -> None:
        async def tell() -> None:
            async with self.appends_seen:
                self.appends_seen.notify_all()

        task = asyncio.ensure_future(tell())
        TASKS.add(task)
        task.add_done_callback(TASKS.discard)

    def resume_writes(self) -> bool:
        return self.ml.resume_writes()

    async def wait_for_appends(self, count: int) -> None:
        async with self.appends_seen:
            await asyncio.wait_for(self.appends_seen.wait_for(lambda: len(self.requested) >= count), WAIT_S)


TASKS: set[asyncio.Task[None]] = set()


async def test_a_record_into_an_idle_log_is_written_at_once_as_a_plain_entry() -> None:
    ml = await open_log()
    slow = BatchingConfig(enabled=True, max_records=100, max_bytes=1 << 20, max_delay_ms=60_000)
    writer = BufferedWriter(ml, LogKind.TRANSACTION, slow)
    (position,) = await written([writer.write(b"only")])  # would time out if it waited for the 60 s delay
    assert (position.batch_size, position.batch_index) == (1, 0)
    assert await entries_of(ml) == [b"only"]  # plain: nothing else was there to batch with
    assert sum(writer.metrics.triggers.values()) == 0


async def test_2000_small_records_make_one_lone_entry_then_batches_of_512_in_order() -> None:
    ml = await open_log()
    writer = BufferedWriter(ml, LogKind.TRANSACTION, BatchingConfig(enabled=True, max_delay_ms=60_000))
    records = [f"r{i}".encode() for i in range(2000)]
    positions = await written([writer.write(r) for r in records])
    entries = await entries_of(ml)
    # the first finds the log idle and goes at once; the other 1999 queue behind it
    assert entries[0] == b"r0" and not is_batched(entries[0])
    assert [len(decode_entry(LogKind.TRANSACTION, e)) for e in entries[1:]] == [512, 512, 512, 463]
    assert positions == sorted(positions)
    assert [(p.batch_size, p.batch_index) for p in positions[:3]] == [(1, 0), (512, 0), (512, 1)]
    assert [(p.batch_size, p.batch_index) for p in positions[-1:]] == [(463, 462)]
    flat = [r for e in entries for r in decode_entry(LogKind.TRANSACTION, e)]
    assert flat == records
    assert writer.metrics.triggers[FlushTrigger.MAX_RECORDS] == 3
    assert writer.metrics.triggers[FlushTrigger.IDLE] == 1  # the last 463 went when the log went idle
    assert writer.metrics.triggers[FlushTrigger.MAX_DELAY] == 0


async def test_records_queued_behind_an_append_go_as_one_entry_when_it_completes() -> None:
    ml = await open_log()
    gated = GatedLedger(ml)
    slow = BatchingConfig(enabled=True, max_records=100, max_bytes=1 << 20, max_delay_ms=60_000)
    writer = BufferedWriter(gated, LogKind.PENDING_ACK, slow)
    futures = [writer.write(f"q{i}".encode()) for i in range(10)]
    await gated.wait_for_appends(1)
    assert gated.requested == [b"q0"] and writer.pending_records == 9  # a batch fills behind the append
    gated.gate.set()
    positions = await written(futures)
    assert [(p.batch_size, p.batch_index) for p in positions] == [(1, 0), *((9, i) for i in range(9))]
    assert writer.metrics.triggers[FlushTrigger.IDLE] == 1
    assert [len(decode_entry(LogKind.PENDING_ACK, e)) for e in await entries_of(ml)] == [1, 9]


async def test_delay_flushes_a_batch_while_the_previous_append_is_still_in_flight() -> None:
    ml = await open_log()
    gated = GatedLedger(ml)
    config = BatchingConfig(enabled=True, max_records=100, max_bytes=1 << 20, max_delay_ms=5)
    writer = BufferedWriter(gated, LogKind.TRANSACTION, config)
    first = writer.write(b"lead")
    queued = [writer.write(b"a"), writer.write(b"b")]
    timer = writer._timer
    assert timer is not None
    later = writer.write(b"c")
    assert writer._timer is timer  # armed once per batch, by its first record, never re-armed
    await gated.wait_for_appends(2)  # the delay flushed a second append; the first is still held
    assert gated.requested[1:] == [encode_batch(LogKind.TRANSACTION, [b"a", b"b", b"c"])]
    assert not first.done()
    assert writer.metrics.triggers[FlushTrigger.MAX_DELAY] == 1
    gated.gate.set()
    positions = await written([first, *queued, later])
    assert positions == sorted(positions)
    assert [r for e in await entries_of(ml) for r in decode_entry(LogKind.TRANSACTION, e)] == [
        b"lead", b"a", b"b", b"c"]


async def test_size_trigger_flushes_before_max_records() -> None:
    ml = await open_log()
    gated = GatedLedger(ml)
    writer = BufferedWriter(gated, LogKind.PENDING_ACK, BatchingConfig(enabled=True, max_records=1000,
                                                                       max_bytes=128 * 1024, max_delay_ms=60_000))
    lead = writer.write(b"lead")
    record = b"x" * (32 * 1024)
    futures = [writer.write(record) for _ in range(4)]
    assert writer.metrics.triggers[FlushTrigger.MAX_SIZE] == 1  # flushed on the 4th, while lead is in flight
    gated.gate.set()
    positions = await written([lead, *futures])
    assert {p.batch_size for p in positions[1:]} == {4}
    assert writer.metrics.triggers[FlushTrigger.MAX_DELAY] == 0


async def test_large_record_is_written_alone_after_what_was_pending_and_in_order() -> None:
    ml = await open_log()
    writer = BufferedWriter(ml, LogKind.TRANSACTION, ON)
    big = b"B" * ON.max_bytes
    futures = [writer.write(b"a"), writer.write(b"b"), writer.write(b"b2"), writer.write(big), writer.write(b"c")]
    positions = await written(futures)
    assert positions == sorted(positions)
    entries = await entries_of(ml)
    assert [decode_entry(LogKind.TRANSACTION, e) for e in entries] == [[b"a"], [b"b", b"b2"], [big], [b"c"]]
    assert not is_batched(entries[2])  # written plain, unbatched
    assert positions[3].batch_size == 1
    assert writer.metrics.triggers[FlushTrigger.LARGE_DATA] == 1


async def test_switching_batching_on_and_off_applies_at_the_next_write_in_order() -> None:
    ml = await open_log()
    gated = GatedLedger(ml)
    writer = BufferedWriter(gated, LogKind.TRANSACTION, BatchingConfig(enabled=False))
    futures = [writer.write(b"p0"), writer.write(b"p1")]  # plain: one entry each
    writer.reconfigure(BatchingConfig(enabled=True, max_records=100, max_bytes=1 << 20, max_delay_ms=60_000))
    futures += [writer.write(b"b0"), writer.write(b"b1")]  # behind appends in flight: buffered
    assert writer.pending_records == 2
    writer.reconfigure(BatchingConfig(enabled=False))  # off: what is buffered goes first, as one entry
    futures.append(writer.write(b"p2"))
    assert writer.pending_records == 0
    gated.gate.set()
    positions = await written(futures)
    assert positions == sorted(positions)
    entries = await entries_of(ml)
    assert [decode_entry(LogKind.TRANSACTION, e) for e in entries] == [[b"p0"], [b"p1"], [b"b0", b"b1"], [b"p2"]]
    assert [is_batched(e) for e in entries] == [False, False, True, False]


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
    flushed = [writer.write(f"f{i}".encode()) for i in range(11)]  # the first alone, then max records: in storage
    pending = [writer.write(b"late-1"), writer.write(b"late-2")]
    await asyncio.wait_for(writer.close(), WAIT_S)
    assert all(f.done() and f.exception() is None for f in flushed)
    assert all(isinstance(f.exception(), WriterClosed) for f in pending)
    after = writer.write(b"after-close")
    assert isinstance(after.exception(), WriterClosed)
    assert len(await entries_of(ml)) == 2


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
    writer = BufferedWriter(ml, LogKind.TRANSACTION, BatchingConfig(enabled=True, max_delay_ms=60_000))
    lead, *positions = await written([writer.write(f"t{i}".encode()) for i in range(-1, 4)])
    assert {p.batch_size for p in positions} == {4}  # behind the lead record: one batch
    plain = BufferedWriter(ml, LogKind.TRANSACTION, BatchingConfig(enabled=False))
    (lone,) = await written([plain.write(b"lone")])
    for p in [lead, *positions[:3]]:
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
