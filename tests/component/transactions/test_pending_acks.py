"""Transactional acks at the wire with a stand-in coordinator: held until the end, conflicts, commit makes
them real, abort redelivers, refusals leave nothing behind."""

from __future__ import annotations

from pathlib import Path

import pytest

from magnetar import protocol as proto
from magnetar.app.standalone import Standalone
from magnetar.broker.transactions.api import TxnAction, TxnId
from magnetar.ledger.api import Position
from magnetar.metadata.memory import MemoryMetadataStore
from magnetar.protocol.server_errors import ServerErrorCode
from magnetar.storage.memory import MemoryLedgerStore
from tests.component.transactions.helpers import (
    Producer,
    ack,
    broker,
    crash,
    nothing_more,
    received,
    start_broker,
    subscribe,
)
from tests.component.wire import T, WirePeer
from tests.txn_fakes import FakeRegistry

TOPIC = "persistent://public/default/txn-acks"
EXCLUSIVE, SHARED = 0, 1


@pytest.fixture
def standalone(txn_standalone: Standalone) -> Standalone:
    return txn_standalone


async def produce(standalone: Standalone, *bodies: bytes) -> None:
    peer = await WirePeer.connect(standalone.broker_port)
    producer = await Producer.create(peer, TOPIC)
    for body in bodies:
        await producer.send(body)
    await peer.close()


def acking_txn(registry: FakeRegistry, sub: str = "sub") -> TxnId:
    txn = registry.new_txn()
    registry.add_subscription(txn, TOPIC, sub)
    return txn


@pytest.mark.parametrize("sub_type", [EXCLUSIVE, SHARED])
async def test_ack_is_held_until_commit_and_abort_redelivers(
    standalone: Standalone, registry: FakeRegistry, sub_type: int
) -> None:
    await produce(standalone, b"m0", b"m1")
    consumer = await WirePeer.connect(standalone.broker_port)
    await subscribe(consumer, TOPIC, sub_type=sub_type)
    (_, id0), (_, id1) = await received(consumer, 2)
    sub = standalone.broker.registry.loaded[TOPIC].subscriptions["sub"]
    aborting, committing = acking_txn(registry), acking_txn(registry)
    assert not (await ack(consumer, 7, id0, aborting, 1)).HasField("error")
    assert not (await ack(consumer, 7, id1, committing, 2)).HasField("error")
    assert sub.backlog() == 2  # held: nothing is real yet
    participants = standalone.broker.txn_participants
    await registry.end(participants, committing, TxnAction.COMMIT)
    assert sub.backlog() == 1
    await registry.end(participants, aborting, TxnAction.ABORT)
    again = await received(consumer, 1)
    assert [b for b, _ in again] == [b"m0"]  # given back; m1 (committed) never comes again
    await nothing_more(consumer)
    await consumer.close()


async def test_the_same_message_in_two_txns_conflicts(standalone: Standalone, registry: FakeRegistry) -> None:
    await produce(standalone, b"m0", b"m1")
    consumer = await WirePeer.connect(standalone.broker_port)
    await subscribe(consumer, TOPIC, sub_type=SHARED)
    (_, id0), (_, id1) = await received(consumer, 2)
    first, second = acking_txn(registry), acking_txn(registry)
    assert not (await ack(consumer, 7, id0, first, 1)).HasField("error")
    refused = await ack(consumer, 7, id0, second, 2)
    assert refused.error == ServerErrorCode.TransactionConflict and "in pending ack status" in refused.message
    assert refused.txnid_least_bits == second.least
    assert not (await ack(consumer, 7, id1, second, 3)).HasField("error")  # the connection is still usable
    await registry.end(standalone.broker.txn_participants, first, TxnAction.COMMIT)
    late = await ack(consumer, 7, id0, second, 4)
    assert late.error == ServerErrorCode.TransactionConflict and "already acked before" in late.message
    await consumer.close()


