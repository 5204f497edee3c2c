"""The offload service over real managed ledgers and an in-memory object store, on a manual clock: the
admin trigger and its status (Pulsar's OffloadProcessStatus), one offload at a time, the namespace
threshold, the deletion lag, and a damaged copy shown in the status with the local copy kept."""

from __future__ import annotations

import json
from typing import Any

import pytest

from magnetar.broker.config import BrokerConfig
from magnetar.broker.errors import Conflict, PreconditionFailed
from magnetar.broker.names import NamespaceName
from magnetar.broker.offload import policy
from magnetar.broker.offload.service import OffloadService
from magnetar.clock import ManualClock
from magnetar.ledger.api import ManagedLedger, ManagedLedgerConfig, Position
from magnetar.ledger.factory import LedgerFactory
from magnetar.metadata.memory import MemoryMetadataStore
from magnetar.storage.memory import MemoryLedgerStore
from magnetar.storage.offload import BlockOffloadStore, OffloadSettings
from magnetar.storage.offload.memory import MemoryBlobStore

NS = NamespaceName("public", "tiered")
HOUR_MS = 3_600_000


class Topic:
    def __init__(self, ledger: ManagedLedger) -> None:
        self.ledger = ledger


class Broker:
    """What the service needs of the broker: config, metadata, the loaded topics."""

    def __init__(self, config: BrokerConfig, metadata: MemoryMetadataStore) -> None:
        self.config = config
        self.metadata = metadata
        self.topics: list[tuple[NamespaceName, Any]] = []

    def loaded_topics(self) -> list[tuple[NamespaceName, Any]]:
        return self.topics


@pytest.fixture
async def world():  # type: ignore[no-untyped-def]
    clock = ManualClock()
    metadata = MemoryMetadataStore()
    blobs = MemoryBlobStore()
    settings = OffloadSettings(driver="memory", max_block_size_bytes=512)
    factory = LedgerFactory(MemoryLedgerStore(), metadata, config=ManagedLedgerConfig(max_entries_per_ledger=4),
                            clock=clock, offload_store=BlockOffloadStore(blobs, settings))
    config = BrokerConfig(offload=settings, managed_ledger_offload_deletion_lag_ms=HOUR_MS)
    broker = Broker(config, metadata)
    ml = await factory.open("public/tiered/persistent/t")
    for i in range(14):  # three sealed ledgers of 4 entries, the current one with 2
        await ml.add_entry(b"e%d" % i)
    broker.topics.append((NS, Topic(ml)))
    service = OffloadService(broker, clock)
    yield service, ml, broker, clock, blobs
    await service.stop()
    await factory.close()


async def set_policies(broker: Broker, **policies: int) -> None:
    await broker.metadata.put(f"/admin/policies/{NS.tenant}/{NS.namespace}", json.dumps(policies).encode())


async def test_trigger_status_and_one_at_a_time(world) -> None:  # type: ignore[no-untyped-def]
    service, ml, _, _, _ = world
    assert service.status(ml)["status"] == "NOT_RUN"
    second = ml.ledgers()[1].ledger_id
    service.trigger(ml, Position(second + 1, 0))  # the first two sealed ledgers
    with pytest.raises(Conflict):
        service.trigger(ml, Position(second + 1, 0))
    await service.wait(ml)
    status = service.status(ml)
    assert status["status"] == "SUCCESS" and status["lastError"] == ""
    assert status["firstUnoffloadedMessage"] == {"ledgerId": ml.ledgers()[2].ledger_id, "entryId": 0,
                                                 "partitionIndex": -1}
    assert [x.offloaded for x in ml.ledgers()] == [True, True, False, False]


async def test_threshold_and_deletion_lag(world) -> None:  # type: ignore[no-untyped-def]
    service, ml, broker, clock, _ = world
    await service.run_once()
    assert not any(x.offloaded for x in ml.ledgers()), "no threshold: nothing moves"
    size = ml.ledgers()[-1].size_bytes + ml.ledgers()[-2].size_bytes
    await set_policies(broker, offload_threshold=size)  # keep the newest two ledgers local
    await service.run_once()
    assert [x.offloaded for x in ml.ledgers()] == [True, True, False, False]
    assert not any(x.offload.local_deleted for x in ml.ledgers() if x.offload), "the lag has not passed"
    clock.advance(HOUR_MS)
    await service.run_once()
    assert [x.offload.local_deleted for x in ml.ledgers()[:2] if x.offload] == [True, True]


async def test_a_damaged_copy_keeps_the_local_one_and_shows_in_the_status(world) -> None:  # type: ignore[no-untyped-def]
    service, ml, broker, _, blobs = world
    await set_policies(broker, offload_threshold=0, offload_deletion_lag_ms=0)
    service.trigger(ml, Position(ml.ledgers()[1].ledger_id, 0))
    await service.wait(ml)
    first = ml.ledgers()[0]
    assert first.offload is not None
    del blobs.blobs[first.offload.context.data_key]  # gone behind the broker's back before the release
    await service.run_once()
    status = service.status(ml)
    assert status["status"] == "ERROR" and "local copy is kept" in status["lastError"]
    assert ml.ledgers()[0].offload is not None and not ml.ledgers()[0].offload.local_deleted
    assert (await ml.read_entry(Position(first.ledger_id, 0))).data == b"e0"


async def test_no_offload_store_is_a_precondition() -> None:
    metadata = MemoryMetadataStore()
    factory = LedgerFactory(MemoryLedgerStore(), metadata)
    ml = await factory.open("public/tiered/persistent/plain")
    service = OffloadService(Broker(BrokerConfig(), metadata), ManualClock())
    with pytest.raises(PreconditionFailed, match="managedLedgerOffloadDriver"):
        service.trigger(ml, Position(2**62, 0))
    await factory.close()


def test_size_threshold_message_id_as_pulsar_admin_computes_it() -> None:
    ledgers = [(1, 100), (2, 100), (3, 100), (4, 10)]
    assert policy.threshold_message_id(ledgers, 0) == Position(4, 0)
    assert policy.threshold_message_id(ledgers, 150) == Position(3, 0)
    assert policy.threshold_message_id(ledgers, 1000) is None
