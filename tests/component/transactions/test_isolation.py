"""Isolation at the wire with a stand-in coordinator: what a plain consumer is given, markers, aborted
entries, GET_LAST_MESSAGE_ID, and refusals of transactional SENDs."""

from __future__ import annotations

import pytest

from magnetar import protocol as proto
from magnetar.app.standalone import Standalone
from magnetar.broker.transactions.api import TxnAction, TxnId
from magnetar.protocol.server_errors import ServerErrorCode
from tests.component.transactions.helpers import Producer, nothing_more, received, subscribe
from tests.component.wire import T, WirePeer
from tests.txn_fakes import FakeRegistry

TOPIC = "persistent://public/default/txn-iso"


@pytest.fixture
def standalone(txn_standalone: Standalone) -> Standalone:
    return txn_standalone


async def open_txn(registry: FakeRegistry, *topics: str) -> TxnId:
    txn = registry.new_txn()
    for t in topics:
        registry.add_partition(txn, t)
    return txn


async def test_plain_messages_wait_behind_an_open_txn_and_commit_releases_all(
    standalone: Standalone, registry: FakeRegistry
) -> None:
    peer = await WirePeer.connect(standalone.broker_port)
    producer = await Producer.create(peer, TOPIC)
    consumer = await WirePeer.connect(standalone.broker_port)
    await subscribe(consumer, TOPIC)
    txn = await open_txn(registry, TOPIC)
    assert (await producer.send(b"plain-0")).type == T.SEND_RECEIPT
    assert (await producer.send(b"txn-0", txn)).type == T.SEND_RECEIPT
    assert (await producer.send(b"plain-1")).type == T.SEND_RECEIPT
    assert (await producer.send(b"txn-1", txn)).type == T.SEND_RECEIPT
    assert [b for b, _ in await received(consumer, 1)] == [b"plain-0"]
    await nothing_more(consumer)  # plain-1 waits behind the open transaction's first entry
    await registry.end(standalone.broker.txn_participants, txn, TxnAction.COMMIT)
    assert [b for b, _ in await received(consumer, 3)] == [b"txn-0", b"plain-1", b"txn-1"]
    await nothing_more(consumer)  # the commit marker is never delivered
    await peer.close()
    await consumer.close()


async def test_aborted_entries_are_dropped_and_acked(standalone: Standalone, registry: FakeRegistry) -> None:
    peer = await WirePeer.connect(standalone.broker_port)
    producer = await Producer.create(peer, TOPIC)
    consumer = await WirePeer.connect(standalone.broker_port)
    await subscribe(consumer, TOPIC)
    txn = await open_txn(registry, TOPIC)
    await producer.send(b"doomed-0", txn)
    await producer.send(b"plain", None)
    await producer.send(b"doomed-1", txn)
    await registry.end(standalone.broker.txn_participants, txn, TxnAction.ABORT)
    await producer.send(b"after", None)
    assert [b for b, _ in await received(consumer, 2)] == [b"plain", b"after"]
    await nothing_more(consumer)
    topic = standalone.broker.registry.loaded[TOPIC]
    sub = topic.subscriptions["sub"]
    unacked = [p for p in sub.consumers[0].unacked]
    sub.cursor.acknowledge(unacked)
    assert sub.backlog() == 0  # aborted entries and both markers were acked by the dispatcher
    assert topic.txn is not None and topic.txn.buffer.is_aborted(txn)
    await peer.close()
    await consumer.close()


async def test_last_message_id_stops_before_an_open_txn(standalone: Standalone, registry: FakeRegistry) -> None:
    peer = await WirePeer.connect(standalone.broker_port)
    producer = await Producer.create(peer, TOPIC)
    first = (await producer.send(b"plain-0")).send_receipt.message_id
    txn = await open_txn(registry, TOPIC)
    await producer.send(b"open", txn)
    await producer.send(b"plain-1")
    await subscribe(peer, TOPIC, consumer_id=9, permits=0)

    async def last_id(request_id: int) -> proto.pb.MessageIdData:
        peer.send(proto.commands.get_last_message_id(9, request_id))
        return (await peer.expect(T.GET_LAST_MESSAGE_ID_RESPONSE)).command.getLastMessageIdResponse.last_message_id

    assert (await last_id(50)).entryId == first.entryId
    await registry.end(standalone.broker.txn_participants, txn, TxnAction.COMMIT)
    after = await last_id(51)
    assert after.entryId == first.entryId + 2  # plain-1, not the commit marker after it
    await peer.close()


async def test_refused_sends_leave_nothing_and_the_connection_usable(
    standalone: Standalone, registry: FakeRegistry
) -> None:
    peer = await WirePeer.connect(standalone.broker_port)
    producer = await Producer.create(peer, TOPIC)
    unknown = TxnId(0, 999)
    reply = await producer.send(b"x", unknown)
    assert reply.type == T.SEND_ERROR and reply.send_error.error == ServerErrorCode.TransactionNotFound
    not_registered = registry.new_txn()
    reply = await producer.send(b"y", not_registered)
    assert reply.type == T.SEND_ERROR
    ended = await open_txn(registry, TOPIC)
    await registry.end(standalone.broker.txn_participants, ended, TxnAction.COMMIT)
    reply = await producer.send(b"z", ended)
    assert reply.type == T.SEND_ERROR and reply.send_error.error == ServerErrorCode.InvalidTxnStatus
    assert (await producer.send(b"fine")).type == T.SEND_RECEIPT
    topic = standalone.broker.registry.loaded[TOPIC]
    assert topic.txn is not None and topic.txn.buffer.max_read_position() is None  # nothing left open
    assert topic.ledger.number_of_entries() == 2  # the commit marker and "fine"
    await peer.close()


async def test_txn_sends_are_refused_when_transactions_are_disabled(standalone: Standalone) -> None:
    standalone.broker.txn_registry = None
    peer = await WirePeer.connect(standalone.broker_port)
    producer = await Producer.create(peer, TOPIC)
    reply = await producer.send(b"x", TxnId(0, 1))
    assert reply.type == T.SEND_ERROR and reply.send_error.error == proto.pb.NotAllowedError
    assert "not enabled" in reply.send_error.message
    assert (await producer.send(b"plain")).type == T.SEND_RECEIPT
    await peer.close()
