"""HTTP lookup, for clients whose service URL is ``http://``: ``GET /lookup/v2/topic/{domain}/{tenant}/
{namespace}/{topic}`` answers Pulsar's ``LookupData`` from :mod:`magnetar.broker.cluster.lookup` (the answer
the binary LOOKUP gives), honouring ``advertisedListeners`` through the ``listenerName`` query parameter or
the ``X-Pulsar-ListenerName`` header. Partitioned metadata over HTTP is the topics routes'
``GET .../partitions?checkAllowAutoCreation=true``. :func:`here` is this broker's URLs as an HTTP request
reached it (``/admin/v2/brokers`` names the broker by them too)."""

from __future__ import annotations

from aiohttp import web
from yarl import URL

from magnetar.broker.admin.broker_admin import parse_topic
from magnetar.broker.cluster.ownership import BrokerUrls
from magnetar.broker.errors import InvalidRequest, PreconditionFailed
from magnetar.broker.parts import Broker
from magnetar.server.http.routes import Route, flag, match, ok

#: the binary protocol's bound port, set by the process that serves both (it is known only after binding)
BROKER_PORT: web.AppKey[int] = web.AppKey("broker_port", int)
#: the TLS listeners' bound ports ("broker", "web"), filled in by the process once they are bound
TLS_PORTS: web.AppKey[dict[str, int]] = web.AppKey("tls_ports", dict)
LOOKUP_DATA = {
    "type": "object",
    "properties": {name: {"type": "string", "nullable": True}
                   for name in ("brokerUrl", "brokerUrlTls", "httpUrl", "httpUrlTls", "nativeUrl")},
}


def here(advertised_address: str | None, req: web.Request) -> BrokerUrls:
    """This broker's URLs as ``req`` reached it (its advertised address when set)."""
    host = advertised_address or req.url.host or "localhost"
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    tls_ports = req.app.get(TLS_PORTS, {})
    return BrokerUrls(
        pulsar=f"pulsar://{host}:{req.app.get(BROKER_PORT, 6650)}",
        pulsar_tls=f"pulsar+ssl://{host}:{tls_ports['broker']}" if "broker" in tls_ports else None,
        http=f"http://{host}:{req.url.port}",
        https=f"https://{host}:{tls_ports['web']}" if "web" in tls_ports else None,
    )


def lookup_routes(broker: Broker) -> list[Route]:
    async def lookup(req: web.Request) -> web.Response:
        domain = match(req, "domain")
        if domain not in ("persistent", "non-persistent"):
            raise InvalidRequest(f"Unknown topic domain {domain!r}")
        topic = parse_topic(domain, match(req, "tenant"), match(req, "namespace"), match(req, "topic"))
        listener = req.query.get("listenerName") or req.headers.get("X-Pulsar-ListenerName") or None
        answer = await broker.lookup.answer(topic, here(broker.config.advertised_address, req), listener,
                                            authoritative=flag(req, "authoritative"))
        if answer.redirect:  # ask the leader, or the broker it chose (Pulsar's 307 with ?authoritative=)
            base = answer.urls.https if req.secure and answer.urls.https else answer.urls.http
            if not base:
                raise PreconditionFailed("The broker to redirect to has no web service URL")
            query = {"authoritative": "true" if answer.authoritative else "false"}
            if listener:
                query["listenerName"] = listener
            raise web.HTTPTemporaryRedirect(str(URL(base).with_path(req.path).with_query(query)))
        return ok(answer.lookup_data())

    async def bundle(req: web.Request) -> web.Response:
        """The bundle a topic belongs to (``pulsar-admin topics bundle-range``), from any broker."""
        topic = parse_topic(match(req, "domain"), match(req, "tenant"), match(req, "namespace"), match(req, "topic"))
        return web.Response(text=await broker.lookup.bundle_of(topic))

    return [Route("GET", "/lookup/v2/topic/{domain}/{tenant}/{namespace}/{topic}", lookup,
                  "Which broker serves a topic (HTTP lookup)", "lookup", result=LOOKUP_DATA,
                  query={"listenerName": {"type": "string"}, "authoritative": {"type": "boolean"}}),
            Route("GET", "/lookup/v2/topic/{domain}/{tenant}/{namespace}/{topic}/bundle", bundle,
                  "The namespace bundle a topic belongs to", "lookup", result_type="text/plain")]
