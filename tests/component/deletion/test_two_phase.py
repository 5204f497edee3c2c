"""PIP-186 over the real managed ledger and in-memory stores that outlive a "process": storage deletes fail
at random, the process dies at random points of both phases (its tasks are cancelled mid-way and its
objects dropped, only the stores remain), many topics trim many ledgers. After it settles the audit finds
zero orphans, zero dangling references, and every unconsumed entry is still readable. The same scenario
with one phase leaks orphans (the figure the proof compares against)."""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass, field

import pytest

from magnetar.broker.compaction.state import referenced_ledgers
from magnetar.broker.deletion.audit import audit
from magnetar.broker.deletion.config import DeletionConfig
from magnetar.broker.deletion.messages import DeletionMessage, encode
from magnetar.broker.deletion.service import LedgerDeletionService, Outcome
from magnetar.core.clock import SystemClock
from magnetar.ledger.api import InitialPosition, ManagedLedgerConfig, ManagedLedgerError, Position, RetentionPolicy
from magnetar.ledger.deletion import LedgerComponent, PendingDeleteLedger
from magnetar.ledger.factory import LedgerFactory
from magnetar.metadata.memory import MemoryMetadataStore
from magnetar.storage.api import StorageError
from magnetar.storage.faulty import FaultPlan, FaultyLedgerStore
from magnetar.storage.memory import MemoryLedgerStore
from tests.sim.world import let_turns_pass

REFERENCES = (referenced_ledgers,)  # compacted ledgers live outside the managed-ledger records

WAIT_S = 20.0
TOPICS = 6
ROUNDS = 8
NOW = RetentionPolicy(time_ms=0, size_bytes=0)


@dataclass
class Disk:
    """What survives a crash: the stores, and what the test knows was confirmed."""

    store: MemoryLedgerStore = field(default_factory=MemoryLedgerStore)
    metadata: MemoryMetadataStore = field(default_factory=MemoryMetadataStore)
    confirmed: dict[str, dict[Position, bytes]] = field(default_factory=dict)


@dataclass
class Process:
    factory: LedgerFactory
    service: LedgerDeletionService | None
    faulty: FaultyLedgerStore


async def boot(disk: Disk, plan: FaultPlan, *, two_phase: bool) -> Process:
    faulty = FaultyLedgerStore(disk.store, plan)
    factory = LedgerFactory(faulty, disk.metadata, config=ManagedLedgerConfig(max_entries_per_ledger=3))
    if not two_phase:
        return Process(factory, None, faulty)
    config = DeletionConfig(parallelism=2, reconsume_later_s=0, max_retry_count=1_000)
    service = LedgerDeletionService(factory, faulty, SystemClock(), config, references=REFERENCES)
    for _ in range(50):  # opening the family can meet injected faults too: a real broker retries its start
        try:
            await service.start()
            break
        except (ManagedLedgerError, StorageError):
            continue
    else:
        raise AssertionError("the deletion service never started")
    await service.reclaim_orphans(disk.metadata)
    return Process(factory, service, faulty)


async def workload(disk: Disk, proc: Process, rng: random.Random) -> None:
    """Each topic appends a few entries, its subscription acks most of what exists, then it trims."""
    for t in range(TOPICS):
        name = f"t/ns/persistent/topic-{t}"
        ledger = await proc.factory.open(name)
        cursor = ledger.cursors.get("sub") or await ledger.open_cursor("sub", InitialPosition.EARLIEST)
        for n in range(rng.randint(2, 7)):
            data = f"{name}#{rng.random()}:{n}".encode()
            position = await ledger.add_entry(data)
            disk.confirmed.setdefault(name, {})[position] = data
        keep = rng.randint(0, 2)  # the last few stay unconsumed
        positions = sorted(p for p in disk.confirmed[name] if p > cursor.mark_delete_position)
        if len(positions) > keep:
            cursor.acknowledge_cumulative(positions[-keep - 1])
            await cursor.flush()
        await ledger.trim(NOW)


