"""Coordinator-to-participant commands from clients (issue 36 item 3).

END_TXN_ON_PARTITION and END_TXN_ON_SUBSCRIPTION are what a transaction coordinator sends the brokers of
a transaction's partitions and subscriptions. Served to any connection, an abort of a partition lost a
committed transaction's message (and left it COMMITTING for ever), and a commit of a partition exposed
an aborted one. Only the coordinator's decision may end a transaction anywhere.
"""

from __future__ import annotations

import pulsar

from magnetar import protocol as proto
from magnetar.broker.transactions.api import TxnAction
from magnetar.client import Client
from magnetar.protocol.server_errors import ServerErrorCode
from tests.abuse.conftest import unique
from tests.component.wire import T, WirePeer
from tests.integration.broker_process import BrokerProcess
from tests.integration.conftest import make_client
from tests.integration.txn_helpers import assert_quiet, receive_all


def end_on_partition(txn: tuple[int, int], action: TxnAction, request_id: int, topic: str) -> proto.pb.BaseCommand:
    cmd = T(type=T.END_TXN_ON_PARTITION)
    req = cmd.endTxnOnPartition
    req.request_id, (req.txnid_most_bits, req.txnid_least_bits), req.topic = request_id, txn, topic
    req.txn_action = action  # type: ignore[assignment]
    return cmd


def end_on_subscription(txn: tuple[int, int], action: TxnAction, request_id: int, topic: str,
                        sub: str) -> proto.pb.BaseCommand:
    cmd = T(type=T.END_TXN_ON_SUBSCRIPTION)
    req = cmd.endTxnOnSubscription
    req.request_id, (req.txnid_most_bits, req.txnid_least_bits) = request_id, txn
    req.subscription.topic, req.subscription.subscription = topic, sub
    req.txn_action = action  # type: ignore[assignment]
    return cmd


async def test_clients_cannot_end_a_transaction_on_a_partition_or_subscription(broker: BrokerProcess) -> None:
    topic = f"persistent://public/default/{unique('foreign-end')}"
    official = make_client(broker.url)
    peer = await WirePeer.connect(broker.port)
    try:
        consumer = official.subscribe(topic, "plain", consumer_type=pulsar.ConsumerType.Shared)
        async with Client(broker.url, operation_timeout_ms=10_000) as mclient:
            producer = await mclient.create_producer(topic)
            kept = await mclient.new_transaction(timeout_ms=60_000)
            await producer.send(b"kept", txn=kept)
            doomed = await mclient.new_transaction(timeout_ms=60_000)
            await producer.send(b"doomed", txn=doomed)

            # an abort of the partition under the open transaction that will commit, a commit under the
            # one that will abort, and the same on a subscription
            requests = [
                (end_on_partition(kept.txn_id, TxnAction.ABORT, 1, topic), T.END_TXN_ON_PARTITION_RESPONSE),
                (end_on_partition(doomed.txn_id, TxnAction.COMMIT, 2, topic), T.END_TXN_ON_PARTITION_RESPONSE),
                (end_on_subscription(kept.txn_id, TxnAction.ABORT, 3, topic, "plain"),
                 T.END_TXN_ON_SUBSCRIPTION_RESPONSE),
            ]
            for request, kind in requests:
                peer.send(request)
                cmd = (await peer.expect(kind)).command
                answer = cmd.endTxnOnPartitionResponse if kind == T.END_TXN_ON_PARTITION_RESPONSE \
                    else cmd.endTxnOnSubscriptionResponse
                assert answer.error == ServerErrorCode.InvalidTxnStatus, answer
                assert "only its coordinator ends it" in answer.message
            assert_quiet(consumer)  # neither was opened to readers

            await kept.commit()
            await doomed.abort()
            peer.send(end_on_partition(doomed.txn_id, TxnAction.COMMIT, 4, topic))  # after the end: unknown
            late = (await peer.expect(T.END_TXN_ON_PARTITION_RESPONSE)).command.endTxnOnPartitionResponse
            assert late.error == ServerErrorCode.TransactionNotFound, late
            await producer.send(b"after")
        assert receive_all(consumer, 2) == [b"kept", b"after"]
        assert_quiet(consumer)
    finally:
        await peer.close()
        official.close()


async def test_partitions_that_cannot_exist_are_refused_when_added(broker: BrokerProcess) -> None:
    """A commit must never be answered failed although applied: names that could never hold the transaction's
    entries are refused at ADD_PARTITION_TO_TXN (Pulsar's codes), so the commit ends everywhere at once."""
    topic = f"persistent://public/default/{unique('txn-names')}"
    bad = {
        f"non-persistent://public/default/{unique('np')}": ServerErrorCode.NotAllowedError,
        f"persistent://no-such-tenant/ns/{unique('t')}": ServerErrorCode.TopicNotFound,
        f"persistent://public/no-such-ns/{unique('t')}": ServerErrorCode.TopicNotFound,
        "not a//topic": ServerErrorCode.InvalidTopicName,
    }
    official = make_client(broker.url)
    peer = await WirePeer.connect(broker.port)
    try:
        consumer = official.subscribe(topic, "plain")
        async with Client(broker.url, operation_timeout_ms=10_000) as mclient:
            producer = await mclient.create_producer(topic)
            txn = await mclient.new_transaction(timeout_ms=60_000)
            await producer.send(b"committed", txn=txn)
            for request_id, (name, code) in enumerate(bad.items(), start=1):
                peer.send(proto.txn_commands.add_partition_to_txn(request_id, txn.txn_id, [name]))
                answer = (await peer.expect(T.ADD_PARTITION_TO_TXN_RESPONSE)).command.addPartitionToTxnResponse
                assert answer.error == code, (name, answer)
            await txn.commit()  # answered at once, as applied
        assert receive_all(consumer, 1) == [b"committed"]
    finally:
        await peer.close()
        official.close()
