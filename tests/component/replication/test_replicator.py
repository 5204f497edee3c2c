"""The replicator against a fake remote (futures the test settles) and the receiving side's dedup of
replicated copies, on in-process brokers over memory stores."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from magnetar import protocol as proto
from magnetar.app.settings import StandaloneSettings
from magnetar.app.standalone import Standalone
from magnetar.broker.admin.broker_admin import BrokerAdmin
from magnetar.broker.config import BrokerConfig
from magnetar.broker.names import NamespaceName, TopicName
from magnetar.broker.replication.api import ClusterData
from magnetar.broker.replication.replicator import Replicator, should_replicate
from magnetar.broker.topic.persistent import PersistentTopic
from magnetar.client import Client
from magnetar.client.remote import RemoteProducers
from magnetar.ledger.api import Position
from magnetar.metadata.memory import MemoryMetadataStore
from magnetar.storage.memory import MemoryLedgerStore

WAIT_S = 10.0


class FakeProducer:
    def __init__(self) -> None:
        self.sent: list[tuple[bytes, asyncio.Future[Any]]] = []
        self.connected = True
        self.closed = False
        self.changed = asyncio.Event()

    def send_entry(
        self, entry: bytes, *, num_messages: int | None, is_chunk: bool, marker: bool
    ) -> asyncio.Future[Any]:
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.sent.append((entry, future))
        self.changed.set()
        return future

    async def wait_sent(self, count: int) -> None:
        async with asyncio.timeout(WAIT_S):
            while len(self.sent) < count:  # bounded by the timeout; woken on each send
                self.changed.clear()
                await self.changed.wait()

    async def close(self) -> None:
        self.closed = True
        for _, future in self.sent:
            if not future.done():
                future.set_exception(RuntimeError("closed"))


class FakeFactory:
    def __init__(self) -> None:
        self.producers: list[FakeProducer] = []
        self.created = asyncio.Event()

    async def create_producer(self, cluster: ClusterData, topic: str, producer_name: str, *,
                              queue_size: int) -> FakeProducer:
        assert producer_name == "pulsar.repl.standalone-->b"
        producer = FakeProducer()
        self.producers.append(producer)
        self.created.set()
        return producer

    async def ensure_partitioned_topic(self, cluster: ClusterData, topic: str, partitions: int) -> None:
        return None

    async def close(self) -> None:
        return None

    async def wait_producers(self, count: int) -> FakeProducer:
        async with asyncio.timeout(WAIT_S):
            while len(self.producers) < count:  # bounded by the timeout
                self.created.clear()
                await self.created.wait()
        return self.producers[count - 1]


async def _start(tmp_path: Path, name: str, factory: Any, cluster: str = "standalone") -> Standalone:
    settings = StandaloneSettings(data_dir=tmp_path / name, bind_address="127.0.0.1", broker_port=0, web_port=0,
                                  broker=BrokerConfig(cluster_name=cluster))
    sa = Standalone(settings, metadata=MemoryMetadataStore(), store=MemoryLedgerStore(), remote_producers=factory)
    await sa.start()
    return sa


async def _replicate_public_default(sa: Standalone, remote: str, url: str) -> None:
    data = {"brokerServiceUrl": url, "serviceUrl": "http://127.0.0.1:1"}
    await sa.broker.metadata.put(f"/admin/clusters/{remote}", json.dumps(data).encode())
    tenant = json.dumps({"adminRoles": [], "allowedClusters": [sa.broker.config.cluster_name, remote]})
    await sa.broker.metadata.put("/admin/policies/public", tenant.encode())
    await BrokerAdmin(sa.broker).set_policy(NamespaceName("public", "default"), "replication_clusters",
                                            [sa.broker.config.cluster_name, remote])


@pytest.fixture
async def fake_remote(tmp_path: Path) -> AsyncIterator[tuple[Standalone, FakeFactory]]:
    factory = FakeFactory()
    sa = await _start(tmp_path, "a", factory)
    await _replicate_public_default(sa, "b", "pulsar://127.0.0.1:1")
    try:
        yield sa, factory
    finally:
        await sa.stop()


def _entry(seq: int, body: bytes, **fields: Any) -> bytes:
    meta = proto.pb.MessageMetadata(producer_name="p", sequence_id=seq, publish_time=1000 + seq, **fields)
    return proto.make_entry(meta, body)


async def _callbacks_ran() -> None:
    """Wait until the callbacks of futures settled so far have run (the loop runs callbacks in order)."""
    marker: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    asyncio.get_running_loop().call_soon(marker.set_result, None)
    await marker


async def _publish(topic: PersistentTopic, *entries: bytes) -> None:
    for data in entries:
        await topic.append_internal(data)
    topic.wake_subscriptions()


async def test_entries_are_acked_only_after_the_remote_receipt_and_resent_after_a_failure(
    fake_remote: tuple[Standalone, FakeFactory],
) -> None:
    sa, factory = fake_remote
    topic = await sa.broker.registry.get(TopicName.parse("persistent://public/default/t"), create=True)
    replicator = topic.replicators["b"]
    assert isinstance(replicator, Replicator)
    first = await factory.wait_producers(1)
    await _publish(topic, *(_entry(i, b"m%d" % i) for i in range(3)))
    await first.wait_sent(3)
    for data, _ in first.sent:
        assert proto.parse_entry_metadata(data).replicated_from == "standalone"
    assert replicator.backlog() == 3  # sent, not yet stored remotely
    first.sent[0][1].set_result(None)
    await _callbacks_ran()
    assert replicator.backlog() == 2
    first.sent[1][1].set_exception(RuntimeError("the remote said no"))
    second = await factory.wait_producers(2)  # after a backoff, a new producer
    assert first.closed
    await second.wait_sent(2)
    bodies = [bytes(proto.entry_payload(d)) for d, _ in second.sent]
    assert bodies == [b"m1", b"m2"]  # what was not acknowledged, in order
    for _, future in second.sent:
        future.set_result(None)
    await _callbacks_ran()
    assert replicator.backlog() == 0
    assert replicator.msg_out_counter == 3


async def test_only_locally_originated_entries_for_this_cluster_go_out(
    fake_remote: tuple[Standalone, FakeFactory],
) -> None:
    sa, factory = fake_remote
    topic = await sa.broker.registry.get(TopicName.parse("persistent://public/default/filter"), create=True)
    producer = await factory.wait_producers(1)
    txn_marker = proto.make_marker_entry(proto.markers.TXN_COMMIT, b"", publish_time_ms=1)
    repl_marker = proto.make_marker_entry(proto.markers.REPLICATED_SUBSCRIPTION_SNAPSHOT_REQUEST, b"x",
                                          publish_time_ms=1)
    await _publish(
        topic,
        _entry(0, b"from-b", replicated_from="b"),
        _entry(1, b"to-c", replicate_to=["c"]),
        _entry(2, b"local", replicate_to=["__local__"]),
        txn_marker,
        _entry(3, b"to-b", replicate_to=["b"]),
        repl_marker,
        _entry(4, b"all"),
    )
    await producer.wait_sent(3)
    sent = [proto.parse_entry_metadata(d) for d, _ in producer.sent]
    assert [bytes(proto.entry_payload(d)) for d, _ in producer.sent] == [b"to-b", b"x", b"all"]
    assert sent[1].marker_type == proto.markers.REPLICATED_SUBSCRIPTION_SNAPSHOT_REQUEST
    assert topic.replicators["b"].backlog() == 3  # the skipped ones never hold the backlog


def test_should_replicate_rules() -> None:
    meta = proto.pb.MessageMetadata(producer_name="p", sequence_id=0, publish_time=1)
    assert should_replicate(meta, "b")
    meta.replicate_to.append("c")
    assert not should_replicate(meta, "b")
    meta.replicate_to.append("b")
    assert should_replicate(meta, "b")
    meta.replicated_from = "c"
    assert not should_replicate(meta, "b")


async def test_removing_the_cluster_stops_the_replicator_and_deletes_its_cursor(
    fake_remote: tuple[Standalone, FakeFactory],
) -> None:
    sa, factory = fake_remote
    topic = await sa.broker.registry.get(TopicName.parse("persistent://public/default/gone"), create=True)
    producer = await factory.wait_producers(1)
    assert "pulsar.repl.b" in topic.ledger.cursors
    await BrokerAdmin(sa.broker).set_policy(NamespaceName("public", "default"), "replication_clusters",
                                            ["standalone"])
    assert topic.replicators == {}
    assert "pulsar.repl.b" not in topic.ledger.cursors
    assert producer.closed


async def test_real_client_copies_between_two_brokers_and_the_remote_drops_resent_copies(tmp_path: Path) -> None:
    # the remote is cluster b and knows the source: only a registered other cluster's replicator may copy into it
    b = await _start(tmp_path, "b", None, cluster="b")
    a = await _start(tmp_path, "a", RemoteProducers())
    try:
        await _replicate_public_default(a, "b", f"pulsar://127.0.0.1:{b.broker_port}")
        source = {"brokerServiceUrl": f"pulsar://127.0.0.1:{a.broker_port}", "serviceUrl": "http://127.0.0.1:1"}
        await b.broker.metadata.put("/admin/clusters/standalone", json.dumps(source).encode())
        name = "persistent://public/default/real"
        async with Client(f"pulsar://127.0.0.1:{a.broker_port}") as ca, \
                Client(f"pulsar://127.0.0.1:{b.broker_port}") as cb:
            consumer = await cb.subscribe(name, "s", initial_position="earliest")
            producer = await ca.create_producer(name)
            for i in range(5):
                await producer.send(b"r%d" % i, key="k", properties={"i": str(i)})
            got = [await consumer.receive(timeout_ms=int(WAIT_S * 1000)) for _ in range(5)]
            assert [m.data for m in got] == [b"r%d" % i for i in range(5)]
            assert all(m.key == "k" for m in got)
            # a resend of a copy the remote already stored (a replicator restarted before its ack persisted):
            # the source stops, and a producer of the replicator's own name sends its first entry again
            local = await a.broker.registry.get(TopicName.parse(name), create=False)
            first = await local.ledger.read_entry(Position(local.ledger.last_confirmed.ledger_id, 0))
            await a.stop()
            # b's unload closes the replicator's producer there (awaited): the name is free on the reload
            assert await b.broker.registry.unload(TopicName.parse(name))
            replicator = "pulsar.repl.standalone-->b"
            remote = await cb.create_entry_producer(name, producer_name=replicator)
            stored = await b.broker.registry.get(TopicName.parse(name), create=False)
            meta = proto.parse_entry_metadata(first.data)
            meta.replicated_from = "standalone"
            copy = proto.make_entry(meta, proto.entry_payload(first.data))
            receipt = await remote.send_entry(copy, num_messages=None)
            assert (receipt.ledger_id, receipt.entry_id) == (-1, -1)  # the duplicate receipt: not stored again
            await remote.close()
            assert stored.ledger.number_of_entries() == 5
    finally:
        await a.stop()
        await b.stop()
