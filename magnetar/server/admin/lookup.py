"""HTTP lookup, for clients whose service URL is ``http://``: ``GET /lookup/v2/topic/{domain}/{tenant}/
{namespace}/{topic}`` answers Pulsar's ``LookupData`` (this broker owns every topic), honouring
``advertisedListeners`` through the ``listenerName`` query parameter or the ``X-Pulsar-ListenerName`` header.
Partitioned metadata over HTTP is the topics routes' ``GET .../partitions?checkAllowAutoCreation=true``."""

from __future__ import annotations

from aiohttp import web

from magnetar.broker.admin import parse_topic
from magnetar.broker.errors import InvalidRequest, NotFound
from magnetar.broker.listeners import listener_urls
from magnetar.broker.service import BrokerService
from magnetar.server.admin.routes import Route, match, ok

#: the binary protocol's bound port, set by the process that serves both (it is known only after binding)
BROKER_PORT: web.AppKey[int] = web.AppKey("broker_port", int)
#: the TLS listeners' bound ports ("broker", "web"), filled in by the process once they are bound
TLS_PORTS: web.AppKey[dict[str, int]] = web.AppKey("tls_ports", dict)
LOOKUP_DATA = {
    "type": "object",
    "properties": {name: {"type": "string", "nullable": True}
                   for name in ("brokerUrl", "brokerUrlTls", "httpUrl", "httpUrlTls", "nativeUrl")},
}


def lookup_data(broker: BrokerService, req: web.Request) -> dict[str, str | None]:
    config = broker.config
    requested = req.query.get("listenerName") or req.headers.get("X-Pulsar-ListenerName") or None
    listener = listener_urls(config.advertised_listeners, config.internal_listener_name, requested)
    host = config.advertised_address or req.url.host or "localhost"
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    broker_port = req.app.get(BROKER_PORT, 6650)
    pulsar_url = f"pulsar://{host}:{broker_port}"
    http_url = f"http://{host}:{req.url.port}"
    tls_ports = req.app.get(TLS_PORTS, {})
    tls_url = f"pulsar+ssl://{host}:{tls_ports['broker']}" if "broker" in tls_ports else None
    https_url = f"https://{host}:{tls_ports['web']}" if "web" in tls_ports else None
    if listener is not None:
        pulsar_url, tls_url = listener.pulsar or pulsar_url, listener.pulsar_ssl
        http_url, https_url = listener.http or http_url, listener.https
    return {"brokerUrl": pulsar_url, "brokerUrlTls": tls_url, "httpUrl": http_url,
            "httpUrlTls": https_url, "nativeUrl": pulsar_url}


def lookup_routes(broker: BrokerService) -> list[Route]:
    async def lookup(req: web.Request) -> web.Response:
        domain = match(req, "domain")
        if domain not in ("persistent", "non-persistent"):
            raise InvalidRequest(f"Unknown topic domain {domain!r}")
        topic = parse_topic(domain, match(req, "tenant"), match(req, "namespace"), match(req, "topic"))
        if not await broker.catalog.namespace_exists(topic.namespace_name):
            raise NotFound(f"Namespace {topic.namespace_name} does not exist")
        return ok(lookup_data(broker, req))

    return [Route("GET", "/lookup/v2/topic/{domain}/{tenant}/{namespace}/{topic}", lookup,
                  "Which broker serves a topic (HTTP lookup)", "lookup", result=LOOKUP_DATA,
                  query={"listenerName": {"type": "string"}})]
