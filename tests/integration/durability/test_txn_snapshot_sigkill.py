"""SIGKILL the real ``magnetar standalone`` while it writes a multi-segment (PIP-178) transaction-buffer
snapshot; after the restart an official consumer still sees no aborted message, and after a clean restart
the topic recovers from the snapshot alone (no entry of the topic replayed).

One aborted id per segment, and no snapshot before the kill: the snapshot a load takes after the SIGKILL
writes one key per aborted transaction, a window the test kills the broker in (it waits for the log line
that says the write began, and checks that the load did not finish).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pulsar
import pytest

from magnetar.client import Client
from tests.integration.broker_process import BrokerProcess
from tests.integration.conftest import make_client
from tests.integration.txn_helpers import assert_quiet, receive_all

pytestmark = pytest.mark.integration

TOPIC = "persistent://public/default/txn-snapshot-sigkill"
ABORTED = 300
CONCURRENCY = 16
WAIT_S = 60.0
SETTINGS = (
    "--set", "transactionBufferSegmentedSnapshotEnabled=true",
    "--set", "transactionBufferSnapshotSegmentSize=32",  # one aborted id a segment
    "--set", "transactionBufferSnapshotMinTimeInMillis=3600000",
    "--set", "transactionBufferSnapshotMaxTransactionCount=1000000",
)


async def _produce(url: str) -> list[bytes]:
    """ABORTED aborted transactions, one committed and plain messages; returns what a consumer must see."""
    async with Client(url, operation_timeout_ms=20_000) as c:
        producer = await c.create_producer(TOPIC)
        await producer.send(b"p0")
        async with c.transaction(timeout_ms=60_000) as committed:
            await producer.send(b"c0", txn=committed)
        gate = asyncio.Semaphore(CONCURRENCY)

        async def abort_one(i: int) -> None:
            async with gate:
                txn = await c.new_transaction(timeout_ms=60_000)
                await producer.send(b"a%d" % i, txn=txn)
                await txn.abort()

        await asyncio.gather(*(abort_one(i) for i in range(ABORTED)))
        await producer.send(b"p1")
    return [b"p0", b"c0", b"p1"]


async def _load_and_kill(broker: BrokerProcess) -> None:
    """Load the topic (its recovery takes the big snapshot) and SIGKILL the broker once the write began."""
    mark = len(broker.log_lines)
    async with Client(broker.url, operation_timeout_ms=60_000) as c:
        load = asyncio.get_running_loop().create_task(c.subscribe(TOPIC, "loader", initial_position="earliest"))
        began = await asyncio.to_thread(broker.wait_for_log, f"{TOPIC}: writing a transaction-buffer snapshot",
                                        WAIT_S)
        broker.kill()
        load.cancel()
        await asyncio.gather(load, return_exceptions=True)
    assert began, broker.log_text()[-3000:]
    tail = "".join(broker.log_lines[mark:]).split(f"{TOPIC}: writing a transaction-buffer snapshot", 1)[1]
    assert f"{TOPIC}: transaction buffer ready" not in tail  # killed during the snapshot, not after


def _view(broker: BrokerProcess, name: str, expected: list[bytes]) -> None:
    client = make_client(broker.url)
    try:
        consumer = client.subscribe(TOPIC, name, initial_position=pulsar.InitialPosition.Earliest)
        assert receive_all(consumer, len(expected)) == expected
        assert_quiet(consumer)
    finally:
        client.close()


async def test_sigkill_during_a_multi_segment_snapshot(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data", extra_args=SETTINGS).start()
    try:
        expected = await _produce(broker.url)
        broker.kill()
        broker.start()
        await _load_and_kill(broker)
        broker.start()
        _view(broker, "after-sigkill", expected)  # the partial snapshot recovered: every abort still filtered
        broker.restart()  # a clean stop writes a whole snapshot
        mark = len(broker.log_lines)
        _view(broker, "after-restart", expected)
        assert f"{TOPIC}: transaction buffer ready (0 entries replayed" in "".join(broker.log_lines[mark:])
    finally:
        broker.kill()
