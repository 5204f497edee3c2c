"""The offload service over real managed ledgers and an in-memory object store, on a manual clock: the
admin trigger and its status (Pulsar's OffloadProcessStatus), one offload at a time, the namespace
threshold, the deletion lag, and a damaged copy shown in the status with the local copy kept."""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

import pytest

from magnetar.broker.config import BrokerConfig
from magnetar.broker.errors import Conflict, PreconditionFailed
from magnetar.broker.names import NamespaceName, TopicName
from magnetar.broker.offload import policy
from magnetar.broker.offload.service import UNLOADED_LOADS_PER_PASS_MAX, OffloadService
from magnetar.core.clock import ManualClock
from magnetar.core.faults import FaultPlan
from magnetar.ledger.api import ManagedLedger, ManagedLedgerConfig, Position
from magnetar.ledger.factory import LedgerFactory
from magnetar.metadata.memory import MemoryMetadataStore
from magnetar.resources import MetadataResources
from magnetar.storage.memory import MemoryLedgerStore
from magnetar.storage.offload import BlockOffloadStore, OffloadSettings
from magnetar.storage.offload.memory import OPS, MemoryBlobStore

NS = NamespaceName("public", "tiered")
HOUR_MS = 3_600_000


class Topic:
    def __init__(self, ledger: ManagedLedger) -> None:
        self.ledger = ledger


class Broker:
    """What the service needs of the broker: config, metadata, the loaded topics, the stored managed
    ledgers and loading a topic."""

    def __init__(self, config: BrokerConfig, metadata: MemoryMetadataStore, ledgers: LedgerFactory) -> None:
        self.config = config
        self.metadata = metadata
        self.resources = MetadataResources(metadata)
        self.ledgers = ledgers
        self.topics: list[tuple[NamespaceName, Any]] = []
        self.loads: list[str] = []

    def loaded_topics(self) -> list[tuple[NamespaceName, Any]]:
        return self.topics

    async def namespace_policies(self, ns: NamespaceName) -> Mapping[str, Any]:
        return await self.resources.namespaces.policies(ns)

    async def get_topic(self, topic: TopicName, *, create: bool) -> Topic:
        self.loads.append(str(topic))
        loaded = Topic(await self.ledgers.open(topic.managed_ledger_name))
        self.topics.append((topic.namespace_name, loaded))
        return loaded


@pytest.fixture
async def world():  # type: ignore[no-untyped-def]
    clock = ManualClock()
    metadata = MemoryMetadataStore()
    blobs = MemoryBlobStore()
    settings = OffloadSettings(driver="memory", max_block_size_bytes=512)
    factory = LedgerFactory(MemoryLedgerStore(), metadata, config=ManagedLedgerConfig(max_entries_per_ledger=4),
                            clock=clock, offload_store=BlockOffloadStore(blobs, settings))
    config = BrokerConfig(offload=settings, managed_ledger_offload_deletion_lag_ms=HOUR_MS)
    broker = Broker(config, metadata, factory)
    ml = await factory.open("public/tiered/persistent/t")
    for i in range(14):  # three sealed ledgers of 4 entries, the current one with 2
        await ml.add_entry(b"e%d" % i)
    broker.topics.append((NS, Topic(ml)))
    service = OffloadService(broker, clock)
    yield service, ml, broker, clock, blobs
    await service.stop()
    await factory.close()


async def set_policies(broker: Broker, **policies: int) -> None:
    await broker.resources.namespaces.put(NS, policies)


async def test_trigger_status_and_one_at_a_time(world) -> None:  # type: ignore[no-untyped-def]
    service, ml, _, _, _ = world
    assert service.status(ml)["status"] == "NOT_RUN"
    second = ml.ledgers()[1].ledger_id
    await service.trigger(ml, Position(second + 1, 0))  # the first two sealed ledgers
    with pytest.raises(Conflict):
        await service.trigger(ml, Position(second + 1, 0))
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
    await service.trigger(ml, Position(ml.ledgers()[1].ledger_id, 0))
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
    service = OffloadService(Broker(BrokerConfig(), metadata, factory), ManualClock())
    with pytest.raises(PreconditionFailed, match="managedLedgerOffloadDriver"):
        await service.trigger(ml, Position(2**62, 0))
    await factory.close()


