"""Admin requests about one topic go to the broker that owns it: a broker that does not answers 307 with the
same path and query on the owner's web service (Pulsar's ``validateTopicOwnership``). Requests about a topic's
metadata only (its partitions, listing a namespace) and about a partitioned topic as a whole are answered by
any broker. A standalone owns everything: nothing is redirected."""

from __future__ import annotations

from aiohttp import web
from yarl import URL

from magnetar.broker.admin.broker_admin import parse_topic
from magnetar.broker.errors import PreconditionFailed
from magnetar.broker.parts import Broker
from magnetar.server.http.routes import Handler, flag

TOPIC_PREFIX = "/admin/v2/persistent/{tenant}/{namespace}/{topic}"
#: topic routes any broker answers (metadata in the shared store); the rest act on the loaded topic
ANY_BROKER_SUFFIXES = ("/partitions",)


def owner_redirect_middleware(broker: Broker) -> web.middleware:  # type: ignore[valid-type]
    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        if broker.cluster is None:
            return await handler(request)
        resource = request.match_info.route.resource
        path = resource.canonical if resource is not None else ""
        if not path.startswith(TOPIC_PREFIX) or path[len(TOPIC_PREFIX):] in ANY_BROKER_SUFFIXES:
            return await handler(request)
        info = request.match_info
        topic = parse_topic("persistent", info["tenant"], info["namespace"], info["topic"])
        if await broker.catalog.partition_count(topic) > 0:
            return await handler(request)  # a partitioned topic as a whole: its partitions live anywhere
        placement = await broker.ownership.find(topic, None, flag(request, "authoritative"))
        if placement.here or placement.urls is None:
            return await handler(request)
        base = placement.urls.https if request.secure and placement.urls.https else placement.urls.http
        if not base:
            raise PreconditionFailed(f"the broker serving {topic} has no web service URL")
        query = dict(request.query)
        if placement.redirect:
            query["authoritative"] = "true" if placement.authoritative else "false"
        target = URL(base).with_path(request.rel_url.raw_path, encoded=True).with_query(query)
        raise web.HTTPTemporaryRedirect(str(target))

    return middleware
