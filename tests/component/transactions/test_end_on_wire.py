"""END_TXN_ON_PARTITION and END_TXN_ON_SUBSCRIPTION at the wire: ending works as the coordinator decided
(never otherwise), repeats are harmless, bad input gets its error code in the response and the connection
stays usable."""

from __future__ import annotations

import pytest

from magnetar import protocol as proto
from magnetar.app.standalone import Standalone
from magnetar.broker.transactions.api import TxnAction, TxnId
from magnetar.protocol.server_errors import ServerErrorCode
from tests.component.transactions.helpers import Producer, ack, nothing_more, received, subscribe
from tests.component.wire import T, WirePeer
from tests.txn_fakes import FakeRegistry

TOPIC = "persistent://public/default/txn-end-wire"


@pytest.fixture
def standalone(txn_standalone: Standalone) -> Standalone:
    return txn_standalone


def end_on_partition(txn: TxnId, action: int | None, request_id: int, topic: str = TOPIC) -> proto.pb.BaseCommand:
    cmd = T(type=T.END_TXN_ON_PARTITION)
    req = cmd.endTxnOnPartition
    req.request_id, req.txnid_most_bits, req.txnid_least_bits, req.topic = request_id, txn.most, txn.least, topic
    if action is not None:
        req.txn_action = action  # type: ignore[assignment]
    return cmd


def end_on_subscription(txn: TxnId, action: int, request_id: int, sub: str) -> proto.pb.BaseCommand:
    cmd = T(type=T.END_TXN_ON_SUBSCRIPTION)
    req = cmd.endTxnOnSubscription
    req.request_id, req.txnid_most_bits, req.txnid_least_bits = request_id, txn.most, txn.least
    req.subscription.topic, req.subscription.subscription = TOPIC, sub
    req.txn_action = action  # type: ignore[assignment]
    return cmd


async def reply(peer: WirePeer, kind: int) -> proto.pb.CommandEndTxnOnPartitionResponse:
    frame = await peer.expect(kind)
    cmd = frame.command
    if kind == T.END_TXN_ON_PARTITION_RESPONSE:
        return cmd.endTxnOnPartitionResponse
    return cmd.endTxnOnSubscriptionResponse  # same fields


async def test_end_on_partition_over_the_wire(standalone: Standalone, registry: FakeRegistry) -> None:
    peer = await WirePeer.connect(standalone.broker_port)
    producer = await Producer.create(peer, TOPIC)
    consumer = await WirePeer.connect(standalone.broker_port)
    await subscribe(consumer, TOPIC)
    txn = registry.new_txn()
    registry.add_partition(txn, TOPIC)
    await producer.send(b"t0", txn)
    await nothing_more(consumer)
    peer.send(end_on_partition(txn, None, 1))
    refused = await reply(peer, T.END_TXN_ON_PARTITION_RESPONSE)
    assert refused.error == proto.pb.NotAllowedError and refused.request_id == 1
    peer.send(end_on_partition(txn, TxnAction.COMMIT, 2))  # open: the coordinator decided nothing yet
    refused = await reply(peer, T.END_TXN_ON_PARTITION_RESPONSE)
    assert refused.error == ServerErrorCode.InvalidTxnStatus and "only its coordinator" in refused.message
    await nothing_more(consumer)
    registry.decide(txn, TxnAction.COMMIT)
    peer.send(end_on_partition(txn, TxnAction.COMMIT, 2))
    done = await reply(peer, T.END_TXN_ON_PARTITION_RESPONSE)
    assert not done.HasField("error") and (done.txnid_most_bits, done.txnid_least_bits) == (txn.most, txn.least)
    assert [b for b, _ in await received(consumer, 1)] == [b"t0"]
    entries = standalone.broker.registry.loaded[TOPIC].ledger.number_of_entries()
    peer.send(end_on_partition(txn, TxnAction.COMMIT, 3))  # a retry: no second marker
    assert not (await reply(peer, T.END_TXN_ON_PARTITION_RESPONSE)).HasField("error")
    assert standalone.broker.registry.loaded[TOPIC].ledger.number_of_entries() == entries
    peer.send(end_on_partition(txn, TxnAction.ABORT, 4))  # crossed: refused, the commit stands
    assert (await reply(peer, T.END_TXN_ON_PARTITION_RESPONSE)).error == ServerErrorCode.InvalidTxnStatus
    peer.send(end_on_partition(txn, TxnAction.COMMIT, 5, topic="persistent://public/default/never-was"))
    assert not (await reply(peer, T.END_TXN_ON_PARTITION_RESPONSE)).HasField("error")  # nothing waits there
    peer.send(end_on_partition(txn, TxnAction.COMMIT, 6, topic="not a topic://x"))
    assert not (await reply(peer, T.END_TXN_ON_PARTITION_RESPONSE)).HasField("error")  # nothing can wait there
    assert (await producer.send(b"plain")).type == T.SEND_RECEIPT  # the connection is still usable
    await peer.close()
    await consumer.close()


