"""Admin routes for non-persistent topics: the namespace's loaded ones and a topic's stats (Pulsar's
``NonPersistentTopics`` paths; counters only, nothing is stored so there is no backlog or storage)."""

from __future__ import annotations

from aiohttp import web

from magnetar.broker.admin import parse_namespace, parse_topic
from magnetar.broker.errors import NotFound
from magnetar.broker.service import BrokerService
from magnetar.server.admin import openapi as s
from magnetar.server.admin.routes import Route, match, ok

BASE = "/admin/v2/non-persistent/{tenant}/{namespace}"


def non_persistent_routes(broker: BrokerService) -> list[Route]:
    async def topics(req: web.Request) -> web.Response:
        ns = parse_namespace(match(req, "tenant"), match(req, "namespace"))
        if not await broker.namespace_exists(ns):
            raise NotFound("Namespace does not exist")
        return ok(broker.non_persistent.names(ns))

    async def stats(req: web.Request) -> web.Response:
        name = parse_topic("non-persistent", match(req, "tenant"), match(req, "namespace"), match(req, "topic"))
        topic = broker.non_persistent.get(str(name))
        if topic is None:
            raise NotFound("Topic not found")
        return ok(topic.stats())

    return [
        Route("GET", BASE, topics, "The namespace's loaded non-persistent topics", "non-persistent",
              result=s.STRING_LIST),
        Route("GET", BASE + "/{topic}/stats", stats, "Stats of a non-persistent topic", "non-persistent",
              result={"type": "object"}),
    ]
