"""The HTTP admin API on Pulsar's ``/admin/v2/...`` paths, with its OpenAPI document at
``/admin/v2/openapi.json``. Handlers call :mod:`magnetar.broker.admin`; this package only translates HTTP.
"""

from __future__ import annotations

from aiohttp import web

from magnetar.broker.admin.broker_admin import BrokerAdmin
from magnetar.broker.admin.stats import RateTracker
from magnetar.broker.parts import Broker
from magnetar.server.http.admin.brokers import broker_routes
from magnetar.server.http.admin.bundles import bundle_routes
from magnetar.server.http.admin.deletion import deletion_routes
from magnetar.server.http.admin.nonpersistent import non_persistent_routes
from magnetar.server.http.admin.openapi import openapi_document
from magnetar.server.http.admin.permissions import permission_routes
from magnetar.server.http.admin.policies import namespace_policy_routes, topic_policy_routes
from magnetar.server.http.admin.replication import replication_routes
from magnetar.server.http.admin.schemas import schema_routes
from magnetar.server.http.admin.tenants import tenant_routes
from magnetar.server.http.admin.topics import topic_routes
from magnetar.server.http.admin.txn_batching import batched_log_routes
from magnetar.server.http.admin.txn_coordinator import coordinator_routes
from magnetar.server.http.admin.txn_topic import txn_topic_routes
from magnetar.server.http.lookup import lookup_routes
from magnetar.server.http.routes import Route, error_middleware

OPENAPI_PATH = "/admin/v2/openapi.json"

__all__ = ["OPENAPI_PATH", "add_admin_routes", "admin_routes", "error_middleware"]


def admin_routes(broker: Broker, rates: RateTracker) -> list[Route]:
    admin = BrokerAdmin(broker)
    return [*tenant_routes(admin, rates), *topic_routes(admin, rates), *batched_log_routes(broker),
            *permission_routes(admin), *coordinator_routes(broker), *schema_routes(broker.schemas),
            *txn_topic_routes(admin), *deletion_routes(broker), *lookup_routes(broker),
            *replication_routes(admin), *non_persistent_routes(broker),
            *broker_routes(admin), *namespace_policy_routes(admin), *topic_policy_routes(admin),
            *bundle_routes(admin)]


def add_admin_routes(app: web.Application, broker: Broker, rates: RateTracker) -> None:
    """Register every admin route (static paths first, so ``.../partitioned`` is not taken for a topic)."""
    routes = admin_routes(broker, rates)
    document = openapi_document(routes)

    async def openapi(_: web.Request) -> web.Response:
        return web.json_response(document)

    app.router.add_get(OPENAPI_PATH, openapi)
    for route in sorted(routes, key=lambda r: r.path.count("{")):
        app.router.add_route(route.method, route.path, route.handler)
