"""The transaction logs' internal stats on the real process, in Pulsar's JSON shapes: ``GET
/admin/v3/transactions/coordinatorInternalStats/{id}`` (TransactionCoordinatorInternalStats) and
``pendingAckInternalStats/{tenant}/{ns}/{topic}/{sub}`` (TransactionPendingAckInternalStats), and the
``magnetar admin transactions coordinator-internal-stats`` / ``pending-ack-internal-stats`` verbs."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from magnetar.client import Client
from tests.integration.admin.http import call
from tests.integration.broker_process import BrokerProcess

pytestmark = pytest.mark.integration

BASE = "/admin/v3/transactions"
TOPIC = "persistent://public/default/txn-internal"
# the fields of Pulsar's ManagedLedgerInternalStats, its LedgerInfo and its CursorStats
LEDGER_STATS = {
    "entriesAddedCounter", "numberOfEntries", "totalSize", "currentLedgerEntries", "currentLedgerSize",
    "lastLedgerCreatedTimestamp", "lastLedgerCreationFailureTimestamp", "waitingCursorsCount",
    "pendingAddEntriesCount", "lastConfirmedEntry", "state", "ledgers", "cursors",
}
LEDGER_INFO = {"ledgerId", "entries", "size", "offloaded", "metadata", "underReplicated"}
CURSOR_STATS = {
    "markDeletePosition", "readPosition", "waitingReadOp", "pendingReadOps", "messagesConsumedCounter",
    "cursorLedger", "cursorLedgerLastEntry", "individuallyDeletedMessages", "lastLedgerSwitchTimestamp", "state",
    "numberOfEntriesSinceFirstNotAckedMessage", "totalNonContiguousDeletedMessagesRange",
    "subscriptionHavePendingRead", "subscriptionHavePendingReplayRead", "properties",
}


def _admin(broker: BrokerProcess, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "magnetar.cli", "admin", "--admin-url", broker.web_url, "transactions", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)


def assert_log_stats(stats: dict[str, Any], name: str, cursor: str) -> dict[str, Any]:
    """TransactionLogStats: the managed ledger's name and its internal stats, field for field."""
    assert set(stats) == {"managedLedgerName", "managedLedgerInternalStats"}
    assert stats["managedLedgerName"] == name
    internal = stats["managedLedgerInternalStats"]
    assert set(internal) == LEDGER_STATS
    assert internal["ledgers"] and all(set(info) == LEDGER_INFO for info in internal["ledgers"])
    assert set(internal["cursors"]) == {cursor} and set(internal["cursors"][cursor]) == CURSOR_STATS
    assert internal["entriesAddedCounter"] > 0 and internal["state"] == "LedgerOpened"
    return dict(internal)


async def test_internal_stats_of_the_coordinator_and_pending_ack_logs(broker: BrokerProcess) -> None:
    async with Client(broker.url, operation_timeout_ms=10_000) as client:
        producer = await client.create_producer(TOPIC)
        consumer = await client.subscribe(TOPIC, "acker", initial_position="earliest")
        await producer.send(b"in")
        msg = await consumer.receive()
        async with client.transaction(timeout_ms=30_000) as txn:
            await producer.send(b"out", txn=txn)
            await consumer.acknowledge(msg, txn=txn)

    status, tc = call(broker.web_url, "GET", f"{BASE}/coordinatorInternalStats/0")
    assert status == 200, tc
    assert set(tc) == {"transactionLogStats"}
    assert_log_stats(tc["transactionLogStats"], "pulsar/system/persistent/__transaction_log_0",
                     "__transaction_log_cursor")

    status, pa = call(broker.web_url, "GET", f"{BASE}/pendingAckInternalStats/public/default/txn-internal/acker")
    assert status == 200, pa
    assert set(pa) == {"pendingAckLogStats"}
    assert_log_stats(pa["pendingAckLogStats"], "public/default/persistent/txn-internal-acker__transaction_pending_ack",
                     "__pending_ack_log")

    shown = _admin(broker, "coordinator-internal-stats", "-c", "0")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["transactionLogStats"]["managedLedgerName"].endswith("__transaction_log_0")
    shown = _admin(broker, "pending-ack-internal-stats", "-t", TOPIC, "-s", "acker", "-m")
    assert shown.returncode == 0, shown.stderr
    assert set(json.loads(shown.stdout)) == {"pendingAckLogStats"}


async def test_internal_stats_refuse_what_does_not_exist(broker: BrokerProcess) -> None:
    async with Client(broker.url, operation_timeout_ms=10_000) as client:
        await client.subscribe(TOPIC, "plain-only", initial_position="earliest")
    assert call(broker.web_url, "GET", f"{BASE}/coordinatorInternalStats/7")[0] == 404
    status, err = call(broker.web_url, "GET", f"{BASE}/pendingAckInternalStats/public/default/txn-internal/plain-only")
    assert status == 404 and "never acknowledged in a transaction" in err["reason"]
    assert call(broker.web_url, "GET", f"{BASE}/pendingAckInternalStats/public/default/txn-internal/nobody")[0] == 404
    refused = _admin(broker, "pending-ack-internal-stats", "-t", "non-persistent://public/default/x", "-s", "s")
    assert refused.returncode != 0 and "persistent topics only" in refused.stderr
