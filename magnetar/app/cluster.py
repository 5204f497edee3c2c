"""A broker of a cluster (``magnetar broker``): its cluster parts built once and wired to the broker's.

- The ownership (``broker/cluster/bundle_owner.py``) is the broker's Ownership port: lookups, and the check
  before a topic loads.
- A bundle that moves away or is lost closes its topics through the topic registry (``unload_where``): their
  ledgers are sealed and cursors written, their clients told where the bundle went (PIP-307).
- The load report counts the registry's topics, producers and consumers, gives the broker's message and byte
  rates in and out (over the last 10 s, as topic stats measure them) and lists the bundles owned.
- A transfer tells the destination over HTTP to take the bundle (``server/http/handoff.py``).
- Joining happens once the ports are bound (the registration carries the URLs); leaving (SIGTERM) unregisters
  first (the leader stops choosing this broker), then moves every bundle elsewhere, then closes.

Holds no rule of its own: the rules are in ``broker/cluster``.
"""

from __future__ import annotations

import logging
import os

from magnetar import __version__
from magnetar.broker.admin.bundles import in_bundle
from magnetar.broker.admin.stats import RateTracker
from magnetar.broker.cluster.bundle_owner import ClusterOwnership
from magnetar.broker.cluster.bundles import BundleRange
from magnetar.broker.cluster.members import Members
from magnetar.broker.cluster.moves import BundleMoves, Handoff
from magnetar.broker.cluster.ownership import BrokerUrls
from magnetar.broker.cluster.parts import ClusterParts
from magnetar.broker.cluster.records import BrokerReport, ListenerAddress, Load
from magnetar.broker.names import NamespaceName
from magnetar.broker.parts import Broker
from magnetar.broker.registry.registry import TopicRegistry
from magnetar.core.clock import Clock
from magnetar.metadata.coordination import CoordinationStore

log = logging.getLogger("magnetar.cluster")


def build_cluster(store: CoordinationStore, clock: Clock, *, default_bundles: int) -> ClusterParts:
    """The cluster parts, not yet wired to a broker nor joined (:func:`wire`, :func:`join`)."""
    members = Members(store, clock)
    ownership = ClusterOwnership(store, members, clock, default_bundles=default_bundles)
    return ClusterParts(members, ownership, BundleMoves(ownership))


def _load(registry: TopicRegistry, ownership: ClusterOwnership, rates: RateTracker) -> Load:
    topics = registry.topics()
    subscriptions = [s for t in topics for s in t.subscriptions.values()]
    msg_out = sum(s.msg_out_counter + sum(c.msg_out_counter for c in s.consumers) for s in subscriptions)
    bytes_out = sum(s.bytes_out_counter + sum(c.bytes_out_counter for c in s.consumers) for s in subscriptions)
    # sums over the loaded topics: a topic leaving makes them drop, and the tracker then measures afresh
    return Load(
        topics=len(topics),
        producers=sum(len(t.producers) for t in topics),
        consumers=sum(len(s.consumers) for s in subscriptions),
        msg_rate_in=rates.rate("in|msg", sum(t.msg_in_counter for t in topics)),
        msg_rate_out=rates.rate("out|msg", msg_out),
        throughput_in=rates.rate("in|bytes", sum(t.bytes_in_counter for t in topics)),
        throughput_out=rates.rate("out|bytes", bytes_out),
        cpu_percent=100.0 * os.getloadavg()[0] / (os.cpu_count() or 1) if hasattr(os, "getloadavg") else 0.0,
        bundles=ownership.serving_names(),
    )


def wire(cluster: ClusterParts, broker: Broker, handoff: Handoff | None) -> None:
    registry = broker.registry

    async def close_bundle(ns: NamespaceName, bundle: BundleRange, assigned: BrokerUrls | None) -> None:
        closed = await registry.unload_where(in_bundle(ns, bundle), assigned_url=assigned.pulsar if assigned else None)
        log.info("bundle %s/%s: %d topics closed%s", ns, bundle.name, closed,
                 f", clients sent to {assigned.pulsar}" if assigned else "")

    cluster.ownership.close_bundle = close_bundle
    rates = RateTracker(broker.clock)
    cluster.members.load = lambda: _load(registry, cluster.ownership, rates)
    cluster.moves.handoff = handoff


def advertised(host: str, broker_port: int | None, web_port: int | None, tls_ports: dict[str, int]) -> BrokerUrls:
    return BrokerUrls(
        pulsar=f"pulsar://{host}:{broker_port}" if broker_port is not None else None,
        pulsar_tls=f"pulsar+ssl://{host}:{tls_ports['broker']}" if "broker" in tls_ports else None,
        http=f"http://{host}:{web_port}" if web_port is not None else None,
        https=f"https://{host}:{tls_ports['web']}" if "web" in tls_ports else None,
    )


async def join(cluster: ClusterParts, urls: BrokerUrls, listeners: dict[str, ListenerAddress], clock: Clock) -> None:
    """Register (``host:webport`` is the broker's id, as Pulsar names it) and join the leader election."""
    broker_id = urls.web_address or (urls.pulsar or "").partition("://")[2]
    me = BrokerReport(broker_id, urls, listeners, version=f"magnetar-{__version__}", start_ms=clock.now_ms())
    await cluster.members.start(me)
    log.info("joined the cluster as %s (leader: %s)", broker_id,
             "this broker" if cluster.members.leading else "another broker")


async def leave(cluster: ClusterParts) -> None:
    """Orderly shutdown: no new bundle comes here, every bundle owned here moves to another broker."""
    if not cluster.members.started:
        return
    await cluster.members.unregister()
    await cluster.moves.unload_all()


async def close(cluster: ClusterParts) -> None:
    await cluster.ownership.close()
    await cluster.members.close()
