"""Admin routes of the schema registry: ``/admin/v2/schemas/{tenant}/{namespace}/{topic}/...`` (latest, by
version, all versions, upload, delete, compatibility test, version of a schema) and the namespace's schema
policies (``schemaCompatibilityStrategy``, ``isAllowAutoUpdateSchema``, ``schemaValidationEnforced``).
Paths, bodies and statuses are Pulsar's (``SchemasResource``, ``Namespaces``)."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from magnetar.broker.admin.broker_admin import parse_namespace, parse_topic
from magnetar.broker.errors import IncompatibleSchema, InvalidRequest
from magnetar.broker.names import NamespaceName, TopicName
from magnetar.broker.schema import SchemaInfo, SchemaRegistry, Strategy, type_number
from magnetar.broker.schema.registry import AUTO_UPDATE_POLICY, ENFORCED_POLICY, STRATEGY_POLICY
from magnetar.server.http.routes import Route, flag, int_value, json_body, match, no_content, ok, reason

BASE = "/admin/v2/schemas/{tenant}/{namespace}/{topic}"
NS = "/admin/v2/namespaces/{tenant}/{namespace}"
_OBJECT: dict[str, Any] = {"type": "object"}
PAYLOAD: dict[str, Any] = {
    "type": "object", "required": ["type"],
    "properties": {"type": {"type": "string"}, "schema": {"type": "string"},
                   "properties": {"type": "object", "additionalProperties": {"type": "string"}}},
}


def _topic(req: web.Request) -> TopicName:
    return parse_topic("persistent", match(req, "tenant"), match(req, "namespace"), match(req, "topic"))


def _ns(req: web.Request) -> NamespaceName:
    return parse_namespace(match(req, "tenant"), match(req, "namespace"))


def payload_info(body: Any) -> SchemaInfo:
    """Pulsar's ``PostSchemaPayload``: ``{"type": "AVRO", "schema": "...", "properties": {...}}``."""
    if not isinstance(body, dict) or not isinstance(body.get("type"), str):
        raise InvalidRequest("The body must be a schema payload with a type")
    schema, properties = body.get("schema") or "", body.get("properties") or {}
    if not isinstance(schema, str) or not isinstance(properties, dict):
        raise InvalidRequest("schema must be a string and properties an object")
    return SchemaInfo(type_number(body["type"]), schema.encode(), {str(k): str(v) for k, v in properties.items()})


def schema_routes(registry: SchemaRegistry) -> list[Route]:
    async def latest(req: web.Request) -> web.Response:
        return ok((await registry.get(_topic(req))).rest())

    async def by_version(req: web.Request) -> web.Response:
        version = int_value(match(req, "version"), "version")
        return ok((await registry.get(_topic(req), version)).rest())

    async def all_versions(req: web.Request) -> web.Response:
        return ok({"getSchemaResponses": [v.rest() for v in await registry.versions(_topic(req))]})

    async def upload(req: web.Request) -> web.Response:
        info = payload_info(await json_body(req, required=True))
        try:
            version = await registry.add(_topic(req), info, auto_update_applies=False)
        except IncompatibleSchema as exc:
            return reason(409, str(exc))
        return ok({"version": {"version": version}})

    async def delete(req: web.Request) -> web.Response:
        return ok({"version": await registry.delete(_topic(req), force=flag(req, "force"))})

    async def compatibility(req: web.Request) -> web.Response:
        why, strategy = await registry.check(_topic(req), payload_info(await json_body(req, required=True)))
        return ok({"compatibility": why is None, "schemaCompatibilityStrategy": strategy.value}, status=202)

    async def version_of(req: web.Request) -> web.Response:
        info = payload_info(await json_body(req, required=True))
        for stored in await registry.versions(_topic(req)):
            if stored.info.fingerprint == info.fingerprint:
                return ok({"version": stored.version})
        return reason(404, "Not found schema")

    return [
        Route("GET", BASE + "/schema", latest, "The topic's latest schema", "schemas", result=_OBJECT),
        Route("GET", BASE + "/schema/{version}", by_version, "One version of the topic's schema", "schemas",
              result=_OBJECT),
        Route("GET", BASE + "/schemas", all_versions, "Every version of the topic's schema", "schemas",
              result=_OBJECT),
        Route("POST", BASE + "/schema", upload, "Add a schema version (checked by the namespace's strategy)",
              "schemas", result=_OBJECT, body=PAYLOAD, body_required=True),
        Route("DELETE", BASE + "/schema", delete, "Delete the topic's schema (force: drop every version)",
              "schemas", result=_OBJECT, query={"force": {"type": "boolean"}}),
        Route("POST", BASE + "/compatibility", compatibility, "Test a schema against the topic's versions",
              "schemas", ok=202, result=_OBJECT, body=PAYLOAD, body_required=True),
        Route("POST", BASE + "/version", version_of, "The version of a schema", "schemas", result=_OBJECT,
              body=PAYLOAD, body_required=True),
        *_policy_routes(registry),
    ]


def _policy_routes(registry: SchemaRegistry) -> list[Route]:
    async def get_strategy(req: web.Request) -> web.Response:
        value = (await registry.policies(_ns(req))).get(STRATEGY_POLICY)
        return ok(value if isinstance(value, str) else Strategy.UNDEFINED.value)

    async def set_strategy(req: web.Request) -> web.Response:
        body = await json_body(req, required=True)
        if not isinstance(body, str):
            raise InvalidRequest("The body must be a strategy name, e.g. \"BACKWARD\"")
        await registry.set_policy(_ns(req), STRATEGY_POLICY, Strategy.parse(body).value)
        return no_content()

    def boolean(field: str, suffix: str, method: str) -> list[Route]:
        async def get(req: web.Request) -> web.Response:
            if field == AUTO_UPDATE_POLICY:
                return ok(await registry.auto_update(_ns(req)))
            return ok(await registry.validation_enforced(_ns(req)))

        async def set_(req: web.Request) -> web.Response:
            body = await json_body(req, required=True)
            if not isinstance(body, bool):
                raise InvalidRequest(f"The body of {suffix} must be true or false")
            await registry.set_policy(_ns(req), field, body)
            return no_content()

        return [
            Route("GET", f"{NS}/{suffix}", get, f"Get the namespace's {suffix}", "namespaces",
                  result={"type": "boolean"}),
            Route(method, f"{NS}/{suffix}", set_, f"Set the namespace's {suffix}", "namespaces", ok=204,
                  body={"type": "boolean"}, body_required=True),
        ]

    return [
        Route("GET", NS + "/schemaCompatibilityStrategy", get_strategy,
              "Get the namespace's schema compatibility strategy", "namespaces", result={"type": "string"}),
        Route("PUT", NS + "/schemaCompatibilityStrategy", set_strategy,
              "Set the namespace's schema compatibility strategy", "namespaces", ok=204,
              body={"type": "string", "enum": [s.value for s in Strategy]}, body_required=True),
        *boolean(AUTO_UPDATE_POLICY, "isAllowAutoUpdateSchema", "POST"),
        *boolean(ENFORCED_POLICY, "schemaValidationEnforced", "POST"),
    ]
