"""Admin routes for namespace bundles and the cluster's brokers (Pulsar's bundle operations of
``Namespaces`` and ``Brokers``): a namespace's bundles, unloading a bundle or a namespace, splitting a bundle,
what a broker owns, readiness; and magnetar's own ``.../{bundle}/take`` a transfer calls on its destination.

A bundle another broker owns is redirected there (307), as Pulsar does; a namespace unload reaches every
owner (this broker unloads its bundles and forwards the unload of each other bundle to its owner).
"""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
from aiohttp import web
from yarl import URL

from magnetar.broker.admin.broker_admin import BrokerAdmin, parse_namespace
from magnetar.broker.admin.bundles import BundleAdmin, Elsewhere, parse_bundle
from magnetar.broker.cluster.bundles import BundleRange, parse_boundary
from magnetar.broker.errors import InvalidRequest, NotFound, ServiceNotReady
from magnetar.broker.names import NamespaceName
from magnetar.server.http.routes import Route, flag, json_body, match, no_content, ok

V2 = "/admin/v2"
NS = V2 + "/namespaces/{tenant}/{namespace}"
BUNDLE = NS + "/{bundle}"
FORWARD_TIMEOUT_S = 60.0
_ANY: dict[str, Any] = {}


def _ns(req: web.Request) -> NamespaceName:
    return parse_namespace(match(req, "tenant"), match(req, "namespace"))


def _redirect(req: web.Request, elsewhere: Elsewhere) -> web.HTTPTemporaryRedirect:
    base = elsewhere.urls.https if req.secure and elsewhere.urls.https else elsewhere.urls.http
    if not base:
        raise ServiceNotReady("the broker owning the bundle has no web service URL")
    return web.HTTPTemporaryRedirect(str(URL(base).with_path(req.rel_url.raw_path, encoded=True)
                                         .with_query(req.query)))


async def _forward_unloads(ns: NamespaceName, others: list[tuple[BundleRange, Elsewhere]]) -> None:
    """Ask each owner to unload its bundle (a failure is the request's: it names the broker)."""
    if not others:
        return
    timeout = aiohttp.ClientTimeout(total=FORWARD_TIMEOUT_S)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        async def one(bundle: BundleRange, elsewhere: Elsewhere) -> None:
            url = f"{elsewhere.urls.http}{V2}/namespaces/{ns.tenant}/{ns.namespace}/{bundle.name}/unload"
            try:
                async with session.put(url) as response:
                    if response.status >= 300:
                        raise ServiceNotReady(f"unloading {bundle} at {elsewhere.urls.http} failed: "
                                              f"{response.status} {(await response.text())[:200]}")
            except (aiohttp.ClientError, TimeoutError) as exc:
                raise ServiceNotReady(f"unloading {bundle} at {elsewhere.urls.http} failed: {exc}") from exc

        await asyncio.gather(*(one(b, e) for b, e in others))


def bundle_routes(admin: BrokerAdmin) -> list[Route]:
    bundles = BundleAdmin(admin.broker)
    broker = admin.broker

    async def get_bundles(req: web.Request) -> web.Response:
        return ok(await bundles.bundles(_ns(req)))

    async def unload_namespace(req: web.Request) -> web.Response:
        ns = _ns(req)
        await _forward_unloads(ns, await bundles.unload_namespace(ns))
        return no_content()

    async def unload_bundle(req: web.Request) -> web.Response:
        destination = req.query.get("destinationBroker") or None
        elsewhere = await bundles.unload_bundle(_ns(req), parse_bundle(match(req, "bundle")), destination)
        if elsewhere is not None:
            raise _redirect(req, elsewhere)
        return no_content()

    async def split(req: web.Request) -> web.Response:
        body = await json_body(req, required=False)
        positions: list[int] = []
        if body is not None:
            if not isinstance(body, list) or not all(isinstance(p, int | str) for p in body):
                raise InvalidRequest("the body lists the split positions: [0x..., ...]")
            positions = [p if isinstance(p, int) else parse_boundary(p) for p in body]
        result = await bundles.split(_ns(req), parse_bundle(match(req, "bundle")),
                                     req.query.get("splitAlgorithmName"), positions, unload=flag(req, "unload"))
        if isinstance(result, Elsewhere):
            raise _redirect(req, result)
        return no_content()

    async def take(req: web.Request) -> web.Response:
        ns = _ns(req)
        if not await broker.catalog.namespace_exists(ns):
            raise NotFound("Namespace does not exist")
        bundles.take(ns, parse_bundle(match(req, "bundle")))
        return no_content()

    async def owned(req: web.Request) -> web.Response:
        cluster = broker.cluster
        asked = match(req, "broker")
        if cluster is not None and cluster.members.started and asked != cluster.members.broker_id:
            live = await cluster.members.live()
            if asked not in live:
                raise NotFound(f"broker {asked} is not an active broker")
            raise _redirect(req, Elsewhere(live[asked].urls))
        return ok(await bundles.owned())

    async def ready(req: web.Request) -> web.Response:
        cluster = broker.cluster
        if cluster is not None and not (cluster.members.started and cluster.members.registered):
            raise ServiceNotReady("the broker has not joined its cluster yet")
        return web.Response(text="ok")

    async def health(req: web.Request) -> web.Response:
        return web.Response(text="ok")

    return [
        Route("GET", NS + "/bundles", get_bundles, "The namespace's bundles", "namespaces", result=_ANY),
        Route("PUT", NS + "/unload", unload_namespace, "Unload every bundle of the namespace (on a cluster: move "
              "each to another broker)", "namespaces", ok=204),
        Route("PUT", BUNDLE + "/unload", unload_bundle, "Unload a bundle (on a cluster: move it to destinationBroker "
              "or the least-loaded other broker)", "namespaces", ok=204,
              query={"destinationBroker": {"type": "string"}}),
        Route("PUT", BUNDLE + "/split", split, "Split a bundle", "namespaces", ok=204,
              query={"unload": {"type": "boolean"}, "splitAlgorithmName": {"type": "string"}},
              body={"type": "array"}),
        Route("PUT", BUNDLE + "/take", take, "magnetar: take a bundle another broker is handing over", "namespaces",
              ok=204),
        Route("GET", V2 + "/brokers/{cluster}/{broker}/ownedNamespaces", owned, "The bundles a broker owns",
              "brokers", result=_ANY),
        Route("GET", V2 + "/brokers/ready", ready, "Whether the broker is ready (joined its cluster)", "brokers",
              result_type="text/plain"),
        Route("GET", V2 + "/brokers/health", health, "Whether the broker is up", "brokers", result_type="text/plain"),
    ]

