"""With authentication and authorization on, other roles' transactions and the broker's own commands
(issue 36 items 2-4).

A role with produce/consume permission ended another role's transaction, added partitions to it and could
send END_TXN_ON_PARTITION; a ``pulsar.repl.`` producer name was open to it too. As in Pulsar, NEW_TXN
records the authenticated role as the transaction's owner; every later command on it (END_TXN, ADD_*, a
transactional SEND) is the owner's or a super-user's, and anyone else is told TransactionNotFound.
"""

from __future__ import annotations

import asyncio

from magnetar import protocol as proto
from magnetar.broker.transactions.api import TxnAction
from magnetar.client import AuthenticationToken, Client
from magnetar.protocol.server_errors import ServerErrorCode
from tests.abuse.conftest import create_producer, unique
from tests.abuse.test_foreign_txn_commands import end_on_partition
from tests.component.wire import T, WirePeer
from tests.integration.broker_process import BrokerProcess
from tests.integration.security.pki import token


async def connect_as(proc: BrokerProcess, secret: bytes, role: str) -> WirePeer:
    reader, writer = await asyncio.open_connection("127.0.0.1", proc.port)
    peer = WirePeer(reader, writer)
    peer.send(proto.commands.connect(auth_method_name="token", auth_data=token(secret, role).encode()))
    await peer.expect(T.CONNECTED)
    return peer


def client_as(proc: BrokerProcess, secret: bytes, role: str) -> Client:
    return Client(proc.url, operation_timeout_ms=10_000, authentication=AuthenticationToken(token(secret, role)))


async def test_only_the_owner_or_a_super_user_uses_a_transaction(secure: BrokerProcess, secret: bytes) -> None:
    topic = f"persistent://public/default/{unique('owned')}"
    mine = f"persistent://public/default/{unique('mallorys')}"
    mallory = await connect_as(secure, secret, "mallory")
    try:
        async with client_as(secure, secret, "alice") as alice, client_as(secure, secret, "admin") as admin:
            producer = await alice.create_producer(topic)
            txn = await alice.new_transaction(timeout_ms=60_000)
            await producer.send(b"alice's", txn=txn)

            refusals = [
                (proto.txn_commands.end_txn(1, txn.txn_id, TxnAction.ABORT), T.END_TXN_RESPONSE, "endTxnResponse"),
                (proto.txn_commands.add_partition_to_txn(2, txn.txn_id, [mine]), T.ADD_PARTITION_TO_TXN_RESPONSE,
                 "addPartitionToTxnResponse"),
                (proto.txn_commands.add_subscription_to_txn(3, txn.txn_id, [(topic, "s")]),
                 T.ADD_SUBSCRIPTION_TO_TXN_RESPONSE, "addSubscriptionToTxnResponse"),
            ]
            for request, kind, field in refusals:
                mallory.send(request)
                answer = getattr((await mallory.expect(kind)).command, field)
                assert answer.error == ServerErrorCode.TransactionNotFound, answer
                assert "neither the owner" in answer.message

            # a transactional SEND into alice's transaction, on the partition she registered
            assert (await create_producer(mallory, topic, producer_name="m")).command.type == T.PRODUCER_SUCCESS
            meta = proto.pb.MessageMetadata(producer_name="m", sequence_id=0, publish_time=1,
                                            txnid_most_bits=txn.txn_id[0], txnid_least_bits=txn.txn_id[1])
            mallory.send(proto.commands.send(1, 0, txnid=txn.txn_id), proto.make_entry(meta, b"smuggled"))
            refused = (await mallory.expect(T.SEND_ERROR)).command.send_error
            assert refused.error == ServerErrorCode.TransactionNotFound, refused

            # a coordinator's command to a participant is a super-user's (item 3)
            mallory.send(end_on_partition(txn.txn_id, TxnAction.ABORT, 4, topic))
            cmd = (await mallory.expect(T.END_TXN_ON_PARTITION_RESPONSE)).command.endTxnOnPartitionResponse
            assert cmd.error == ServerErrorCode.TransactionNotFound and "not a super user" in cmd.message

            await txn.commit()  # the owner still can
            other = await alice.new_transaction(timeout_ms=60_000)
            await producer.send(b"aborted by the super-user", txn=other)
            admin_peer = await connect_as(secure, secret, "admin")
            try:
                admin_peer.send(proto.txn_commands.end_txn(5, other.txn_id, TxnAction.ABORT))
                answer = (await admin_peer.expect(T.END_TXN_RESPONSE)).command.endTxnResponse
                assert not answer.HasField("error"), answer
            finally:
                await admin_peer.close()

            await producer.send(b"plain")
            reader = await admin.create_reader(topic, "earliest")
            assert [(await reader.read_next(timeout_ms=10_000)).data for _ in range(2)] == [b"alice's", b"plain"]
    finally:
        await mallory.close()


async def test_replicator_names_need_a_super_user(secure: BrokerProcess, secret: bytes) -> None:
    topic = f"persistent://public/default/{unique('repl-auth')}"
    name = "pulsar.repl.registered-->standalone"  # well formed, a registered cluster: only the role is wrong
    mallory = await connect_as(secure, secret, "mallory")
    try:
        reply = await create_producer(mallory, topic, producer_name=name)
        assert reply.command.type == T.ERROR and reply.command.error.error == ServerErrorCode.AuthorizationError
    finally:
        await mallory.close()
    admin = await connect_as(secure, secret, "admin")
    try:
        assert (await create_producer(admin, topic, producer_name=name)).command.type == T.PRODUCER_SUCCESS
    finally:
        await admin.close()
