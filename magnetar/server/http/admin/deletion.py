"""Admin routes for two-phase ledger deletion (PIP-186): in-flight deletions, the ledger audit, and the
owner's delete-ledger endpoint (``DELETE .../{topic}/ledger/{ledgerId}`` with a ``DeleteLedgerPayload``).
All answer 503 when ``topicTwoPhaseDeletionEnabled`` is off."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from magnetar.broker.admin.broker_admin import parse_topic
from magnetar.broker.deletion.messages import DeletionMessage, InvalidDeletionMessage, request_from_json
from magnetar.broker.deletion.service import DeleteFailed, LedgerDeletionService, NoOffloadStore, Outcome
from magnetar.broker.errors import Conflict, InvalidRequest, PreconditionFailed, ServiceNotReady
from magnetar.broker.parts import Broker
from magnetar.server.http.routes import Route, flag, int_value, json_body, match, no_content, ok

STATS = "/admin/v2/broker-stats"
LEDGER = "/admin/v2/persistent/{tenant}/{namespace}/{topic}/ledger/{ledgerId}"
OBJECT: dict[str, Any] = {"type": "object"}
PAYLOAD: dict[str, Any] = {
    "type": "object",
    "properties": {
        "ledgerId": {"type": "integer", "minimum": 0},
        "ledgerType": {"type": "string", "enum": ["LEDGER", "OFFLOAD_LEDGER"]},
        "ledgerComponent": {"type": "string",
                            "enum": ["MANAGED_LEDGER", "MANAGED_CURSOR", "SCHEMA_STORAGE", "COMPACTED_LEDGER"]},
        "cursorName": {"type": "string"},
        "schemaId": {"type": "string"},
        "offloadContext": {"type": "object", "additionalProperties": {"type": "string"}},
    },
}


def deletion_routes(broker: Broker) -> list[Route]:
    def service() -> LedgerDeletionService:
        if broker.ledger_deletion is None:
            raise ServiceNotReady("two-phase ledger deletion is off (topicTwoPhaseDeletionEnabled=false)")
        return broker.ledger_deletion

    async def inflight(_: web.Request) -> web.Response:
        per_topic = service().inflight()
        return ok({"inflightDeletions": sum(per_topic.values()), "topics": per_topic})

    async def audit(req: web.Request) -> web.Response:
        fix = req.method == "POST" and flag(req, "fix")
        report = await service().audit(broker.metadata, fix=fix)
        return ok(report.to_json())

    async def delete_ledger(req: web.Request) -> web.Response:
        topic = parse_topic("persistent", match(req, "tenant"), match(req, "namespace"), match(req, "topic"))
        ledger_id = int_value(match(req, "ledgerId"), "ledgerId")
        body = await json_body(req, required=False) or {}
        if not isinstance(body, dict):
            raise InvalidRequest("The body must be a DeleteLedgerPayload object")
        fields = {"ledgerComponent": "MANAGED_LEDGER", "ledgerType": "LEDGER", **body,
                  "ledgerId": ledger_id, "topicName": topic.managed_ledger_name}
        try:
            request = request_from_json(fields)
        except InvalidDeletionMessage as exc:
            raise InvalidRequest(str(exc)) from None
        try:
            outcome = await service().handle(DeletionMessage(request), requeue=False)
        except NoOffloadStore as exc:
            raise PreconditionFailed(str(exc)) from None
        except DeleteFailed as exc:
            raise ServiceNotReady(f"Deleting ledger {ledger_id} failed: {exc}") from None
        if outcome is Outcome.IN_USE:
            raise Conflict(f"Ledger {ledger_id} is still in use by {topic}")
        if outcome is Outcome.MISMATCH:
            raise PreconditionFailed(f"Ledger {ledger_id} does not belong to {topic} as described")
        return no_content()

    return [
        Route("GET", STATS + "/inflight-deletions", inflight, "Estimated in-flight ledger deletions (PIP-186)",
              "broker-stats", result=OBJECT),
        Route("GET", STATS + "/ledger-audit", audit, "Audit storage against metadata: orphans and dangling ledgers",
              "broker-stats", result=OBJECT),
        Route("POST", STATS + "/ledger-audit", audit, "Audit, and with fix=true queue orphans for deletion",
              "broker-stats", result=OBJECT, query={"fix": {"type": "boolean"}}),
        Route("DELETE", LEDGER, delete_ledger, "Delete one of the topic's ledgers if the topic no longer uses it",
              "persistent topic", ok=204, body=PAYLOAD),
    ]
