"""The managed ledger on the object store: a new owner's recovery fences the old owner through the bucket (the
old one's next add fails before it ever touches metadata), and offload still works as a move to another store
(copy the sealed ledger, delete it from the bucket, read it back from the copy)."""

from __future__ import annotations

import pytest

from magnetar.core.clock import ManualClock
from magnetar.ledger.api import ManagedLedgerConfig, ManagedLedgerFenced
from magnetar.ledger.factory import LedgerFactory
from magnetar.ledger.states import LedgerState
from magnetar.metadata.memory import MemoryMetadataStore
from magnetar.storage.api import LedgerFenced, LedgerNotFound
from magnetar.storage.objectstore import ObjectLedgerSettings, ObjectLedgerStore
from magnetar.storage.objectstore.memory import MemoryBucket, MemoryObjectClient
from magnetar.storage.offload import BlockOffloadStore, OffloadSettings
from magnetar.storage.offload.memory import MemoryBlobStore
from tests.component.offload.test_offload_ledger import read_all

NAME = "public/default/persistent/on-objects"


async def store_on(bucket: MemoryBucket) -> ObjectLedgerStore:
    return await ObjectLedgerStore.open(MemoryObjectClient(bucket), prefix="p/",
                                        settings=ObjectLedgerSettings(flush_max_delay_ms=0))


async def test_a_new_owner_fences_the_old_one_in_the_bucket() -> None:
    bucket, metadata, clock = MemoryBucket(), MemoryMetadataStore(), ManualClock()
    old = await LedgerFactory(await store_on(bucket), metadata, clock=clock).open(NAME)
    acked = [await old.add_entry(b"m%d" % i) for i in range(5)]
    new = await LedgerFactory(await store_on(bucket), metadata, clock=clock).open(NAME)  # another broker
    with pytest.raises(ManagedLedgerFenced) as fenced:
        await old.add_entry(b"zombie")  # its PUT meets the new owner's fence (412): refused
    assert isinstance(fenced.value.__cause__, LedgerFenced)  # the bucket's fence, not a metadata conflict
    assert old.state is LedgerState.FENCED
    assert await read_all(new) == [b"m%d" % i for i in range(5)]
    assert [p.ledger_id for p in acked] == [new.ledgers()[0].ledger_id] * 5
    await new.add_entry(b"next")
    assert (await read_all(new))[-1] == b"next"


async def test_offload_moves_sealed_ledgers_out_of_the_bucket() -> None:
    bucket = MemoryBucket()
    store = await store_on(bucket)
    offload = BlockOffloadStore(MemoryBlobStore(), OffloadSettings(driver="memory", max_block_size_bytes=256))
    factory = LedgerFactory(store, MemoryMetadataStore(), config=ManagedLedgerConfig(max_entries_per_ledger=10),
                            clock=ManualClock(), offload_store=offload)
    ml = await factory.open(NAME)
    for i in range(25):
        await ml.add_entry(b"entry-%d" % i)
    first = ml.ledgers()[0].ledger_id
    await ml.offload_ledger(first)
    await ml.release_local(first)
    with pytest.raises(LedgerNotFound):
        await store.info(first)
    assert not [k for k in bucket.objects if k.startswith(f"p/ledger-meta/{first:020d}")]
    assert await read_all(ml) == [b"entry-%d" % i for i in range(25)]  # the first ten from the copy
