"""PIP-178 through the in-process broker: a topic's snapshot lands as keys of the namespace's
``__transaction_buffer_snapshot``, stats and metrics show it, a restart recovers from it, deleting the topic
tombstones its keys (and only its keys)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from magnetar.app.settings import StandaloneSettings
from magnetar.app.standalone import Standalone
from magnetar.broker.admin.broker_admin import BrokerAdmin
from magnetar.broker.config import BrokerConfig
from magnetar.broker.names import NamespaceName, TopicName
from magnetar.broker.transactions.api import TxnAction
from magnetar.broker.transactions.segmented_snapshot import END, parse_key
from magnetar.broker.transactions.snapshot import MetadataSnapshotStore
from magnetar.broker.transactions.txn_stats import buffer_stats
from magnetar.metadata.memory import MemoryMetadataStore
from magnetar.storage.memory import MemoryLedgerStore
from tests.component.transactions.helpers import Producer, crash, nothing_more, received, subscribe
from tests.component.wire import WirePeer
from tests.txn_fakes import FakeRegistry

TOPIC = "persistent://public/default/seg"
SNAPSHOT_TOPIC = "persistent://public/default/__transaction_buffer_snapshot"
CONFIG = dict(transaction_buffer_segmented_snapshot_enabled=True, transaction_buffer_snapshot_segment_size=64,
              transaction_buffer_snapshot_min_time_ms=3_600_000,
              transaction_buffer_snapshot_max_transaction_count=1_000_000)


class Stores:
    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path, self.metadata, self.store = tmp_path, MemoryMetadataStore(), MemoryLedgerStore()

    async def start(self, registry: FakeRegistry, *, segmented: bool = True) -> Standalone:
        config = BrokerConfig(**{**CONFIG, "transaction_buffer_segmented_snapshot_enabled": segmented})  # type: ignore[arg-type]
        settings = StandaloneSettings(data_dir=self.tmp_path, bind_address="127.0.0.1", broker_port=0, web_port=0,
                                      broker=config)
        sa = Standalone(settings, metadata=self.metadata, store=self.store)
        await sa.start()
        sa.broker.txn_registry = registry
        return sa


@pytest.fixture
async def stores(tmp_path: Path) -> AsyncIterator[Stores]:
    yield Stores(tmp_path)


async def _keys(sa: Standalone, topic: str) -> list[int | str]:
    snap = sa.broker.registry.loaded[SNAPSHOT_TOPIC].compacted
    assert snap is not None
    found = [parse_key(topic, k) for k in await snap.latest_values()]
    return sorted((k for k in found if k is not None), key=str)


async def _get(sa: Standalone, path: str) -> dict:  # type: ignore[type-arg]
    async with aiohttp.ClientSession() as http, http.get(f"http://127.0.0.1:{sa.web_port}{path}") as resp:
        assert resp.status == 200, await resp.text()
        return await resp.json()  # type: ignore[no-any-return]


async def test_snapshot_keys_stats_restart_and_deletion(stores: Stores) -> None:
    registry = FakeRegistry()
    sa = await stores.start(registry)
    peer = await WirePeer.connect(sa.broker_port)
    producer = await Producer.create(peer, TOPIC)
    await producer.send(b"p0")
    for i in range(9):  # 9 aborted ids, 2 a segment: -1..-4 and -end
        txn = registry.new_txn()
        registry.add_partition(txn, TOPIC)
        await producer.send(b"a%d" % i, txn)
        await registry.end(sa.broker.txn_participants, txn, TxnAction.ABORT)
    await producer.send(b"p1")
    buffer = sa.broker.registry.loaded[TOPIC].txn.buffer  # type: ignore[union-attr]
    await buffer.take_snapshot()
    assert await _keys(sa, TOPIC) == sorted([1, 2, 3, 4, END], key=str)

    stats = await _get(sa, "/admin/v3/transactions/transactionBufferStats/public/default/seg?segmentStats=true")
    assert (stats["snapshotType"], stats["snapshotSegments"], stats["snapshotAbortedTxnIds"]) == ("Multiple", 5, 9)
    assert stats["totalAbortedTransactions"] == 9 and stats["lastSnapshotTimestamps"] > 0
    assert stats["snapshotStats"]["segmentsSize"] == 4
    async with aiohttp.ClientSession() as http, http.get(f"http://127.0.0.1:{sa.web_port}/metrics") as resp:
        metrics = await resp.text()
    assert 'pulsar_txn_tb_snapshot_index_total{cluster="standalone",namespace="public/default",' in metrics
    assert 'op="add",status="success"' in metrics

    await producer.send(b"p2")  # after the snapshot: the only entry a recovery replays
    await peer.close()
    crash(sa)  # no snapshot on the way down
    sa = await stores.start(registry)
    consumer = await WirePeer.connect(sa.broker_port)
    await subscribe(consumer, TOPIC)
    assert [body for body, _ in await received(consumer, 3)] == [b"p0", b"p1", b"p2"]  # aborts still filtered
    await nothing_more(consumer)
    loaded = sa.broker.registry.loaded[TOPIC]
    assert loaded.txn is not None and loaded.txn.buffer.recovered_entries == 1 < loaded.ledger.number_of_entries()

    other = "persistent://public/default/seg-1"  # its keys look like seg's segment keys: they stay
    await sa.broker.txn_snapshots.save(other, buffer.snapshot())
    await consumer.close()
    await BrokerAdmin(sa.broker).delete_topic(TopicName.parse(TOPIC), force=True)
    assert await _keys(sa, TOPIC) == []
    assert await _keys(sa, other) != []
    admin = BrokerAdmin(sa.broker)
    await admin.create_namespace(NamespaceName("public", "only-snapshots"), None)
    await sa.broker.txn_snapshots.save("persistent://public/only-snapshots/gone", buffer.snapshot())
    assert SNAPSHOT_TOPIC.replace("default", "only-snapshots") in await admin.topics(NamespaceName.parse(
        "public/only-snapshots"))
    await admin.delete_namespace(NamespaceName("public", "only-snapshots"), force=False)  # no user topic left
    assert not await sa.broker.catalog.namespace_exists(NamespaceName("public", "only-snapshots"))
    await sa.stop()


async def test_flipping_the_switch_moves_the_snapshot_without_losing_ids(stores: Stores) -> None:
    registry = FakeRegistry()
    sa = await stores.start(registry, segmented=False)
    peer = await WirePeer.connect(sa.broker_port)
    producer = await Producer.create(peer, TOPIC)
    for i in range(7):
        txn = registry.new_txn()
        registry.add_partition(txn, TOPIC)
        await producer.send(b"a%d" % i, txn)
        await registry.end(sa.broker.txn_participants, txn, TxnAction.ABORT)
    await producer.send(b"p0")
    await peer.close()
    await sa.broker.registry.loaded[TOPIC].txn.buffer.take_snapshot()  # type: ignore[union-attr]
    assert await stores.metadata.get(MetadataSnapshotStore.key(TOPIC)) is not None  # the 7 ids in one record
    crash(sa)

    for segmented, round_ in ((True, "to segments"), (False, "back to one record")):
        sa = await stores.start(registry, segmented=segmented)
        consumer = await WirePeer.connect(sa.broker_port)
        await subscribe(consumer, TOPIC, sub=f"s-{segmented}")
        assert [body for body, _ in await received(consumer, 1)] == [b"p0"], round_  # every abort filtered
        await nothing_more(consumer)
        loaded = sa.broker.registry.loaded[TOPIC]
        assert loaded.txn is not None and loaded.txn.buffer.aborted_count() == 7, round_
        await loaded.txn.buffer.take_snapshot()  # the next snapshot moves the topic to the configured scheme
        record = await stores.metadata.get(MetadataSnapshotStore.key(TOPIC))
        assert (record is None) == segmented, round_
        assert (await _keys(sa, TOPIC) != []) == segmented, round_
        stats = buffer_stats(loaded.txn.buffer, loaded.ledger.last_confirmed)
        expected = ("Multiple", 4, 7) if segmented else ("Single", 1, 7)  # 7 ids, 2 a segment: -1, -2, -3, -end
        assert (stats["snapshotType"], stats["snapshotSegments"], stats["snapshotAbortedTxnIds"]) == expected, round_
        await consumer.close()
        crash(sa)
    await sa.stop()
