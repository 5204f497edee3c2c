"""The HTTP side of the broker (aiohttp, in the broker's event loop): ``/metrics``, ``/status.html`` and
the admin API (``/admin/v2/...``, :mod:`magnetar.server.http.admin`), authenticated and authorized by
:mod:`magnetar.server.auth.http` when security is on.
"""

from __future__ import annotations

from aiohttp import web
from aiohttp.typedefs import Middleware
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from magnetar.broker.admin.stats import RateTracker
from magnetar.broker.parts import Broker
from magnetar.server.auth import SecurityContext
from magnetar.server.auth.http import auth_middleware
from magnetar.server.http.admin import add_admin_routes, error_middleware
from magnetar.server.http.owner_redirect import owner_redirect_middleware
from magnetar.server.http.routes import BODY_BYTES_MAX, BODY_TIMEOUT_KEY
from magnetar.server.metrics.registry import broker_registry

REQUEST_BYTES_MAX = BODY_BYTES_MAX


def web_app(broker: Broker, security: SecurityContext | None = None) -> web.Application:
    rates = RateTracker(broker.clock)
    registry = broker_registry(broker, RateTracker(broker.clock))
    middlewares: list[Middleware] = [error_middleware]
    if security is not None and (security.authn is not None or security.authz is not None):
        middlewares.append(auth_middleware(security))  # inside error_middleware: handlers' errors still map
    middlewares.append(owner_redirect_middleware(broker))  # after authentication: a redirect tells nothing
    if security is not None and security.authn is not None:
        registry.register(security.authn.collector())

    async def metrics(_: web.Request) -> web.Response:
        body = generate_latest(registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def status(_: web.Request) -> web.Response:
        return web.Response(text="OK")

    app = web.Application(client_max_size=REQUEST_BYTES_MAX, middlewares=middlewares)
    app[BODY_TIMEOUT_KEY] = float(broker.config.http_request_timeout_seconds)
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/metrics/", metrics)
    app.router.add_get("/status.html", status)
    add_admin_routes(app, broker, rates)
    return app
