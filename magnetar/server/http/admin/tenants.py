"""Admin routes for clusters, tenants, namespaces and namespace policies, and the broker endpoints.

Paths, bodies and statuses are Pulsar's (``Clusters``, ``Tenants``, ``Namespaces``, ``BrokersBase``).
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from magnetar.broker.admin.broker_admin import BrokerAdmin, parse_namespace
from magnetar.broker.admin.stats import RateTracker, topic_stats
from magnetar.broker.errors import InvalidRequest
from magnetar.broker.names import NamespaceName, is_system_topic
from magnetar.server.http.admin import openapi as s
from magnetar.server.http.lookup import here
from magnetar.server.http.routes import Route, flag, json_body, match, no_content, ok

V2 = "/admin/v2"
TOPIC_MODES = ("PERSISTENT", "NON_PERSISTENT", "ALL")
NS = V2 + "/namespaces/{tenant}/{namespace}"

#: namespace policy sub-resources: path suffix -> (policy field, body schema)
POLICY_RESOURCES: dict[str, tuple[str, dict[str, Any]]] = {
    "retention": ("retention_policies", s.RETENTION),
    "messageTTL": ("message_ttl_in_seconds", {"type": "integer", "minimum": 0}),
    "replication": ("replication_clusters", s.STRING_LIST),
    "autoTopicCreation": ("autoTopicCreationOverride", s.AUTO_TOPIC_CREATION),
}
#: the same, set by PUT as Pulsar does for these
PUT_POLICY_RESOURCES: dict[str, tuple[str, dict[str, Any]]] = {
    "offloadThreshold": ("offload_threshold", {"type": "integer", "minimum": -1}),
    "offloadDeletionLagMs": ("offload_deletion_lag_ms", {"type": "integer", "minimum": -1}),
    "compactionThreshold": ("compaction_threshold", {"type": "integer", "minimum": 0}),
}
POLICY_DEFAULTS: dict[str, Any] = {
    "retention_policies": {"retentionTimeInMinutes": 0, "retentionSizeInMB": 0},
    "replication_clusters": [],
    "offload_threshold": -1,
}


def tenant_routes(admin: BrokerAdmin, rates: RateTracker) -> list[Route]:
    async def clusters(_: web.Request) -> web.Response:
        return ok(await admin.clusters())

    async def cluster(req: web.Request) -> web.Response:
        name = match(req, "cluster")
        data = await admin.cluster(name)
        host = req.host or "localhost"
        answer = {**data, "serviceUrl": data.get("serviceUrl") or f"http://{host}"}
        if name == admin.broker.config.cluster_name and not data.get("brokerServiceUrl"):
            # the local cluster registered without URLs (standalone): this broker's own, as clients reach it
            urls = here(admin.broker.config.advertised_address, req)
            answer["brokerServiceUrl"] = urls.pulsar
            if urls.pulsar_tls:
                answer.setdefault("brokerServiceUrlTls", urls.pulsar_tls)
        return ok(answer)

    async def tenants(_: web.Request) -> web.Response:
        return ok(await admin.tenants())

    async def tenant(req: web.Request) -> web.Response:
        return ok(await admin.tenant(match(req, "tenant")))

    async def create_tenant(req: web.Request) -> web.Response:
        body = await json_body(req, required=False)
        await admin.create_tenant(match(req, "tenant"), _object(body))
        return no_content()

    async def update_tenant(req: web.Request) -> web.Response:
        body = await json_body(req, required=False)
        await admin.update_tenant(match(req, "tenant"), _object(body))
        return no_content()

    async def delete_tenant(req: web.Request) -> web.Response:
        await admin.delete_tenant(match(req, "tenant"), force=flag(req, "force"))
        return no_content()

    async def namespaces(req: web.Request) -> web.Response:
        return ok(await admin.namespaces(match(req, "tenant")))

    async def policies(req: web.Request) -> web.Response:
        return ok(await admin.policies(_ns(req)))

    async def create_namespace(req: web.Request) -> web.Response:
        body = await json_body(req, required=False)
        await admin.create_namespace(_ns(req), _object(body) if body is not None else None)
        return no_content()

    async def delete_namespace(req: web.Request) -> web.Response:
        await admin.delete_namespace(_ns(req), force=flag(req, "force"))
        return no_content()

    async def namespace_topics(req: web.Request) -> web.Response:
        mode = req.query.get("mode", "PERSISTENT").upper()
        if mode not in TOPIC_MODES:
            raise InvalidRequest("mode must be PERSISTENT, NON_PERSISTENT or ALL")
        names = await admin.topics(_ns(req)) if mode != "NON_PERSISTENT" else []
        if mode != "PERSISTENT":
            names += admin.broker.non_persistent.names(_ns(req))
        return ok(names if flag(req, "includeSystemTopic") else [n for n in names if not is_system_topic(n)])

    async def health(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def broker_stats_topics(req: web.Request) -> web.Response:
        nested: dict[str, Any] = {}
        for topic in admin.broker.registry.topics():
            bundle = nested.setdefault(str(topic.name.namespace_name), {}).setdefault("0x00000000_0xffffffff", {})
            bundle.setdefault(topic.name.domain, {})[str(topic.name)] = topic_stats(topic, rates, owner=req.host)
        return ok(nested)

    routes = [
        Route("GET", V2 + "/clusters", clusters, "List clusters", "clusters", result=s.STRING_LIST),
        Route("GET", V2 + "/clusters/{cluster}", cluster, "Get a cluster", "clusters", result=s.CLUSTER),
        Route("GET", V2 + "/tenants", tenants, "List tenants", "tenants", result=s.STRING_LIST),
        Route("GET", V2 + "/tenants/{tenant}", tenant, "Get a tenant", "tenants", result=s.TENANT_INFO),
        Route("PUT", V2 + "/tenants/{tenant}", create_tenant, "Create a tenant", "tenants", ok=204,
              body=s.TENANT_INFO),
        Route("POST", V2 + "/tenants/{tenant}", update_tenant, "Update a tenant", "tenants", ok=204,
              body=s.TENANT_INFO),
        Route("DELETE", V2 + "/tenants/{tenant}", delete_tenant, "Delete a tenant", "tenants", ok=204,
              query={"force": {"type": "boolean"}}),
        Route("GET", V2 + "/namespaces/{tenant}", namespaces, "List namespaces", "namespaces", result=s.STRING_LIST),
        Route("GET", NS, policies, "Get a namespace's policies", "namespaces", result=s.POLICIES),
        Route("PUT", NS, create_namespace, "Create a namespace", "namespaces", ok=204, body=s.POLICIES),
        Route("DELETE", NS, delete_namespace, "Delete a namespace", "namespaces", ok=204,
              query={"force": {"type": "boolean"}}),
        Route("GET", NS + "/topics", namespace_topics, "List a namespace's topics", "namespaces",
              result=s.STRING_LIST, query={"mode": {"type": "string", "enum": [*TOPIC_MODES]},
                                           "includeSystemTopic": {"type": "boolean"}}),
        Route("GET", V2 + "/brokers/health", health, "Broker health check", "brokers", result={"type": "string"},
              result_type="text/plain"),
        Route("GET", V2 + "/broker-stats/topics", broker_stats_topics, "Stats of every loaded topic", "brokers",
              result={"type": "object"}),
    ]
    for suffix, (field, schema) in POLICY_RESOURCES.items():
        routes.extend(_policy_routes(admin, suffix, field, schema))
    for suffix, (field, schema) in PUT_POLICY_RESOURCES.items():
        routes.extend(_policy_routes(admin, suffix, field, schema, set_method="PUT"))
    return routes


def _policy_routes(
    admin: BrokerAdmin, suffix: str, field: str, schema: dict[str, Any], *, set_method: str = "POST"
) -> list[Route]:
    async def get(req: web.Request) -> web.Response:
        value = await admin.policy(_ns(req), field)
        return ok(value if value not in (None, []) else effective_default(admin, field))

    async def set_(req: web.Request) -> web.Response:
        await admin.set_policy(_ns(req), field, await json_body(req, required=True))
        return no_content()

    async def remove(req: web.Request) -> web.Response:
        await admin.set_policy(_ns(req), field, None)
        return no_content()

    path = f"{NS}/{suffix}"
    return [
        Route("GET", path, get, f"Get the namespace's {suffix} policy", "namespaces",
              result={**schema, "nullable": True}),
        Route(set_method, path, set_, f"Set the namespace's {suffix} policy", "namespaces", ok=204, body=schema,
              body_required=True),
        Route("DELETE", path, remove, f"Remove the namespace's {suffix} policy", "namespaces", ok=204),
    ]


def effective_default(admin: BrokerAdmin, field: str) -> Any:
    """What applies when a namespace sets nothing: the broker's defaults (as ``get-retention`` and
    ``get-clusters`` show them), not an empty value."""
    config = admin.broker.config
    if field == "retention_policies":
        return {"retentionTimeInMinutes": config.default_retention_time_minutes,
                "retentionSizeInMB": config.default_retention_size_mb}
    if field == "replication_clusters":
        return [config.cluster_name]
    return POLICY_DEFAULTS.get(field)


def _ns(req: web.Request) -> NamespaceName:
    return parse_namespace(match(req, "tenant"), match(req, "namespace"))


def _object(body: Any) -> dict[str, Any]:
    if body is None:
        return {}
    if not isinstance(body, dict):
        raise InvalidRequest("The body must be a JSON object")
    return body
