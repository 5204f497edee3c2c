"""Admin routes about the broker itself (Pulsar's ``BrokersBase`` and ``BrokerStatsBase``): the cluster's
active brokers and its leader (as :mod:`magnetar.broker.cluster.lookup` knows them: a standalone process is
the whole cluster and its own leader), and this broker's load and metrics reports."""

from __future__ import annotations

import os
from typing import Any

from aiohttp import web

from magnetar import __version__
from magnetar.broker.admin.broker_admin import BrokerAdmin
from magnetar.broker.errors import NotFound
from magnetar.server.http.lookup import here
from magnetar.server.http.routes import Route, match, ok

V2 = "/admin/v2"
_ANY: dict[str, Any] = {}


def broker_routes(admin: BrokerAdmin) -> list[Route]:
    broker = admin.broker

    def _self(req: web.Request) -> str:
        return here(broker.config.advertised_address, req).web_address

    async def active(req: web.Request) -> web.Response:
        if match(req, "cluster") not in await admin.clusters():
            raise NotFound("Cluster does not exist")
        return ok([b.web_address for b in await broker.lookup.brokers(here(broker.config.advertised_address, req))])

    async def leader(req: web.Request) -> web.Response:
        chosen = await broker.lookup.leader(here(broker.config.advertised_address, req))
        return ok({"brokerId": chosen.web_address, "serviceUrl": f"http://{chosen.web_address}"})

    async def load_report(req: web.Request) -> web.Response:
        topics = broker.registry.topics()
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
        return ok({
            "name": _self(req), "brokerVersionString": "magnetar", "webServiceUrl": f"http://{_self(req)}",
            "numTopics": len(topics) + len(broker.non_persistent.topics),
            "numProducers": sum(len(t.producers) for t in topics),
            "numConsumers": sum(len(s.consumers) for t in topics for s in t.subscriptions.values()),
            "msgRateIn": 0.0, "msgRateOut": 0.0, "systemLoadAverage": load,
            "timestamp": broker.clock.now_ms(),
        })

    async def metrics(req: web.Request) -> web.Response:
        """Pulsar's broker-stats/metrics shape: a list of {dimensions, metrics} per namespace."""
        by_ns: dict[str, dict[str, float]] = {}
        for topic in broker.registry.topics():
            m = by_ns.setdefault(str(topic.name.namespace_name), {"brk_in_tp_count": 0, "brk_msg_in_counter": 0})
            m["brk_in_tp_count"] += 1
            m["brk_msg_in_counter"] += topic.msg_in_counter
        return ok([{"dimensions": {"broker": _self(req), "namespace": ns}, "metrics": values}
                   for ns, values in sorted(by_ns.items())])

    async def version(req: web.Request) -> web.Response:
        return web.Response(text=__version__, content_type="text/plain")

    return [
        # before /brokers/{cluster}: "version" is not a cluster name
        Route("GET", V2 + "/brokers/version", version, "This broker's version", "brokers", result=None,
              result_type="text/plain"),
        Route("GET", V2 + "/brokers/leaderBroker", leader, "The leader broker", "brokers", result=_ANY),
        Route("GET", V2 + "/brokers/{cluster}", active, "The cluster's active brokers", "brokers",
              result={"type": "array", "items": {"type": "string"}}),
        Route("GET", V2 + "/broker-stats/load-report", load_report, "This broker's load report", "brokers",
              result=_ANY),
        Route("GET", V2 + "/broker-stats/metrics", metrics, "Broker metrics per namespace", "brokers",
              result={"type": "array"}),
    ]
