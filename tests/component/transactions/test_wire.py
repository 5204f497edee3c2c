"""The coordinator's wire commands and magnetar.client's transaction API against an in-process broker.

The topics' side of transactions is a recording fake here (participants); end-to-end isolation is tested
against the real process in tests/integration/transactions.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from magnetar.app.settings import StandaloneSettings
from magnetar.app.standalone import Standalone
from magnetar.broker.config import BrokerConfig
from magnetar.broker.transactions.api import TxnAction, TxnId
from magnetar.client import Client, TransactionState, errors
from magnetar.client.sync import Client as SyncClient
from magnetar.metadata.memory import MemoryMetadataStore
from magnetar.protocol import parse_entry_metadata, pb, txn_commands
from magnetar.storage.memory import MemoryLedgerStore
from tests.component.transactions.fakes import FakeParticipants

TOPIC = "persistent://public/default/txn-wire"
SYNC_TOPIC = "persistent://public/default/txn-wire-sync"


async def _standalone(tmp_path: Path, participants: FakeParticipants, **broker: object) -> Standalone:
    settings = StandaloneSettings(
        data_dir=tmp_path, bind_address="127.0.0.1", broker_port=0, web_port=0,
        broker=BrokerConfig(**broker),  # type: ignore[arg-type]
    )
    sa = Standalone(settings, metadata=MemoryMetadataStore(), store=MemoryLedgerStore(), txn_participants=participants)
    await sa.start()
    return sa


@pytest.fixture
async def participants() -> FakeParticipants:
    return FakeParticipants()


@pytest.fixture
async def broker(tmp_path: Path, participants: FakeParticipants) -> AsyncIterator[Standalone]:
    sa = await _standalone(tmp_path, participants)
    yield sa
    await sa.stop()


@pytest.fixture
async def client(broker: Standalone) -> AsyncIterator[Client]:
    async with Client(f"pulsar://127.0.0.1:{broker.broker_port}", operation_timeout_ms=5_000) as c:
        yield c


async def _stored_txn_ids(broker: Standalone, topic: str) -> list[tuple[int, int]]:
    ledger = broker.broker.registry.loaded[topic].ledger
    cursor = ledger.new_non_durable_cursor(ledger.first_position(), "inspect")
    out = []
    for entry in await cursor.read_entries(100):
        meta = parse_entry_metadata(entry.data)
        out.append((meta.txnid_most_bits, meta.txnid_least_bits))
    return out


async def test_commit_registers_partitions_and_subscriptions_once(
    broker: Standalone, client: Client, participants: FakeParticipants
) -> None:
    producer = await client.create_producer(TOPIC)
    consumer = await client.subscribe(TOPIC, "sub", initial_position="earliest")
    await producer.send(b"plain")
    msg = await consumer.receive(timeout_ms=5_000)
    async with client.transaction(timeout_ms=30_000) as txn:
        await producer.send(b"a", txn=txn)
        await producer.send(b"b", txn=txn)
        await consumer.acknowledge(msg, txn=txn)
    assert txn.state is TransactionState.COMMITTED
    tid = TxnId(*txn.txn_id)
    assert participants.partition_calls == [(TOPIC, tid, TxnAction.COMMIT)]
    assert participants.subscription_calls == [(TOPIC, "sub", tid, TxnAction.COMMIT)]
    assert await _stored_txn_ids(broker, TOPIC) == [(0, 0), txn.txn_id, txn.txn_id]
    assert broker.coordinators is not None
    assert broker.coordinators.totals()[2] == 5  # new, partition, subscription, committing, committed


async def test_an_exception_aborts_and_explicit_commit_and_abort(
    client: Client, participants: FakeParticipants
) -> None:
    producer = await client.create_producer(TOPIC)
    with pytest.raises(RuntimeError):
        async with client.transaction() as txn:
            await producer.send(b"x", txn=txn)
            raise RuntimeError("boom")
    assert txn.state is TransactionState.ABORTED
    assert participants.partition_calls[-1][2] is TxnAction.ABORT
    explicit = await client.new_transaction(timeout_ms=10_000)
    await producer.send(b"y", txn=explicit)
    await explicit.commit()
    assert participants.partition_calls[-1] == (TOPIC, TxnId(*explicit.txn_id), TxnAction.COMMIT)
    with pytest.raises(errors.InvalidTxnStatus):
        await producer.send(b"late", txn=explicit)
    other = await client.new_transaction()
    await other.abort()
    assert other.state is TransactionState.ABORTED
    assert explicit.txn_id != other.txn_id


async def test_partitioned_producer_registers_every_partition_it_sends_to(
    broker: Standalone, client: Client, participants: FakeParticipants
) -> None:
    admin_topic = "persistent://public/default/txn-parts"
    from magnetar.broker.names import TopicName

    await broker.broker.catalog.create_partitioned_topic(TopicName.parse(admin_topic), 3)
    producer = await client.create_producer(admin_topic)
    async with client.transaction() as txn:
        for i in range(30):
            await producer.send(f"m{i}".encode(), key=f"k{i}", txn=txn)
    ended = sorted(topic for topic, _, _ in participants.partition_calls)
    assert ended == [f"{admin_topic}-partition-{i}" for i in range(3)]


async def test_bad_commands_get_their_error_and_the_connection_stays_usable(
    broker: Standalone, client: Client
) -> None:
    conn = await client._context.pool.get(client.config.service_url)
    with pytest.raises(errors.TransactionCoordinatorNotFound):
        await conn.request(lambda rid: txn_commands.tc_client_connect(rid, 5))
    with pytest.raises(errors.TransactionCoordinatorNotFound):
        await conn.request(lambda rid: txn_commands.new_txn(rid, 9, 1000))
    with pytest.raises(errors.TransactionNotFound):
        await conn.request(lambda rid: txn_commands.end_txn(rid, (0, 12345), 0))
    with pytest.raises(errors.TransactionCoordinatorNotFound):
        await conn.request(lambda rid: txn_commands.add_partition_to_txn(rid, (3, 0), [TOPIC]))
    reply = await conn.request(lambda rid: txn_commands.new_txn(rid, 0, 10_000))
    txn = (reply.newTxnResponse.txnid_most_bits, reply.newTxnResponse.txnid_least_bits)
    with pytest.raises(errors.InvalidTopicNameError):
        await conn.request(lambda rid: txn_commands.add_partition_to_txn(rid, txn, ["not a//topic"]))
    with pytest.raises(errors.UnknownError, match="subscription name"):
        await conn.request(lambda rid: txn_commands.add_subscription_to_txn(rid, txn, [(TOPIC, "")]))
    no_action = txn_commands.end_txn(0, txn, 0)
    no_action.endTxn.ClearField("txn_action")
    with pytest.raises(errors.UnknownError, match="txn_action"):
        await conn.request(lambda rid: _with_request_id(no_action, rid))
    reply = await conn.request(lambda rid: txn_commands.end_txn(rid, txn, 1))  # abort: ok
    assert reply.type == pb.BaseCommand.END_TXN_RESPONSE
    with pytest.raises(errors.TransactionNotFound):  # ended: gone
        await conn.request(lambda rid: txn_commands.end_txn(rid, txn, 1))
    meta = await conn.request(lambda rid: txn_commands.tc_client_connect(rid, 0))
    assert not meta.tcClientConnectResponse.HasField("error")


def _with_request_id(cmd: pb.BaseCommand, request_id: int) -> pb.BaseCommand:
    cmd.endTxn.request_id = request_id
    return cmd


async def test_wrong_end_action_on_an_ending_txn(client: Client, participants: FakeParticipants) -> None:
    producer = await client.create_producer(TOPIC)
    txn = await client.new_transaction()
    await producer.send(b"x", txn=txn)
    participants.failing = True
    conn = await client._context.pool.get(client.config.service_url)
    commit = asyncio.ensure_future(conn.request(lambda rid: txn_commands.end_txn(rid, txn.txn_id, 0)))
    await asyncio.wait_for(participants.called.wait(), 5)
    with pytest.raises(errors.InvalidTxnStatus):
        await conn.request(lambda rid: txn_commands.end_txn(rid, txn.txn_id, 1))
    participants.failing = False
    await commit  # retried within the END_TXN (transient failures)


async def test_the_assign_topic_is_discoverable(client: Client) -> None:
    assert await client.get_topic_partitions("persistent://pulsar/system/transaction_coordinator_assign") == [
        "persistent://pulsar/system/transaction_coordinator_assign-partition-0"
    ]


async def test_the_coordinator_log_is_not_a_topic(client: Client) -> None:
    with pytest.raises(errors.NotAllowedError):
        await client.create_producer("persistent://pulsar/system/__transaction_log_0")


async def test_disabled_coordinator_answers_not_found(tmp_path: Path, participants: FakeParticipants) -> None:
    sa = await _standalone(tmp_path, participants, transaction_coordinator_enabled=False)
    try:
        async with Client(f"pulsar://127.0.0.1:{sa.broker_port}", operation_timeout_ms=1_000) as c:
            conn = await c._context.pool.get(c.config.service_url)
            with pytest.raises(errors.TransactionCoordinatorNotFound, match="not enabled"):
                await conn.request(lambda rid: txn_commands.new_txn(rid, 0, 1000))
    finally:
        await sa.stop()


async def test_sync_facade(broker: Standalone, participants: FakeParticipants) -> None:
    aborted_id = await asyncio.to_thread(_sync_session, broker.broker_port)  # the broker keeps this loop
    assert participants.subscription_calls[-1] == (SYNC_TOPIC, "sync-sub", TxnId(*aborted_id), TxnAction.ABORT)


def _sync_session(port: int) -> tuple[int, int]:
    with SyncClient(f"pulsar://127.0.0.1:{port}") as c:
        producer = c.create_producer(SYNC_TOPIC)
        producer.send(b"plain")  # before the transaction: readable while it is open (the fake never ends it)
        with c.transaction(timeout_ms=10_000) as txn:
            producer.send(b"s", txn=txn)
        assert txn.state is TransactionState.COMMITTED
        consumer = c.subscribe(SYNC_TOPIC, "sync-sub", initial_position="earliest")
        msg = consumer.receive(timeout_ms=5_000)
        aborted = c.new_transaction()
        consumer.acknowledge(msg, txn=aborted)
        aborted.abort()
        assert aborted.state is TransactionState.ABORTED
        return aborted.txn_id


async def test_coordinators_grow_and_never_shrink(tmp_path: Path) -> None:
    """The assign topic grows with transactionCoordinatorCount; a lower count keeps every coordinator with a log."""
    from magnetar.broker.names import TopicName

    assign = TopicName.parse("persistent://pulsar/system/transaction_coordinator_assign")
    for configured, expected in ((2, 2), (1, 2), (3, 3)):
        settings = StandaloneSettings(
            data_dir=tmp_path, bind_address="127.0.0.1", broker_port=0, web_port=0,
            broker=BrokerConfig(transaction_coordinator_count=configured),
        )
        sa = Standalone(settings, txn_participants=FakeParticipants())
        await sa.start()
        try:
            assert sa.coordinators is not None and sorted(sa.coordinators.coordinators) == list(range(expected))
            assert (await sa.broker.catalog.partitioned_metadata(assign)).partitions == expected
        finally:
            await sa.stop()


async def test_the_coordinator_log_is_not_listed(broker: Standalone, client: Client) -> None:
    topics = await client.get_topics_of_namespace("pulsar/system")
    assert not [t for t in topics if "__transaction_log_" in t]
    assert "persistent://pulsar/system/transaction_coordinator_assign-partition-0" in topics