async def test_end_on_subscription_over_the_wire(standalone: Standalone, registry: FakeRegistry) -> None:
    peer = await WirePeer.connect(standalone.broker_port)
    producer = await Producer.create(peer, TOPIC)
    await producer.send(b"m0")
    await subscribe(peer, TOPIC, sub_type=1)
    [(_, id0)] = await received(peer, 1)
    txn = registry.new_txn()
    registry.add_subscription(txn, TOPIC, "sub")
    assert not (await ack(peer, 7, id0, txn, 10)).HasField("error")
    peer.send(end_on_subscription(txn, TxnAction.COMMIT, 11, "sub"))  # not what the coordinator decided
    assert (await reply(peer, T.END_TXN_ON_SUBSCRIPTION_RESPONSE)).error == ServerErrorCode.InvalidTxnStatus
    registry.decide(txn, TxnAction.ABORT)
    peer.send(end_on_subscription(txn, TxnAction.ABORT, 11, "sub"))
    assert not (await reply(peer, T.END_TXN_ON_SUBSCRIPTION_RESPONSE)).HasField("error")
    assert [b for b, _ in await received(peer, 1)] == [b"m0"]  # given back by the abort
    peer.send(end_on_subscription(txn, TxnAction.ABORT, 12, "no-such-sub"))
    assert not (await reply(peer, T.END_TXN_ON_SUBSCRIPTION_RESPONSE)).HasField("error")
    await peer.close()


async def test_end_commands_are_refused_when_transactions_are_disabled(standalone: Standalone) -> None:
    standalone.broker.txn_registry = None
    peer = await WirePeer.connect(standalone.broker_port)
    peer.send(end_on_partition(TxnId(0, 1), TxnAction.COMMIT, 1))
    refused = await reply(peer, T.END_TXN_ON_PARTITION_RESPONSE)
    assert refused.error == proto.pb.NotAllowedError and "not enabled" in refused.message
    peer.send(end_on_subscription(TxnId(0, 1), TxnAction.COMMIT, 2, "sub"))
    assert (await reply(peer, T.END_TXN_ON_SUBSCRIPTION_RESPONSE)).error == proto.pb.NotAllowedError
    await peer.close()


@pytest.mark.parametrize("name", [
    "non-persistent://public/default/np", "persistent://pulsar/system/__transaction_log_0", "not a//topic",
])
async def test_a_participant_that_can_never_exist_ends_at_once(standalone: Standalone, name: str) -> None:
    """A name logged before names were checked when added (issue 36 item 5): permanent, so ending there
    succeeds at once instead of failing every retry and leaving the transaction ending for ever."""
    await standalone.broker.txn_participants.end_txn_on_partition(name, TxnId(0, 1), TxnAction.COMMIT)
    await standalone.broker.txn_participants.end_txn_on_subscription(name, "s", TxnId(0, 1), TxnAction.ABORT)