async def crash_somewhere(disk: Disk, proc: Process, rng: random.Random) -> None:
    """Run a workload and kill the process after a random number of loop turns (or when it is done)."""
    work = asyncio.ensure_future(workload(disk, proc, rng))
    turns = rng.randint(0, 400)  # the crash point, drawn from the seed: loop turns, not time
    for _ in range(turns // 10):
        if work.done():
            break
        await let_turns_pass(10)
    work.cancel()
    if proc.service is not None:
        for task in proc.service._tasks:
            task.cancel()
    await asyncio.gather(work, *(proc.service._tasks if proc.service else []), return_exceptions=True)


async def settle(disk: Disk, plan: FaultPlan, *, two_phase: bool) -> Process:
    plan.disarm()
    proc = await boot(disk, plan, two_phase=two_phase)
    for t in range(TOPICS):  # a last trim queues again what a crash left listed
        await (await proc.factory.open(f"t/ns/persistent/topic-{t}")).trim(NOW)
    if proc.service is not None:
        await asyncio.wait_for(proc.service.drained(), WAIT_S)
    return proc


async def unconsumed_entries_are_all_readable(disk: Disk, proc: Process) -> None:
    for name, confirmed in disk.confirmed.items():
        ledger = await proc.factory.open(name)
        mark = ledger.cursors["sub"].mark_delete_position
        reader = ledger.new_non_durable_cursor(ledger.first_position(), "check")
        found: dict[Position, bytes] = {}
        for _ in range(1_000):
            batch = await reader.read_entries(50)
            if not batch:
                break
            found.update((e.position, e.data) for e in batch)
        expected = {p: d for p, d in confirmed.items() if p > mark}
        assert {p: found.get(p) for p in expected} == expected, f"{name} lost unconsumed entries"


async def run_scenario(seed: int, *, two_phase: bool) -> tuple[int, Disk, Process]:
    rng = random.Random(seed)
    disk = Disk()
    plan = FaultPlan(random.Random(seed), ops=frozenset({"delete"}))
    for _ in range(ROUNDS):
        plan.arm(fail_probability=0.4)
        proc = await boot(disk, plan, two_phase=two_phase)
        await crash_somewhere(disk, proc, rng)
    proc = await settle(disk, plan, two_phase=two_phase)
    report = await audit(disk.metadata, disk.store, proc.factory, live=True, references=REFERENCES)
    assert report.dangling == [], "a ledger was deleted while still referenced"
    await unconsumed_entries_are_all_readable(disk, proc)
    return len(report.orphans), disk, proc


@pytest.mark.parametrize("seed", range(6))
async def test_two_phase_leaves_zero_orphans_after_faults_and_crashes(seed: int) -> None:
    orphans, disk, _ = await run_scenario(seed, two_phase=True)
    assert orphans == 0
    assert len(await disk.store.list_ledgers()) < TOPICS * 6  # the trimmed ledgers did go


async def test_one_phase_leaks_orphans_in_the_same_scenario() -> None:
    leaked = [(await run_scenario(seed, two_phase=False))[0] for seed in range(3)]
    assert sum(leaked) > 0


async def test_forged_or_stale_messages_delete_nothing_and_are_acked() -> None:
    disk = Disk()
    proc = await boot(disk, FaultPlan(random.Random(1), ops=frozenset({"delete"})), two_phase=True)
    assert proc.service is not None
    ledger = await proc.factory.open("t/ns/persistent/owner")
    await ledger.add_entry(b"x")
    listed = ledger.ledgers()[-1].ledger_id
    other = await proc.factory.open("t/ns/persistent/other")
    await other.add_entry(b"y")
    others = other.ledgers()[-1].ledger_id

    async def outcome(request: PendingDeleteLedger) -> Outcome:
        return await proc.service.handle(DeletionMessage(request))  # type: ignore[union-attr]

    assert await outcome(PendingDeleteLedger("t/ns/persistent/owner", listed)) is Outcome.IN_USE
    wrong_owner = PendingDeleteLedger("t/ns/persistent/gone-topic", others)
    assert await outcome(wrong_owner) is Outcome.MISMATCH  # its storage metadata names another owner
    await other.delete()  # two phases: its ledger is queued, then really deleted by the service
    await asyncio.wait_for(proc.service.drained(), WAIT_S)
    assert others not in await disk.store.list_ledgers()
    wrong_component = PendingDeleteLedger("t/ns/persistent/unlisted", listed, LedgerComponent.SCHEMA_STORAGE)
    assert await outcome(wrong_component) is Outcome.MISMATCH
    assert await outcome(PendingDeleteLedger("t/ns/persistent/owner", 999_999)) is Outcome.IN_USE  # newer: being made
    assert await outcome(PendingDeleteLedger("t/ns/persistent/gone", 999_999)) is Outcome.ALREADY_GONE
    mismatch_ledger = (await disk.store.create_ledger({"application": "someone-else"})).ledger_id
    assert await outcome(PendingDeleteLedger("t/ns/persistent/gone", mismatch_ledger)) is Outcome.MISMATCH
    assert mismatch_ledger in await disk.store.list_ledgers()
    assert listed in await disk.store.list_ledgers()
    # garbage on the deletion topic: acked, counted, nothing deleted
    before = set(await disk.store.list_ledgers())
    family = await proc.factory.open(proc.service.topics.partitions[0])
    await family.add_entry(b"\x00garbage")
    await family.add_entry(encode(DeletionMessage(PendingDeleteLedger("t/ns/persistent/owner", listed)),
                                  publish_time_ms=0, sequence_id=0)[:-3] + b"xyz")  # checksum broken
    await asyncio.wait_for(proc.service.drained(), WAIT_S)
    assert proc.service.counters.outcomes[Outcome.INVALID] == 2
    assert listed in set(await disk.store.list_ledgers()) and before <= set(await disk.store.list_ledgers())


async def test_failures_go_to_retry_then_dlq() -> None:
    disk = Disk()
    plan = FaultPlan(random.Random(2), ops=frozenset({"delete"}))
    faulty = FaultyLedgerStore(disk.store, plan)
    factory = LedgerFactory(faulty, disk.metadata)
    service = LedgerDeletionService(factory, faulty, SystemClock(),
                                    DeletionConfig(parallelism=1, reconsume_later_s=0, max_retry_count=2),
                                    references=REFERENCES)
    await service.start()
    ledger = (await disk.store.create_ledger({"application": "magnetar", "component": "managed-ledger",
                                              "pulsar/managed-ledger": "t/ns/persistent/gone"})).ledger_id
    plan.arm(fail_probability=1.0)
    assert ledger in await service.queue.enqueue([PendingDeleteLedger("t/ns/persistent/gone", ledger)])
    dlq = await factory.open(service.topics.dlq)

    async def dead_lettered() -> None:
        async with service._progress:
            await service._progress.wait_for(lambda: dlq.entries_added > 0)

    await asyncio.wait_for(dead_lettered(), WAIT_S)
    assert service.counters.outcomes[Outcome.RETRIED] == 2
    assert service.counters.outcomes[Outcome.DEAD_LETTERED] == 1
    assert ledger in await disk.store.list_ledgers()  # given up on, and still visible to the audit
    report = await audit(disk.metadata, disk.store, factory, live=True, references=REFERENCES)
    assert [o.ledger_id for o in report.orphans] == []  # pending in the DLQ: not an orphan
    await service.close()


async def test_audit_counts_compacted_ledgers_named_by_the_compaction_cursor_as_referenced() -> None:
    from magnetar.broker.compaction.state import COMPACTION_CURSOR, LEDGER_PROPERTY

    disk = Disk()
    factory = LedgerFactory(disk.store, disk.metadata)
    ledger = await factory.open("t/ns/persistent/compacted")
    await ledger.add_entry(b"k=v")
    compacted = await disk.store.create_ledger({"application": "magnetar", "component": "compacted-ledger",
                                                "pulsar/managed-ledger": "t/ns/persistent/compacted"})
    stray = await disk.store.create_ledger({"application": "magnetar", "component": "compacted-ledger",
                                            "pulsar/managed-ledger": "t/ns/persistent/compacted"})
    cursor = await ledger.open_cursor(COMPACTION_CURSOR, InitialPosition.EARLIEST)
    await cursor.set_properties({LEDGER_PROPERTY: compacted.ledger_id})
    report = await audit(disk.metadata, disk.store, factory, live=False, references=REFERENCES)  # a stopped data dir
    assert [o.ledger_id for o in report.orphans] == [stray.ledger_id]


async def test_audit_finds_offloaded_copies_nothing_names_and_fix_deletes_them() -> None:
    from magnetar.broker.deletion.service import OffloadStoreDeleter
    from magnetar.storage.offload import BlockOffloadStore, OffloadSettings
    from magnetar.storage.offload.memory import MemoryBlobStore

    disk = Disk()
    blobs = MemoryBlobStore()
    offload = BlockOffloadStore(blobs, OffloadSettings(driver="memory"))
    factory = LedgerFactory(disk.store, disk.metadata, config=ManagedLedgerConfig(max_entries_per_ledger=2),
                            offload_store=offload)
    service = LedgerDeletionService(factory, disk.store, SystemClock(), DeletionConfig(parallelism=1),
                                    OffloadStoreDeleter(offload), references=REFERENCES)
    await service.start()
    ledger = await factory.open("t/ns/persistent/offloaded")
    for i in range(5):
        await ledger.add_entry(f"m{i}".encode())
    sealed = ledger.ledgers()[0].ledger_id
    await ledger.offload_ledger(sealed)  # named by the record: not an orphan
    stray = offload.new_context(sealed)  # a copy nothing names (an attempt whose record write was lost)

    async def read(first: int, last: int) -> list[bytes]:
        return await ledger.read_range(sealed, first, last)

    await offload.write_ledger(stray, 2, read, {"pulsar/managed-ledger": "t/ns/persistent/offloaded"})
    report = await service.audit(disk.metadata, fix=True)
    assert [(o.ledger_id, o.uuid, o.owner) for o in report.offload_orphans] == [
        (sealed, stray.uuid, "t/ns/persistent/offloaded")]
    await asyncio.wait_for(service.drained(), WAIT_S)
    assert [c.uuid for c in await offload.list_copies()] == [ledger.ledgers()[0].offload.context.uuid]  # type: ignore[union-attr]
    await service.close()
