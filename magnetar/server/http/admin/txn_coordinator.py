"""Admin routes of the transaction coordinators, on Pulsar's ``/admin/v3/transactions/...`` paths and JSON shapes:
``coordinatorStats`` (TransactionCoordinatorStats), ``coordinatorInternalStats/{id}``
(TransactionCoordinatorInternalStats: the coordinator log's managed-ledger internal stats),
``transactionMetadata/{most}/{least}`` (TransactionMetadata) and ``slowTransactions/{timeout}`` (txn id →
TransactionMetadata). With transactions disabled they answer 503.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from magnetar.broker.admin.stats import managed_ledger_internal_stats
from magnetar.broker.errors import NotFound, ServiceNotReady
from magnetar.broker.names import TopicName
from magnetar.broker.parts import Broker
from magnetar.broker.transactions.api import CoordinatorNotFound, TransactionNotFound, TxnId
from magnetar.broker.transactions.coordinator import TransactionCoordinator, TxnMeta
from magnetar.broker.transactions.coordinators import TransactionCoordinatorService
from magnetar.broker.transactions.listener import transactions_of
from magnetar.broker.transactions.topic_txn import TopicTransactions
from magnetar.broker.transactions.txn_stats import txn_in_buffer_stats, txn_in_pending_ack_stats
from magnetar.server.http.routes import Route, int_value, match, ok

BASE = "/admin/v3/transactions"
OBJECT: dict[str, Any] = {"type": "object"}
COORDINATOR_ID = {"coordinatorId": {"type": "integer", "minimum": 0}}
METADATA_FLAG = {"metadata": {"type": "boolean"}}  # Pulsar's flag for ledger metadata: magnetar's ledgers show none


def coordinator_stats(tc: TransactionCoordinator) -> dict[str, Any]:
    """Pulsar's TransactionCoordinatorStats."""
    return {
        "state": tc.state.value,
        "leastSigBits": tc.next_least - 1,
        "lowWaterMark": min((t.least for t in tc.txns), default=tc.next_least) - 1,
        "ongoingTxnSize": len(tc.txns),
        "recoverStartTime": tc.recover_start_ms,
        "recoverEndTime": tc.recover_end_ms,
    }


def coordinator_internal_stats(tc: TransactionCoordinator) -> dict[str, Any]:
    """Pulsar's TransactionCoordinatorInternalStats: TransactionLogStats of the coordinator's log."""
    ledger = tc.log.ledger
    return {"transactionLogStats": {"managedLedgerName": ledger.name,
                                    "managedLedgerInternalStats": managed_ledger_internal_stats(ledger)}}


def transaction_metadata(broker: Broker, meta: TxnMeta) -> dict[str, Any]:
    """Pulsar's TransactionMetadata: ``producedPartitions`` maps each partition to its buffer's view of the
    transaction (TransactionInBufferStats), ``ackedPartitions`` topic → subscription → its pending acks
    (TransactionInPendingAckStats); a topic not loaded has nothing of the transaction in memory (nulls)."""
    produced = {}
    for topic in meta.partitions:
        txn = _loaded_transactions(broker, topic)
        produced[topic] = (txn_in_buffer_stats(txn.buffer, meta.txn) if txn is not None
                           else {"startPosition": None, "aborted": False})
    acked: dict[str, dict[str, Any]] = {}
    for topic, sub in meta.subscriptions:
        txn = _loaded_transactions(broker, topic)
        store = txn.stores.get(sub) if txn is not None else None
        acked.setdefault(topic, {})[sub] = txn_in_pending_ack_stats(store, meta.txn)
    return {
        "txnId": str(meta.txn),
        "status": meta.status.name,
        "openTimestamp": meta.opened_ms,
        "timeoutAt": meta.timeout_at_ms - meta.opened_ms,  # Pulsar reports the timeout (ms) here
        "producedPartitions": produced,
        "ackedPartitions": acked,
    }


def _loaded_transactions(broker: Broker, topic: str) -> TopicTransactions | None:
    loaded = broker.registry.loaded.get(str(TopicName.parse(topic)))
    return transactions_of(loaded.txn) if loaded is not None else None


def coordinator_routes(broker: Broker) -> list[Route]:
    def service() -> TransactionCoordinatorService:
        if broker.txn_coordinators is None:
            raise ServiceNotReady("Transaction coordinator is not enabled (transactionCoordinatorEnabled=false)")
        return broker.txn_coordinators

    def one(tc_id: int) -> TransactionCoordinator:
        try:
            return service().coordinator(tc_id)
        except CoordinatorNotFound as exc:
            raise NotFound(str(exc)) from exc

    def selected(req: web.Request) -> list[TransactionCoordinator]:
        if "coordinatorId" in req.query:
            return [one(int_value(req.query["coordinatorId"], "coordinatorId"))]
        return list(service().coordinators.values())

    async def stats(req: web.Request) -> web.Response:
        if "coordinatorId" in req.query:
            return ok(coordinator_stats(selected(req)[0]))
        return ok({str(tc.tc_id): coordinator_stats(tc) for tc in selected(req)})

    async def internal(req: web.Request) -> web.Response:
        return ok(coordinator_internal_stats(one(int_value(match(req, "coordinatorId"), "coordinatorId"))))

    async def metadata(req: web.Request) -> web.Response:
        most = int_value(match(req, "most"), "mostSigBits")
        least = int_value(match(req, "least"), "leastSigBits")
        txn = TxnId(most, least)
        try:
            meta = one(most).get(txn)
        except TransactionNotFound as exc:
            raise NotFound(str(exc)) from exc
        return ok(transaction_metadata(broker, meta))

    async def slow(req: web.Request) -> web.Response:
        timeout_ms = int_value(match(req, "timeout"), "timeout")
        now = broker.clock.now_ms()
        out = {
            str(meta.txn): transaction_metadata(broker, meta)
            for tc in selected(req)
            for meta in sorted(tc.txns.values(), key=lambda m: m.txn)
            if now - meta.opened_ms > timeout_ms
        }
        return ok(out)

    return [
        Route("GET", f"{BASE}/coordinatorStats", stats, "Stats of the transaction coordinators (one with "
              "coordinatorId)", "transactions", result=OBJECT, query=COORDINATOR_ID),
        Route("GET", f"{BASE}/coordinatorInternalStats/{{coordinatorId}}", internal,
              "Internal stats of a transaction coordinator's log (its managed ledger)", "transactions",
              result=OBJECT, query=METADATA_FLAG),
        Route("GET", f"{BASE}/transactionMetadata/{{most}}/{{least}}", metadata,
              "Metadata of one transaction", "transactions", result=OBJECT),
        Route("GET", f"{BASE}/slowTransactions/{{timeout}}", slow,
              "Transactions open for longer than timeout (ms)", "transactions", result=OBJECT, query=COORDINATOR_ID),
    ]


__all__ = ["coordinator_routes"]
