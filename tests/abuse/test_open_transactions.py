"""Open transactions are bounded by default (issue 36 item 10).

One connection opened 288,500 transactions in 45 s, and a TTL of 2^64-1 was accepted: such a transaction
hides every later message of its topics for ever. NEW_TXN past ``maxOpenTransactionsPerConnection`` (1,000
by default) answers NotAllowed, and a TTL above ``transactionTimeoutMaxMillis`` (3 hours) is cut to it.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from magnetar import protocol as proto
from magnetar.broker.config import BrokerConfig
from magnetar.broker.transactions.api import TxnAction
from magnetar.protocol.server_errors import ServerErrorCode
from tests.abuse.conftest import http, start_broker
from tests.component.wire import T, WirePeer
from tests.integration.broker_process import BrokerProcess

CAP = 20


@pytest.fixture(scope="module")
def capped(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = start_broker(tmp_path_factory, f"maxOpenTransactionsPerConnection={CAP}")
    try:
        yield proc
    finally:
        proc.kill()


async def new_txn(peer: WirePeer, request_id: int, ttl_ms: int = 60_000) -> proto.pb.CommandNewTxnResponse:
    peer.send(proto.txn_commands.new_txn(request_id, 0, ttl_ms))
    return (await peer.expect(T.NEW_TXN_RESPONSE)).command.newTxnResponse


def test_the_defaults_bound_both() -> None:
    config = BrokerConfig()
    assert config.max_open_transactions_per_connection > 0 and config.transaction_timeout_max_millis > 0


async def test_a_connection_opens_at_most_its_share_and_a_ttl_is_capped(capped: BrokerProcess) -> None:
    peer, other = await WirePeer.connect(capped.port), await WirePeer.connect(capped.port)
    try:
        opened = []
        for i in range(CAP):
            answer = await new_txn(peer, i, ttl_ms=2**64 - 1 if i == 0 else 60_000)
            assert not answer.HasField("error"), answer
            opened.append((answer.txnid_most_bits, answer.txnid_least_bits))
        refused = await new_txn(peer, CAP)
        assert refused.error == ServerErrorCode.NotAllowedError
        assert "maxOpenTransactionsPerConnection" in refused.message
        assert not (await new_txn(other, 1)).HasField("error")  # another connection is not held back

        most, least = opened[0]
        status, meta = http(capped, "GET", f"/admin/v3/transactions/transactionMetadata/{most}/{least}")
        assert status == 200 and meta["timeoutAt"] == BrokerConfig().transaction_timeout_max_millis, meta

        peer.send(proto.txn_commands.end_txn(100, opened[1], TxnAction.ABORT))  # ending one makes room
        assert not (await peer.expect(T.END_TXN_RESPONSE)).command.endTxnResponse.HasField("error")
        assert not (await new_txn(peer, 101)).HasField("error")
        assert (await new_txn(peer, 102)).error == ServerErrorCode.NotAllowedError
    finally:
        await peer.close()
        await other.close()