async def test_cumulative_ack_rules(standalone: Standalone, registry: FakeRegistry) -> None:
    await produce(standalone, b"m0", b"m1", b"m2")
    shared = await WirePeer.connect(standalone.broker_port)
    await subscribe(shared, TOPIC, sub="shared", sub_type=SHARED)
    ids = [mid for _, mid in await received(shared, 3)]
    txn = acking_txn(registry, "shared")
    refused = await ack(shared, 7, ids[1], txn, 1, cumulative=True)
    assert refused.error == proto.pb.NotAllowedError
    exclusive = await WirePeer.connect(standalone.broker_port)
    await subscribe(exclusive, TOPIC, sub="excl", consumer_id=8, sub_type=EXCLUSIVE)
    ids = [mid for _, mid in await received(exclusive, 3)]
    first, second = acking_txn(registry, "excl"), acking_txn(registry, "excl")
    assert not (await ack(exclusive, 8, ids[1], first, 2, cumulative=True)).HasField("error")
    assert (await ack(exclusive, 8, ids[2], second, 3, cumulative=True)).error == ServerErrorCode.TransactionConflict
    sub = standalone.broker.registry.loaded[TOPIC].subscriptions["excl"]
    await registry.end(standalone.broker.txn_participants, first, TxnAction.COMMIT)
    assert sub.cursor.mark_delete_position.entry_id == proto.ids.signed(ids[1].entryId)
    await shared.close()
    await exclusive.close()


async def test_unknown_or_unregistered_txn_acks_are_refused(standalone: Standalone, registry: FakeRegistry) -> None:
    await produce(standalone, b"m0")
    consumer = await WirePeer.connect(standalone.broker_port)
    await subscribe(consumer, TOPIC, sub_type=SHARED)
    [(_, id0)] = await received(consumer, 1)
    assert (await ack(consumer, 7, id0, TxnId(0, 4242), 1)).error == ServerErrorCode.TransactionNotFound
    unregistered = registry.new_txn()
    assert (await ack(consumer, 7, id0, unregistered, 2)).HasField("error")
    topic = standalone.broker.registry.loaded[TOPIC]
    assert topic.txn is not None and "sub" not in topic.txn.stores  # nothing was opened or reserved
    ok = acking_txn(registry)
    assert not (await ack(consumer, 7, id0, ok, 3)).HasField("error")
    await consumer.close()


async def test_pending_acks_and_open_txns_survive_an_unclean_restart(tmp_path: Path) -> None:
    metadata, store, registry = MemoryMetadataStore(), MemoryLedgerStore(), FakeRegistry()
    first = await start_broker(tmp_path, metadata, store, registry)
    try:
        peer = await WirePeer.connect(first.broker_port)
        producer = await Producer.create(peer, TOPIC)
        await producer.send(b"m0")
        consumer = await WirePeer.connect(first.broker_port)
        await subscribe(consumer, TOPIC, sub_type=SHARED)
        [(_, id0)] = await received(consumer, 1)
        acker = acking_txn(registry)
        assert not (await ack(consumer, 7, id0, acker, 1)).HasField("error")
        writer = registry.new_txn()
        registry.add_partition(writer, TOPIC)
        await producer.send(b"open", writer)
        await producer.send(b"plain-after")
        aborted = registry.new_txn()
        registry.add_partition(aborted, TOPIC)
        await producer.send(b"aborted", aborted)
        await registry.end(first.broker.txn_participants, aborted, TxnAction.ABORT)
    finally:
        crash(first)
    async with broker(tmp_path, metadata, store, registry) as second:
        reader = await WirePeer.connect(second.broker_port)
        await subscribe(reader, TOPIC, sub="fresh", consumer_id=9, sub_type=SHARED)
        peer = await WirePeer.connect(second.broker_port)
        await subscribe(peer, TOPIC, sub_type=SHARED)
        assert [b for b, _ in await received(reader, 1)] == [b"m0"]
        await nothing_more(reader)  # the open txn still holds back what follows it; nothing aborted shows
        await nothing_more(peer)  # m0 is still pending-acked on "sub": not delivered again
        await registry.end(second.broker.txn_participants, writer, TxnAction.COMMIT)
        assert [b for b, _ in await received(reader, 2)] == [b"open", b"plain-after"]
        await registry.end(second.broker.txn_participants, acker, TxnAction.COMMIT)
        sub = second.broker.registry.loaded[TOPIC].subscriptions["sub"]
        assert sub.cursor.is_acknowledged(Position(id0.ledgerId, id0.entryId))
        await reader.close()
        await peer.close()


