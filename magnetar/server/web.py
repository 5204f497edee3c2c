"""The HTTP side of the broker (aiohttp, in the broker's event loop): ``/metrics``, ``/status.html`` and
the admin API (``/admin/v2/...``, :mod:`magnetar.server.admin`).
"""

from __future__ import annotations

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from magnetar.broker.service import BrokerService
from magnetar.broker.stats import RateTracker
from magnetar.server.admin import add_admin_routes, error_middleware
from magnetar.server.metrics import broker_registry

REQUEST_BYTES_MAX = 1024 * 1024


def web_app(broker: BrokerService) -> web.Application:
    rates = RateTracker(broker.clock)
    registry = broker_registry(broker, RateTracker(broker.clock))

    async def metrics(_: web.Request) -> web.Response:
        body = generate_latest(registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def status(_: web.Request) -> web.Response:
        return web.Response(text="OK")

    app = web.Application(client_max_size=REQUEST_BYTES_MAX, middlewares=[error_middleware])
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/metrics/", metrics)
    app.router.add_get("/status.html", status)
    add_admin_routes(app, broker, rates)
    return app
