"""Admin routes of geo-replication: ``/admin/v2/clusters/{cluster}`` create, update, delete (Pulsar's
``Clusters``) and a topic's replication clusters (``/admin/v2/persistent/.../{topic}/replication``).
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from magnetar.broker.admin.broker_admin import BrokerAdmin, parse_topic
from magnetar.broker.admin.clusters import ReplicationAdmin
from magnetar.broker.errors import InvalidRequest
from magnetar.broker.names import TopicName
from magnetar.server.http.admin import openapi as s
from magnetar.server.http.routes import Route, json_body, match, no_content, ok

V2 = "/admin/v2"
TOPIC = V2 + "/persistent/{tenant}/{namespace}/{topic}"


def _topic(req: web.Request) -> TopicName:
    return parse_topic("persistent", match(req, "tenant"), match(req, "namespace"), match(req, "topic"))


def _object(body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise InvalidRequest("The body must be a ClusterData JSON object")
    return body


def replication_routes(admin: BrokerAdmin) -> list[Route]:
    repl = ReplicationAdmin(admin)

    async def create_cluster(req: web.Request) -> web.Response:
        await repl.create_cluster(match(req, "cluster"), _object(await json_body(req, required=True)))
        return no_content()

    async def update_cluster(req: web.Request) -> web.Response:
        await repl.update_cluster(match(req, "cluster"), _object(await json_body(req, required=True)))
        return no_content()

    async def delete_cluster(req: web.Request) -> web.Response:
        await repl.delete_cluster(match(req, "cluster"))
        return no_content()

    async def get_topic_clusters(req: web.Request) -> web.Response:
        return ok(await repl.topic_clusters(_topic(req)))

    async def set_topic_clusters(req: web.Request) -> web.Response:
        await repl.set_topic_clusters(_topic(req), await json_body(req, required=True))
        return no_content()

    async def remove_topic_clusters(req: web.Request) -> web.Response:
        await repl.set_topic_clusters(_topic(req), None)
        return no_content()

    cluster = V2 + "/clusters/{cluster}"
    return [
        Route("PUT", cluster, create_cluster, "Create a cluster", "clusters", ok=204, body=s.CLUSTER,
              body_required=True),
        Route("POST", cluster, update_cluster, "Update a cluster", "clusters", ok=204, body=s.CLUSTER,
              body_required=True),
        Route("DELETE", cluster, delete_cluster, "Delete a cluster", "clusters", ok=204),
        Route("GET", TOPIC + "/replication", get_topic_clusters, "Get the topic's replication clusters", "topics",
              result={**s.STRING_LIST, "nullable": True}),
        Route("POST", TOPIC + "/replication", set_topic_clusters, "Set the topic's replication clusters", "topics",
              ok=204, body=s.STRING_LIST, body_required=True),
        Route("DELETE", TOPIC + "/replication", remove_topic_clusters, "Remove the topic's replication clusters",
              "topics", ok=204),
    ]
