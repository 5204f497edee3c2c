"""The transaction coordinator against the real ``magnetar standalone``: timeouts, end actions, SIGKILL at
each phase of a transaction, and its admin routes, CLI verbs and metrics.

Transactions come from magnetar's client; what a plain official-client consumer sees is the judge.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import subprocess
import sys
import urllib.request
import uuid
from collections.abc import AsyncIterator

import pulsar
import pytest

from magnetar.client import Client, errors
from magnetar.protocol import txn_commands
from tests.integration.admin.http import call
from tests.integration.broker_process import BrokerProcess
from tests.integration.conftest import make_client

pytestmark = pytest.mark.integration

RECEIVE_MS = 10_000
QUIET_MS = 500  # how long "nothing more arrives" is watched for (a bound on a negative check)


def topic_name(prefix: str) -> str:
    return f"persistent://public/default/{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
async def mclient(broker: BrokerProcess) -> AsyncIterator[Client]:
    async with Client(broker.url, operation_timeout_ms=10_000) as c:
        yield c


def receive_all(consumer: pulsar.Consumer) -> list[bytes]:
    """Everything the consumer gets until it stays quiet for QUIET_MS."""
    out = []
    for _ in range(10_000):  # bounded: ends on the first quiet period
        try:
            msg = consumer.receive(timeout_millis=QUIET_MS)
        except pulsar.Timeout:
            return out
        consumer.acknowledge(msg)
        out.append(msg.data())
    raise AssertionError("more messages than any test sends")


async def end_raw(client: Client, txn: tuple[int, int], action: int) -> None:
    conn = await client._context.pool.get(client.config.service_url)
    await conn.request(lambda rid: txn_commands.end_txn(rid, txn, action))


async def test_a_timed_out_txn_is_aborted_and_a_late_commit_fails(
    broker: BrokerProcess, client: pulsar.Client, mclient: Client
) -> None:
    topic = topic_name("txn-timeout")
    consumer = client.subscribe(topic, "plain")
    producer = await mclient.create_producer(topic)
    txn = await mclient.new_transaction(timeout_ms=500)
    await producer.send(b"never", txn=txn)
    label = f"({txn.txn_id[0]},{txn.txn_id[1]}) timed out"
    assert await asyncio.to_thread(broker.wait_for_log, label, 15)
    with pytest.raises((errors.TransactionNotFound, errors.InvalidTxnStatus)):  # aborting, or already aborted
        await txn.commit()
    path = f"/admin/v3/transactions/transactionMetadata/{txn.txn_id[0]}/{txn.txn_id[1]}"
    # the abort finishes within a few loop turns of the broker
    await asyncio.to_thread(broker.wait_until, lambda: call(broker.web_url, "GET", path)[0] == 404, 10)
    await producer.send(b"after")  # not held back: the timed-out txn is over on the topic
    assert receive_all(consumer) == [b"after"]


async def test_end_actions(client: pulsar.Client, mclient: Client) -> None:
    topic = topic_name("txn-end")
    consumer = client.subscribe(topic, "plain")
    producer = await mclient.create_producer(topic)
    txn = await mclient.new_transaction()
    await producer.send(b"c", txn=txn)
    await end_raw(mclient, txn.txn_id, 0)
    with pytest.raises(errors.TransactionNotFound):  # finished: crossed or repeated ends find nothing
        await end_raw(mclient, txn.txn_id, 1)
    with pytest.raises(errors.TransactionNotFound):
        await end_raw(mclient, (0, 987_654_321), 0)
    with pytest.raises(errors.TransactionCoordinatorNotFound):
        await end_raw(mclient, (42, 0), 0)
    assert receive_all(consumer) == [b"c"]


async def test_admin_routes_cli_and_metrics(broker: BrokerProcess, mclient: Client) -> None:
    topic = topic_name("txn-admin")
    producer = await mclient.create_producer(topic)
    consumer = await mclient.subscribe(topic, "sub", initial_position="earliest")
    await producer.send(b"plain")
    txn = await mclient.new_transaction(timeout_ms=60_000)
    await producer.send(b"x", txn=txn)
    await consumer.acknowledge(await consumer.receive(timeout_ms=RECEIVE_MS), txn=txn)
    most, least = txn.txn_id
    status, stats = call(broker.web_url, "GET", "/admin/v3/transactions/coordinatorStats")
    assert status == 200 and set(stats) == {"0"}
    assert stats["0"]["state"] == "Ready" and stats["0"]["ongoingTxnSize"] >= 1
    assert set(stats["0"]) == {"state", "leastSigBits", "lowWaterMark", "ongoingTxnSize", "recoverStartTime",
                               "recoverEndTime"}
    status, meta = call(broker.web_url, "GET", f"/admin/v3/transactions/transactionMetadata/{most}/{least}")
    assert status == 200
    assert meta["txnId"] == f"({most},{least})" and meta["status"] == "OPEN" and meta["timeoutAt"] == 60_000
    assert meta["producedPartitions"][topic]["startPosition"] is not None
    assert meta["producedPartitions"][topic]["aborted"] is False
    assert set(meta["ackedPartitions"][topic]["sub"]) == {"cumulativeAckPosition"}
    status, slow = call(broker.web_url, "GET", "/admin/v3/transactions/slowTransactions/0?coordinatorId=0")
    assert status == 200 and f"({most},{least})" in slow
    assert call(broker.web_url, "GET", "/admin/v3/transactions/coordinatorStats?coordinatorId=7")[0] == 404
    assert call(broker.web_url, "GET", f"/admin/v3/transactions/transactionMetadata/0/{2**40}")[0] == 404
    out = await asyncio.to_thread(
        _cli, broker, "transactions", "transaction-metadata", "-m", str(most), "-l", str(least)
    )
    assert '"OPEN"' in out
    assert '"ongoingTxnSize"' in await asyncio.to_thread(_cli, broker, "transactions", "coordinator-stats", "-c", "0")
    assert f"({most},{least})" in await asyncio.to_thread(_cli, broker, "transactions", "slow-transactions", "-t", "0s")
    await txn.commit()
    text = await asyncio.to_thread(_get_text, broker.web_url + "/metrics")
    for name in ("pulsar_txn_active_count", "pulsar_txn_created_total", "pulsar_txn_committed_total",
                 "pulsar_txn_aborted_total", "pulsar_txn_timeout_total", "pulsar_txn_append_log_total"):
        assert f'{name}{{cluster="standalone",coordinator_id="0"}}' in text


def _cli(broker: BrokerProcess, *args: str) -> str:
    cmd = [sys.executable, "-m", "magnetar.cli", "admin", "--admin-url", broker.web_url, *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=True).stdout


def _get_text(url: str) -> str:
    with urllib.request.urlopen(url, timeout=15) as resp:
        return str(resp.read().decode())


async def test_sigkill_at_every_phase_keeps_the_view(fresh_broker: BrokerProcess) -> None:
    """Open, committed, aborted and mid-commit transactions across SIGKILLs: each is all or nothing, an open
    one can still be committed after the restart, and the committing one ends up whole."""
    partitions = 8
    topic = topic_name("txn-kill")
    call(fresh_broker.web_url, "PUT", f"/admin/v2/persistent/{topic.split('://')[1]}/partitions", partitions)
    async with Client(fresh_broker.url, operation_timeout_ms=10_000) as c:
        producer = await c.create_producer(topic)
        committed = await c.new_transaction(timeout_ms=600_000)
        aborted = await c.new_transaction(timeout_ms=600_000)
        still_open = await c.new_transaction(timeout_ms=600_000)
        for i in range(partitions * 2):
            await producer.send(f"c{i}".encode(), key=str(i), txn=committed)
            await producer.send(f"a{i}".encode(), key=str(i), txn=aborted)
            await producer.send(f"o{i}".encode(), key=str(i), txn=still_open)
        await committed.commit()
        await aborted.abort()
        open_id = still_open.txn_id
    fresh_broker.kill()
    fresh_broker.start()
    rng = random.Random(12)
    mid_ids = []
    for _round in range(3):  # SIGKILL while an END_TXN over many partitions is under way
        async with Client(fresh_broker.url, operation_timeout_ms=10_000) as c:
            producer = await c.create_producer(topic)
            txn = await c.new_transaction(timeout_ms=600_000)
            for i in range(partitions):
                await producer.send(f"m{_round}-{i}".encode(), key=str(i), txn=txn)
            conn = await c._context.pool.get(c.config.service_url)
            conn.send(txn_commands.end_txn(999_999, txn.txn_id, 0))  # not waited for
            await asyncio.sleep(rng.uniform(0, 0.05))  # where the kill lands: drawn, not a synchronisation
            mid_ids.append(txn.txn_id)
        fresh_broker.kill()
        fresh_broker.start()
    async with Client(fresh_broker.url, operation_timeout_ms=10_000) as c:
        await end_raw(c, open_id, 0)  # the open one survived and commits now
        for txn_id in mid_ids:  # each was open, committing or committed: commit again or find it finished
            with contextlib.suppress(errors.TransactionNotFound):
                await end_raw(c, txn_id, 0)
    official = make_client(fresh_broker.url)
    try:
        consumer = official.subscribe(topic, "after", initial_position=pulsar.InitialPosition.Earliest)
        seen = receive_all(consumer)
    finally:
        official.close()
    expected = {f"c{i}" for i in range(partitions * 2)} | {f"o{i}" for i in range(partitions * 2)}
    expected |= {f"m{r}-{i}" for r in range(3) for i in range(partitions)}
    assert sorted(x.decode() for x in seen) == sorted(expected)  # exactly once each, no aborted, no markers


async def test_ending_an_ended_transaction_raises_invalid_txn_status(mclient: Client) -> None:
    """As the official client: a second commit, or an abort after a commit, is InvalidTxnStatus."""
    producer = await mclient.create_producer(topic_name("txn-twice"))
    txn = await mclient.new_transaction(timeout_ms=30_000)
    await producer.send(b"once", txn=txn)
    await txn.commit()
    with pytest.raises(errors.InvalidTxnStatus):
        await txn.commit()
    with pytest.raises(errors.InvalidTxnStatus):
        await txn.abort()
