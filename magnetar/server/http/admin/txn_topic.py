"""Admin routes for the topic side of transactions (Pulsar's ``/admin/v3/transactions`` resource):
``transactionBufferStats``, ``pendingAckStats``, ``pendingAckInternalStats`` (the pending-ack log's
managed-ledger internal stats, Pulsar's TransactionPendingAckInternalStats), ``transactionInBufferStats`` and
``transactionInPendingAckStats``, with Pulsar's JSON shapes (built in ``broker.transactions.txn_stats``).
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from magnetar.broker.admin.broker_admin import BrokerAdmin, parse_topic
from magnetar.broker.admin.stats import managed_ledger_internal_stats
from magnetar.broker.errors import NotFound, ServiceNotReady, SubscriptionNotFound
from magnetar.broker.names import TopicName
from magnetar.broker.topic.persistent import PersistentTopic
from magnetar.broker.transactions.api import TxnId
from magnetar.broker.transactions.listener import transactions_of
from magnetar.broker.transactions.pending_ack_log import ManagedLedgerAckLog
from magnetar.broker.transactions.topic_txn import TopicTransactions
from magnetar.broker.transactions.txn_stats import (
    buffer_stats,
    pending_ack_stats,
    txn_in_buffer_stats,
    txn_in_pending_ack_stats,
)
from magnetar.server.http.routes import Route, flag, int_value, match, ok

BASE = "/admin/v3/transactions"
TOPIC = "{tenant}/{namespace}/{topic}"
TXN = "{mostSigBits}/{leastSigBits}"
OBJECT: dict[str, Any] = {"type": "object"}
FLAGS = {"lowWaterMarks": {"type": "boolean"}, "segmentStats": {"type": "boolean"}}
METADATA_FLAG = {"metadata": {"type": "boolean"}}  # Pulsar's flag for ledger metadata: magnetar's ledgers show none


def _topic(req: web.Request) -> TopicName:
    return parse_topic("persistent", match(req, "tenant"), match(req, "namespace"), match(req, "topic"))


def _txn(req: web.Request) -> TxnId:
    most = int_value(match(req, "mostSigBits"), "mostSigBits")
    return TxnId(most, int_value(match(req, "leastSigBits"), "leastSigBits"))


def _transactions(topic: PersistentTopic) -> TopicTransactions:
    transactions = transactions_of(topic.txn)
    if transactions is None:
        raise ServiceNotReady(f"Topic {topic.name} has no transaction buffer")
    return transactions


async def _viewed(admin: BrokerAdmin, req: web.Request) -> PersistentTopic:
    """The topic a stats GET reads, without creating it: 404 for a declared partition never written to."""
    topic = await admin.view(_topic(req))
    if topic is None:
        raise NotFound("Topic not found: the partition was never written to")
    return topic


def txn_topic_routes(admin: BrokerAdmin) -> list[Route]:
    async def subscription(req: web.Request) -> tuple[TopicTransactions, str]:
        topic = await _viewed(admin, req)
        name = match(req, "subName")
        if name not in topic.subscriptions:
            raise SubscriptionNotFound(f"Subscription {name} not found")
        return _transactions(topic), name

    async def tb_stats(req: web.Request) -> web.Response:
        topic = await _viewed(admin, req)
        txn = _transactions(topic)
        return ok(buffer_stats(txn.buffer, topic.ledger.last_confirmed, segment_stats=flag(req, "segmentStats")))

    async def pa_stats(req: web.Request) -> web.Response:
        txn, name = await subscription(req)
        return ok(pending_ack_stats(txn.stores.get(name)))

    async def pa_internal(req: web.Request) -> web.Response:
        txn, name = await subscription(req)
        store = txn.stores.get(name)
        if store is None or not isinstance(store.log, ManagedLedgerAckLog):
            raise NotFound(f"Subscription {name} has no pending-ack log: it never acknowledged in a transaction")
        ledger = store.log.ledger
        return ok({"pendingAckLogStats": {"managedLedgerName": ledger.name,
                                          "managedLedgerInternalStats": managed_ledger_internal_stats(ledger)}})

    async def in_buffer(req: web.Request) -> web.Response:
        topic = await _viewed(admin, req)
        return ok(txn_in_buffer_stats(_transactions(topic).buffer, _txn(req)))

    async def in_pending_ack(req: web.Request) -> web.Response:
        txn, name = await subscription(req)
        return ok(txn_in_pending_ack_stats(txn.stores.get(name), _txn(req)))

    return [
        Route("GET", f"{BASE}/transactionBufferStats/{TOPIC}", tb_stats, "A topic's transaction buffer stats",
              "transactions", result=OBJECT, query=FLAGS),
        Route("GET", f"{BASE}/pendingAckStats/{TOPIC}/{{subName}}", pa_stats,
              "A subscription's pending-ack stats", "transactions", result=OBJECT, query=FLAGS),
        Route("GET", f"{BASE}/pendingAckInternalStats/{TOPIC}/{{subName}}", pa_internal,
              "Internal stats of a subscription's pending-ack log (its managed ledger)", "transactions",
              result=OBJECT, query=METADATA_FLAG),
        Route("GET", f"{BASE}/transactionInBufferStats/{TOPIC}/{TXN}", in_buffer,
              "One transaction in a topic's transaction buffer", "transactions", result=OBJECT),
        Route("GET", f"{BASE}/transactionInPendingAckStats/{TOPIC}/{{subName}}/{TXN}", in_pending_ack,
              "One transaction in a subscription's pending-ack store", "transactions", result=OBJECT),
    ]


__all__ = ["BASE", "txn_topic_routes"]
