"""PIP-186 with ledgers in an object store: the two-phase proof of test_two_phase.py (deletes failing at random,
crashes at random points of both phases) over an ObjectLedgerStore on an in-memory bucket, every "process" on a
store instance of its own (so each restart seals the previous owner's ledgers with fences). After it settles:
zero orphans, zero dangling references, every unconsumed entry readable; the audit also lists object orphans
(data objects of a deleted ledger, as a create delayed past the delete leaves) and --fix removes them."""

from __future__ import annotations

import random

import pytest

from magnetar.broker.deletion.audit import audit
from magnetar.core.clock import ManualClock
from magnetar.ledger.factory import LedgerFactory
from magnetar.metadata.memory import MemoryMetadataStore
from magnetar.storage.faulty import FaultPlan
from magnetar.storage.objectstore import ObjectLedgerSettings, ObjectLedgerStore
from magnetar.storage.objectstore.memory import MemoryBucket, MemoryObjectClient
from tests.component.deletion.test_two_phase import (
    REFERENCES,
    ROUNDS,
    TOPICS,
    Disk,
    boot,
    crash_somewhere,
    settle,
    unconsumed_entries_are_all_readable,
)


async def new_store(bucket: MemoryBucket) -> ObjectLedgerStore:
    return await ObjectLedgerStore.open(MemoryObjectClient(bucket), prefix="p/",
                                        settings=ObjectLedgerSettings(flush_max_delay_ms=0))


@pytest.mark.parametrize("seed", range(4))
async def test_two_phase_on_objects_leaves_zero_orphans(seed: int) -> None:
    rng, bucket = random.Random(seed), MemoryBucket()
    disk = Disk(store=await new_store(bucket), metadata=MemoryMetadataStore())  # type: ignore[arg-type]
    plan = FaultPlan(random.Random(seed), ops=frozenset({"delete"}))
    for _ in range(ROUNDS):
        plan.arm(fail_probability=0.4)
        disk.store = await new_store(bucket)  # type: ignore[assignment]  # a new process: a new store instance
        proc = await boot(disk, plan, two_phase=True)
        await crash_somewhere(disk, proc, rng)
    disk.store = await new_store(bucket)  # type: ignore[assignment]
    proc = await settle(disk, plan, two_phase=True)
    report = await audit(disk.metadata, disk.store, proc.factory, live=True, references=REFERENCES)
    assert report.dangling == [] and report.orphans == [] and report.object_orphans == []
    await unconsumed_entries_are_all_readable(disk, proc)
    assert len(await disk.store.list_ledgers()) < TOPICS * 6  # the trimmed ledgers did go


async def test_the_audit_lists_object_orphans_and_fix_removes_their_data() -> None:
    bucket = MemoryBucket()
    store = await new_store(bucket)
    metadata = MemoryMetadataStore(clock=ManualClock())
    factory = LedgerFactory(store, metadata)
    ledger_id = (await store.create_ledger({"component": "managed-ledger"})).ledger_id
    await store.append(ledger_id, b"gone")
    key = f"p/ledgers/{ledger_id:020d}/0000000000"
    late_copy = bucket.objects[key]
    await store.delete(ledger_id)
    bucket.create(key, late_copy)  # a create delayed in the network lands after the delete
    report = await audit(metadata, store, factory, live=True)
    assert [(o.ledger_id, o.data_chunks) for o in report.object_orphans] == [(ledger_id, 1)]
    assert report.to_json()["objectOrphans"] == [{"ledgerId": ledger_id, "dataChunks": 1,
                                                   "sizeBytes": len(late_copy)}]
    fixed = await audit(metadata, store, factory, live=True, fix=object())  # type: ignore[arg-type]
    assert fixed.fixed == 1 and key not in bucket.objects
    assert [k.rsplit("/", 1)[1] for k in bucket.objects if k.startswith(f"p/ledgers/{ledger_id:020d}/")] == [
        "0000000001"]  # the seal stays as the tombstone
    assert (await audit(metadata, store, factory, live=True)).object_orphans == []
