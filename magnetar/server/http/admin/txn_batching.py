"""Admin routes for PIP-160's runtime switch: read and change the batching of the coordinator logs and of
the pending-ack logs (the seed proposes them; Pulsar never built them). A change is stored as dynamic
configuration (it survives a restart) and applies to every running log at its next write; ``GET`` also
reports what the writers of each family have written so far. The same keys can be changed with Pulsar's own
dynamic-configuration routes (``/admin/v2/brokers/configuration``, what ``pulsar-admin brokers
update-dynamic-config`` calls): the ``transaction*BatchedWrite*`` keys are the dynamic ones here.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from magnetar.broker.errors import InvalidRequest
from magnetar.broker.parts import Broker
from magnetar.broker.transactions.batching import DYNAMIC_KEYS, BatchedLogSwitch, LogFamily
from magnetar.server.http.routes import Route, int_value, json_body, match, no_content, ok

BASE = "/admin/v3/transactions/batchedLog"
CONFIGURATION = "/admin/v2/brokers/configuration"  # Pulsar's dynamic configuration (BrokersBase)
#: path segment and JSON name of each family
FAMILY_NAMES = {LogFamily.TRANSACTION_LOG: "transactionLog", LogFamily.PENDING_ACK: "pendingAckLog"}
#: JSON field -> BatchingConfig field, with Pulsar's key suffixes as names
FIELDS = {"maxRecords": "max_records", "maxSize": "max_bytes", "maxDelayInMillis": "max_delay_ms"}
SETTING_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "enabled": {"type": "boolean"},
        **{name: {"type": "integer", "minimum": 0} for name in FIELDS},
    },
    "additionalProperties": False,
}
STATUS_SCHEMA: dict[str, Any] = {"type": "object"}


def describe(switch: BatchedLogSwitch, family: LogFamily) -> dict[str, Any]:
    config = switch.configs[family]
    metrics = switch.metrics[family]
    return {
        "enabled": config.enabled,
        **{name: getattr(config, attr) for name, attr in FIELDS.items()},
        "entriesWritten": metrics.entries_written,
        "recordsWritten": metrics.records_written,
        "flushTriggers": {trigger.value: count for trigger, count in metrics.triggers.items()},
    }


def changes_from(body: Any) -> dict[str, object]:
    if not isinstance(body, dict):
        raise InvalidRequest("The body must be a JSON object")
    unknown = set(body) - {"enabled", *FIELDS}
    if unknown:
        raise InvalidRequest(f"Unknown fields: {sorted(unknown)}")
    changes: dict[str, object] = {}
    if "enabled" in body:
        if not isinstance(body["enabled"], bool):
            raise InvalidRequest("enabled must be true or false")
        changes["enabled"] = body["enabled"]
    for name, attr in FIELDS.items():
        if name in body:
            changes[attr] = int_value(body[name], name, 0, 2**31 - 1)
    return changes


def batched_log_routes(broker: Broker) -> list[Route]:
    switch = broker.txn_log_batching

    async def status(_: web.Request) -> web.Response:
        return ok({FAMILY_NAMES[f]: describe(switch, f) for f in LogFamily})

    def setter(family: LogFamily) -> Route:
        async def update(req: web.Request) -> web.Response:
            await switch.update(family, **changes_from(await json_body(req, required=True)))
            return ok(describe(switch, family))

        return Route(
            "POST", f"{BASE}/{FAMILY_NAMES[family]}", update,
            f"Change the batching of the {FAMILY_NAMES[family]} (PIP-160): stored, and every log switches at "
            "its next write",
            "transactions", result=STATUS_SCHEMA, body=SETTING_SCHEMA, body_required=True,
        )

    async def dynamic_names(_: web.Request) -> web.Response:
        return ok(sorted(DYNAMIC_KEYS))

    async def dynamic_values(_: web.Request) -> web.Response:
        return ok(await switch.stored())

    async def dynamic_update(req: web.Request) -> web.Response:
        await switch.set_key(match(req, "configName"), match(req, "configValue"))
        return no_content()

    async def dynamic_delete(req: web.Request) -> web.Response:
        await switch.delete_key(match(req, "configName"))
        return no_content()

    return [
        Route("GET", BASE, status, "Batching settings and writer counts of both transaction log families",
              "transactions", result=STATUS_SCHEMA),
        *(setter(family) for family in LogFamily),
        # before /admin/v2/brokers/{cluster}, which would take "configuration" for a cluster's name
        Route("GET", CONFIGURATION, dynamic_names, "The names of the dynamic configuration keys", "brokers",
              result={"type": "array", "items": {"type": "string"}}),
        Route("GET", CONFIGURATION + "/values", dynamic_values, "The dynamic configuration as stored", "brokers",
              result={"type": "object", "additionalProperties": {"type": "string"}}),
        Route("POST", CONFIGURATION + "/{configName}/{configValue}", dynamic_update,
              "Store a dynamic configuration value; the broker applies it at once and at every start", "brokers",
              ok=204),
        Route("DELETE", CONFIGURATION + "/{configName}", dynamic_delete,
              "Remove a stored dynamic configuration value: broker.conf's applies again", "brokers", ok=204),
    ]


__all__ = ["BASE", "batched_log_routes"]
