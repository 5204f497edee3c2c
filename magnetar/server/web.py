"""The HTTP side of the broker (aiohttp, in the broker's event loop): ``/metrics`` and ``/status.html``.

The admin API (``/admin/v2/...``) joins this application in its own module.
"""

from __future__ import annotations

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from magnetar.broker.service import BrokerService
from magnetar.server.metrics import broker_registry


def web_app(broker: BrokerService) -> web.Application:
    registry = broker_registry(broker)

    async def metrics(_: web.Request) -> web.Response:
        body = generate_latest(registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def status(_: web.Request) -> web.Response:
        return web.Response(text="OK")

    app = web.Application(client_max_size=1024 * 1024)
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/metrics/", metrics)
    app.router.add_get("/status.html", status)
    return app
