"""Three cluster brokers in this process (``magnetar broker`` as component tests see it): each a session of its
own on one in-memory metadata tree, each with its own object ledger store on one in-memory bucket (ids from the
metadata counter), ports chosen by the system. The cluster's behaviour without processes or sockets of stores."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from magnetar.app.settings import StandaloneSettings
from magnetar.app.standalone import Standalone
from magnetar.broker.config import BrokerConfig
from magnetar.broker.deletion.config import DeletionConfig
from magnetar.ledger.id_counter import MetadataLedgerIdAllocator
from magnetar.metadata.memory import MemoryMetadataStore
from magnetar.storage.objectstore.memory import MemoryBucket, MemoryObjectClient
from magnetar.storage.objectstore.store import ObjectLedgerStore

CLUSTER_CONFIG = BrokerConfig(ledger_deletion=DeletionConfig(enabled=False), transaction_coordinator_enabled=False,
                              advertised_address="127.0.0.1")


@dataclass
class Cluster:
    root: MemoryMetadataStore
    bucket: MemoryBucket
    brokers: list[Standalone]
    tmp: Path

    async def start(self, name: str) -> Standalone:
        metadata = self.root.another_session()
        store = await ObjectLedgerStore.open(MemoryObjectClient(self.bucket),
                                             allocator=MetadataLedgerIdAllocator(metadata))
        settings = StandaloneSettings(data_dir=self.tmp / name, bind_address="127.0.0.1", broker_port=0, web_port=0,
                                      broker=CLUSTER_CONFIG, cluster_mode=True)
        broker = Standalone(settings, metadata=metadata, store=store)
        self.brokers.append(broker)
        await broker.start()
        return broker

    def by_url(self, url: str) -> Standalone:
        return next(b for b in self.brokers if f":{b.broker_port}" in url)


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    c = Cluster(MemoryMetadataStore(), MemoryBucket(), [], tmp_path)
    try:
        for name in ("a", "b", "c"):
            await c.start(name)
        yield c
    finally:
        for broker in c.brokers:
            await broker.stop()
