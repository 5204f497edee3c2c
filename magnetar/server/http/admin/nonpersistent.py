"""Admin routes for non-persistent topics: the namespace's loaded ones and a topic's stats (Pulsar's
``NonPersistentTopics`` paths; counters only, nothing is stored so there is no backlog or storage)."""

from __future__ import annotations

from aiohttp import web

from magnetar.broker.admin.broker_admin import parse_namespace, parse_topic
from magnetar.broker.errors import NotFound
from magnetar.broker.parts import Broker
from magnetar.broker.registry.catalog import PARTITIONS_MAX
from magnetar.server.http.admin import openapi as s
from magnetar.server.http.routes import Route, int_value, json_body, match, no_content, ok

BASE = "/admin/v2/non-persistent/{tenant}/{namespace}"


def non_persistent_routes(broker: Broker) -> list[Route]:
    async def topics(req: web.Request) -> web.Response:
        ns = parse_namespace(match(req, "tenant"), match(req, "namespace"))
        if not await broker.catalog.namespace_exists(ns):
            raise NotFound("Namespace does not exist")
        return ok(broker.non_persistent.names(ns))

    async def stats(req: web.Request) -> web.Response:
        name = parse_topic("non-persistent", match(req, "tenant"), match(req, "namespace"), match(req, "topic"))
        topic = broker.non_persistent.get(str(name))
        if topic is None:
            raise NotFound("Topic not found")
        return ok(topic.stats())

    async def create_partitioned(req: web.Request) -> web.Response:
        name = parse_topic("non-persistent", match(req, "tenant"), match(req, "namespace"), match(req, "topic"))
        if not await broker.catalog.namespace_exists(name.namespace_name):
            raise NotFound("Namespace does not exist")
        count = int_value(await json_body(req, required=True), "partitions", 1, PARTITIONS_MAX)
        await broker.catalog.create_partitioned_topic(name, count)
        return no_content()

    async def partitions(req: web.Request) -> web.Response:
        name = parse_topic("non-persistent", match(req, "tenant"), match(req, "namespace"), match(req, "topic"))
        return ok({"partitions": (await broker.catalog.partitioned_metadata(name)).partitions})

    return [
        Route("PUT", BASE + "/{topic}/partitions", create_partitioned, "Create a partitioned non-persistent topic",
              "non-persistent", ok=204, body={"type": "integer"}, body_required=True),
        Route("GET", BASE + "/{topic}/partitions", partitions, "Partition count of a non-persistent topic",
              "non-persistent", result={"type": "object"}),
        Route("GET", BASE, topics, "The namespace's loaded non-persistent topics", "non-persistent",
              result=s.STRING_LIST),
        Route("GET", BASE + "/{topic}/stats", stats, "Stats of a non-persistent topic", "non-persistent",
              result={"type": "object"}),
    ]