async def test_topics_that_are_not_loaded_are_offloaded_and_released(world) -> None:  # type: ignore[no-untyped-def]
    service, ml, broker, _, _ = world
    broker.topics.clear()  # unloaded (a restart, the inactive sweep): only its record is stored
    await ml.close()
    await service.run_once()
    assert broker.loads == [], "no threshold, nothing due: the topic is not loaded"
    await set_policies(broker, offload_threshold=0, offload_deletion_lag_ms=0)
    await service.run_once()
    assert broker.loads == ["persistent://public/tiered/t"] and service.loaded_for_offload == 1
    (_, topic), = broker.topics
    sealed = topic.ledger.ledgers()[:-1]
    assert sealed and all(x.offload is not None and x.offload.local_deleted for x in sealed)
    broker.topics.clear()
    await topic.ledger.close()
    await service.run_once()
    assert len(broker.loads) == 1, "nothing due any more: not loaded again"


async def test_a_request_cut_short_is_resumed_as_a_whole(world) -> None:  # type: ignore[no-untyped-def]
    service, ml, broker, _, blobs = world
    last_sealed = ml.ledgers()[-2].ledger_id
    blobs._plan = FaultPlan(random.Random(1), fail_after_ops=0, ops=OPS)  # the store is down
    await service.trigger(ml, Position(last_sealed + 1, 0))
    await service.wait(ml)
    assert service.status(ml)["status"] == "ERROR"
    assert policy.requested(ml.properties) == Position(last_sealed + 1, 0), "kept until it completes"
    broker.topics.clear()  # the broker restarts: the request is all that is left
    await ml.close()
    fresh = OffloadService(broker, ManualClock())
    reopened = await broker.ledgers.open(ml.name)
    assert fresh.status(reopened)["status"] == "RUNNING", "a stored request not resumed yet"
    await reopened.close()
    blobs._plan = None  # the store is back
    await fresh.run_once()
    (_, topic), = broker.topics
    assert [x.offloaded for x in topic.ledger.ledgers()[:3]] == [True, True, True]
    assert policy.requested(topic.ledger.properties) is None
    assert fresh.status(topic.ledger)["status"] == "SUCCESS"


def test_size_threshold_message_id_as_pulsar_admin_computes_it() -> None:
    ledgers = [(1, 100), (2, 100), (3, 100), (4, 10)]
    assert policy.threshold_message_id(ledgers, 0) == Position(4, 0)
    assert policy.threshold_message_id(ledgers, 150) == Position(3, 0)
    assert policy.threshold_message_id(ledgers, 1000) is None


async def test_a_pass_loads_a_bounded_number_of_unloaded_topics(world) -> None:  # type: ignore[no-untyped-def]
    service, ml, broker, _, _ = world
    broker.topics.clear()
    await ml.close()
    for i in range(UNLOADED_LOADS_PER_PASS_MAX + 3):  # each with two sealed ledgers
        other = await broker.ledgers.open(f"public/tiered/persistent/cold-{i}")
        for j in range(9):
            await other.add_entry(b"c%d" % j)
        await other.close()
    await set_policies(broker, offload_threshold=0, offload_deletion_lag_ms=0)
    await service.run_once()
    assert len(broker.loads) == UNLOADED_LOADS_PER_PASS_MAX  # the rest waits for the next pass
    broker.topics.clear()  # the inactive sweep unloaded them
    await service.run_once()
    assert len(broker.loads) == UNLOADED_LOADS_PER_PASS_MAX + 4 and len(set(broker.loads)) == len(broker.loads)
