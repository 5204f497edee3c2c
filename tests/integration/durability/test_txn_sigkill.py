"""SIGKILL the real ``magnetar standalone`` with a committed, an aborted and an open transaction (with a
pending ack) on a topic; after the restart plain official-client consumers see exactly the committed view.

The open transaction comes back from the coordinator's log with its deadline and times out (aborted) after
the restart: only then do the plain messages published behind it become visible, its message never does,
and the message it acked is delivered again. Restarted a second time (gracefully), the view is the same.
Run with the coordinator log and the pending-ack log written one record per entry, and both batched (PIP-160).
"""

from __future__ import annotations

from pathlib import Path

import pulsar
import pytest

from magnetar.client import Client
from tests.integration.broker_process import BrokerProcess
from tests.integration.conftest import make_client
from tests.integration.txn_helpers import assert_quiet, receive_all

pytestmark = pytest.mark.integration

TOPIC = "persistent://public/default/txn-sigkill"
OPEN_TXN_TIMEOUT_MS = 4_000
RECEIVE_MS = 30_000  # covers the open transaction's timeout after the restart


async def _before_kill(url: str) -> None:
    async with Client(url, operation_timeout_ms=10_000) as c:
        producer = await c.create_producer(TOPIC)
        acker = await c.subscribe(TOPIC, "acker", subscription_type="Shared", initial_position="earliest")
        await producer.send(b"p0")
        async with c.transaction(timeout_ms=60_000) as committed:
            await producer.send(b"c0", txn=committed)
            await producer.send(b"c1", txn=committed)
        aborted = await c.new_transaction(timeout_ms=60_000)
        await producer.send(b"a0", txn=aborted)
        await aborted.abort()
        first = await acker.receive()
        assert first.data == b"p0"
        left_open = await c.new_transaction(timeout_ms=OPEN_TXN_TIMEOUT_MS)
        await acker.acknowledge(first, txn=left_open)
        await producer.send(b"o0", txn=left_open)
        await producer.send(b"p1")


@pytest.mark.parametrize("pending_ack_log", ["plain", "batched"])
async def test_sigkill_with_open_committed_and_aborted_txns(tmp_path: Path, pending_ack_log: str) -> None:
    batching = ("--set", "transactionPendingAckBatchedWriteEnabled=true",
                "--set", "transactionLogBatchedWriteEnabled=true") if pending_ack_log == "batched" else ()
    broker = BrokerProcess(tmp_path / "data", extra_args=batching).start()
    try:
        await _before_kill(broker.url)
        broker.kill()  # SIGKILL
        broker.start()
        for number, round_ in enumerate(("after SIGKILL", "after a clean restart")):
            client = make_client(broker.url)
            try:
                view = client.subscribe(TOPIC, f"view-{number}",
                                        initial_position=pulsar.InitialPosition.Earliest)
                if round_ == "after SIGKILL":
                    assert receive_all(view, 3) == [b"p0", b"c0", b"c1"]
                    acker = client.subscribe(TOPIC, "acker", consumer_type=pulsar.ConsumerType.Shared)
                    assert receive_all(view, 1, RECEIVE_MS) == [b"p1"]  # released once the open transaction timed out
                    # the aborted pending ack gives p0 back (a Shared redelivery, after what was not held)
                    assert sorted(receive_all(acker, 4, RECEIVE_MS)) == [b"c0", b"c1", b"p0", b"p1"]
                    assert_quiet(acker)
                else:
                    assert receive_all(view, 4) == [b"p0", b"c0", b"c1", b"p1"]
                assert_quiet(view)
            finally:
                client.close()
            if round_ == "after SIGKILL":
                broker.restart()
    finally:
        broker.kill()