async def pending_ack_on_sub(standalone: Standalone, registry: FakeRegistry) -> WirePeer:
    """One message on TOPIC, received by a Shared consumer (id 7) of "sub" and acked in an open txn."""
    await produce(standalone, b"m0")
    consumer = await WirePeer.connect(standalone.broker_port)
    await subscribe(consumer, TOPIC, sub_type=SHARED)
    [(_, id0)] = await received(consumer, 1)
    assert not (await ack(consumer, 7, id0, acking_txn(registry), 1)).HasField("error")
    return consumer


async def test_unsubscribe_and_topic_deletion_remove_the_transaction_state(
    standalone: Standalone, registry: FakeRegistry
) -> None:
    from magnetar.broker.admin.broker_admin import BrokerAdmin
    from magnetar.broker.names import TopicName
    from magnetar.broker.transactions.pending_ack_log import pending_ack_topic
    from magnetar.broker.transactions.snapshot import MetadataSnapshotStore

    consumer = await pending_ack_on_sub(standalone, registry)
    ledgers, name = standalone.broker.ledgers, TopicName.parse(TOPIC)
    log_name = pending_ack_topic(name, "sub").managed_ledger_name
    assert await ledgers.exists(log_name)
    listed = await standalone.broker.catalog.list_topics(name.namespace_name)
    assert TOPIC in listed and not [t for t in listed if t.endswith("__transaction_pending_ack")]
    consumer.send(proto.commands.unsubscribe(7, 2))
    await consumer.expect(T.SUCCESS)
    assert not await ledgers.exists(log_name)
    await subscribe(consumer, TOPIC, sub="other", consumer_id=8, sub_type=SHARED)
    [(_, again)] = await received(consumer, 1)
    assert not (await ack(consumer, 8, again, acking_txn(registry, "other"), 3)).HasField("error")
    other_log = pending_ack_topic(name, "other").managed_ledger_name
    await consumer.close()
    await BrokerAdmin(standalone.broker).delete_topic(name, force=True)
    assert not await ledgers.exists(other_log)
    assert await standalone.broker.metadata.get(MetadataSnapshotStore.key(TOPIC)) is None


async def test_deleting_an_unloaded_topic_removes_its_pending_ack_logs(
    standalone: Standalone, registry: FakeRegistry
) -> None:
    from magnetar.broker.admin.broker_admin import BrokerAdmin
    from magnetar.broker.names import TopicName
    from magnetar.broker.transactions.pending_ack_log import pending_ack_topic

    consumer = await pending_ack_on_sub(standalone, registry)
    await consumer.close()
    name, admin = TopicName.parse(TOPIC), BrokerAdmin(standalone.broker)
    await admin.unload(name)
    assert TOPIC not in standalone.broker.registry.loaded
    await admin.delete_topic(name, force=True)
    assert not await standalone.broker.ledgers.exists(pending_ack_topic(name, "sub").managed_ledger_name)


async def test_an_abort_before_dispatch_reaches_a_recovered_pending_ack_delivers_it_once(tmp_path: Path) -> None:
    """After a restart the cursor reads from the mark-delete position again, so an entry acked in a still-open
    transaction lies ahead of the read position: aborting that transaction before the dispatcher reached the
    entry must not deliver it twice (once given back, once read)."""
    metadata, store, registry = MemoryMetadataStore(), MemoryLedgerStore(), FakeRegistry()
    first = await start_broker(tmp_path, metadata, store, registry)
    try:
        peer = await WirePeer.connect(first.broker_port)
        producer = await Producer.create(peer, TOPIC)
        await producer.send(b"m0")
        await producer.send(b"m1")
        consumer = await WirePeer.connect(first.broker_port)
        await subscribe(consumer, TOPIC, sub_type=SHARED)
        (_, id0), _ = await received(consumer, 2)
        acker = acking_txn(registry)
        assert not (await ack(consumer, 7, id0, acker, 1)).HasField("error")
    finally:
        crash(first)
    async with broker(tmp_path, metadata, store, registry) as second:
        peer = await WirePeer.connect(second.broker_port)
        await subscribe(peer, TOPIC, sub_type=SHARED, permits=0)  # subscribed, nothing read yet
        await registry.end(second.broker.txn_participants, acker, TxnAction.ABORT)
        peer.send(proto.commands.flow(7, 10))
        assert sorted(b for b, _ in await received(peer, 2)) == [b"m0", b"m1"]
        await nothing_more(peer)
        await peer.close()
