"""Transaction isolation as the official client sees it, against the real ``magnetar standalone``.

Transactions are opened with magnetar's own client (the official Python client has none); plain
official-client consumers and readers must never be given an open or aborted message or a marker, and
plain messages published after an open transaction's first message wait until it ends.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pulsar
import pytest

from magnetar.client import Client
from tests.integration.admin.http import call
from tests.integration.broker_process import BrokerProcess
from tests.integration.client.conftest import topic_name
from tests.integration.txn_helpers import RECEIVE_MS, assert_quiet, receive_all

pytestmark = pytest.mark.integration


@pytest.fixture
async def mclient(broker: BrokerProcess) -> AsyncIterator[Client]:
    async with Client(broker.url, operation_timeout_ms=10_000) as c:
        yield c


async def test_plain_consumer_sees_committed_messages_in_order_and_never_aborted_ones(
    client: pulsar.Client, mclient: Client
) -> None:
    topic = topic_name("txn-iso")
    consumer = client.subscribe(topic, "plain", consumer_type=pulsar.ConsumerType.Shared)
    official = client.create_producer(topic, batching_enabled=False)
    producer = await mclient.create_producer(topic)
    official.send(b"p0")
    txn = await mclient.new_transaction(timeout_ms=60_000)
    await producer.send(b"t0", txn=txn)
    official.send(b"p1")
    await producer.send(b"t1", txn=txn)
    assert receive_all(consumer, 1) == [b"p0"]
    assert_quiet(consumer)  # p1 waits behind t0, the open transaction's first message
    await txn.commit()
    assert receive_all(consumer, 3) == [b"t0", b"p1", b"t1"]
    assert_quiet(consumer)  # the commit marker is never delivered

    batched = await mclient.create_producer(topic, batching=True, batching_max_delay_ms=5)
    official.send(b"p2")
    doomed = await mclient.new_transaction(timeout_ms=60_000)
    for i in range(5):
        await batched.send(b"a%d" % i, txn=doomed)
    official.send(b"p3")
    await doomed.abort()
    official.send(b"p4")
    assert receive_all(consumer, 3) == [b"p2", b"p3", b"p4"]
    assert_quiet(consumer)
    official.close()
    consumer.close()


async def test_transactional_sends_are_batched_and_the_batch_commits_or_aborts_whole(
    client: pulsar.Client, mclient: Client
) -> None:
    topic = topic_name("txn-batched")
    consumer = client.subscribe(topic, "plain", consumer_type=pulsar.ConsumerType.Shared)
    producer = await mclient.create_producer(topic, batching=True, batching_max_delay_ms=60_000)
    for action in ("abort", "commit"):
        txn = await mclient.new_transaction(timeout_ms=60_000)
        await txn.register_partition(producer.topic)
        sends = [producer.send_nowait(b"%s-%d" % (action.encode(), i), txn=txn) for i in range(20)]
        # the end sends the batch at once (never waiting for the producer's 60 s delay)
        await asyncio.wait_for(txn.abort() if action == "abort" else txn.commit(), 30)
        ids = await asyncio.gather(*sends)
        assert len({m.entry for m in ids}) == 1 and [m.batch_index for m in ids] == list(range(20))
    assert receive_all(consumer, 20) == [b"commit-%d" % i for i in range(20)]  # none of the aborted batch
    assert_quiet(consumer)
    consumer.close()


async def test_reader_stops_at_the_last_real_message(client: pulsar.Client, mclient: Client) -> None:
    topic = topic_name("txn-reader")
    producer = await mclient.create_producer(topic)
    async with mclient.transaction(timeout_ms=60_000) as txn:
        await producer.send(b"only", txn=txn)
    reader = client.create_reader(topic, pulsar.MessageId.earliest)
    assert reader.read_next(timeout_millis=RECEIVE_MS).data() == b"only"
    assert not reader.has_message_available()  # the commit marker after it is not a message
    reader.close()


async def test_ack_in_a_txn_then_abort_redelivers(mclient: Client) -> None:
    topic = topic_name("txn-ack")
    producer = await mclient.create_producer(topic)
    consumer = await mclient.subscribe(topic, "s", subscription_type="Shared", initial_position="earliest")
    await producer.send(b"m0")
    await producer.send(b"m1")
    first, second = await consumer.receive(), await consumer.receive()
    aborted = await mclient.new_transaction(timeout_ms=60_000)
    await consumer.acknowledge(first, txn=aborted)
    async with mclient.transaction(timeout_ms=60_000) as committed:
        await consumer.acknowledge(second, txn=committed)
    await aborted.abort()
    again = await consumer.receive()
    assert again.data == b"m0"


async def test_many_partitions_and_subscriptions_in_one_txn(
    broker: BrokerProcess, client: pulsar.Client, mclient: Client
) -> None:
    out = topic_name("txn-out")
    path = out.replace("persistent://", "/admin/v2/persistent/") + "/partitions"
    assert call(broker.web_url, "PUT", path, 3)[0] in (200, 204)
    source = topic_name("txn-in")
    seed = await mclient.create_producer(source)
    await seed.send(b"in")
    subs = [await mclient.subscribe(source, name, initial_position="earliest") for name in ("s1", "s2")]
    inputs = [await s.receive() for s in subs]
    watcher = client.subscribe(out, "watch")
    producer = await mclient.create_producer(out)
    for attempt, action in enumerate(("abort", "commit")):
        txn = await mclient.new_transaction(timeout_ms=60_000)
        for i in range(6):
            await producer.send(b"%s-%d" % (action.encode(), i), key=str(i), txn=txn)
        for sub, msg in zip(subs, inputs, strict=True):
            await sub.acknowledge(msg, txn=txn)
        assert_quiet(watcher)
        await (txn.abort() if action == "abort" else txn.commit())
        if attempt == 0:
            assert_quiet(watcher)
            inputs = [await s.receive() for s in subs]  # the aborted acks gave the input back
    assert sorted(receive_all(watcher, 6)) == [b"commit-%d" % i for i in range(6)]
    assert_quiet(watcher)
    for name in ("s1", "s2"):
        _, stats = call(broker.web_url, "GET", source.replace("persistent://", "/admin/v2/persistent/") + "/stats")
        assert stats["subscriptions"][name]["msgBacklog"] == 0
    watcher.close()


def _metric(text: str, name: str, topic: str) -> float:
    for line in text.splitlines():
        if line.startswith(name + "{") and f'topic="{topic}"' in line:
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name} for {topic} not in /metrics")


async def test_transaction_stats_and_metrics(broker: BrokerProcess, mclient: Client) -> None:
    topic = topic_name("txn-stats")
    local = topic.replace("persistent://", "")
    producer = await mclient.create_producer(topic)
    consumer = await mclient.subscribe(topic, "s", subscription_type="Shared", initial_position="earliest")
    await producer.send(b"plain")
    msg = await consumer.receive()
    txn = await mclient.new_transaction(timeout_ms=60_000)
    most, least = txn.txn_id
    first = await producer.send(b"t", txn=txn)
    await consumer.acknowledge(msg, txn=txn)
    base = "/admin/v3/transactions"
    status, tb = call(broker.web_url, "GET", f"{base}/transactionBufferStats/{local}")
    assert status == 200 and tb["state"] == "Ready" and tb["ongoingTxnSize"] == 1
    assert tb["maxReadPosition"] == f"{first.ledger_id}:{first.entry_id - 1}"
    status, pa = call(broker.web_url, "GET", f"{base}/pendingAckStats/{local}/s")
    assert status == 200 and pa["ongoingTxnSize"] == 1
    status, one = call(broker.web_url, "GET", f"{base}/transactionInBufferStats/{local}/{most}/{least}")
    assert one == {"startPosition": f"{first.ledger_id}:{first.entry_id}", "aborted": False}
    _, stats = call(broker.web_url, "GET", f"/admin/v2/persistent/{local}/stats")
    assert stats["ongoingTxnCount"] == 1 and stats["committedTxnCount"] == 0
    await txn.commit()
    _, stats = call(broker.web_url, "GET", f"/admin/v2/persistent/{local}/stats")
    assert (stats["ongoingTxnCount"], stats["committedTxnCount"]) == (0, 1)
    assert call(broker.web_url, "GET", f"{base}/pendingAckStats/{local}/s")[1]["ongoingTxnSize"] == 0
    assert call(broker.web_url, "GET", f"{base}/pendingAckStats/{local}/nope")[0] == 404
    assert call(broker.web_url, "GET", f"{base}/transactionInBufferStats/{local}/x/1")[0] == 400
    status, text = call(broker.web_url, "GET", "/metrics")
    assert status == 200 and isinstance(text, str)
    assert _metric(text, "pulsar_txn_tb_committed_total", topic) == 1
    assert _metric(text, "pulsar_txn_tb_active_total", topic) == 0
    assert _metric(text, "pulsar_txn_tp_committed_count_total", topic) == 1
