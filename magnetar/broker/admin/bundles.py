"""Namespace bundles through the admin API (Pulsar's bundle operations of ``NamespacesBase`` and
``BrokersBase``): list a namespace's bundles, unload a bundle or a whole namespace, split a bundle, and what
this broker owns.

On a cluster each operation acts where the bundle lives: an answer of :class:`Elsewhere` names the owner, and
the HTTP edge redirects (307) or forwards there, as Pulsar's ``validateNamespaceBundleOwnership`` does. A
bundle nobody owns is split by whichever broker is asked (it takes the bundle first); unloading it does
nothing. On a standalone every bundle is this broker's: an unload closes the topics in it (their clients look
them up again, and come back here), a split rewrites the boundaries.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from magnetar.broker.cluster.bundles import BundleError, BundleRange, SplitAlgorithm, split_positions, topic_hash
from magnetar.broker.cluster.keys import ClusterKeys
from magnetar.broker.cluster.owned import bundle_name
from magnetar.broker.cluster.ownership import BrokerUrls
from magnetar.broker.errors import InvalidRequest, NotFound
from magnetar.broker.names import NamespaceName, TopicName
from magnetar.broker.parts import Broker
from magnetar.metadata import api as md

log = logging.getLogger("magnetar.broker.admin")


@dataclass(frozen=True, slots=True)
class Elsewhere:
    """The operation belongs to another broker: the owner of the bundle."""

    urls: BrokerUrls


def parse_bundle(text: str) -> BundleRange:
    try:
        return BundleRange.parse(text)
    except BundleError as exc:
        raise InvalidRequest(str(exc)) from exc


def in_bundle(ns: NamespaceName, bundle: BundleRange) -> Any:
    def matches(topic: TopicName) -> bool:
        return topic.namespace_name == ns and bundle.contains(topic_hash(str(topic)))

    return matches


class BundleAdmin:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.keys = ClusterKeys(broker.metadata, broker.config.default_number_of_namespace_bundles)

    async def _namespace(self, ns: NamespaceName) -> None:
        if not await self.broker.catalog.namespace_exists(ns):
            raise NotFound("Namespace does not exist")

    async def bundles(self, ns: NamespaceName) -> dict[str, Any]:
        """Pulsar's ``BundlesData``: the boundaries and their count."""
        await self._namespace(ns)
        return (await self.broker.ownership.bundles(ns)).to_json()

    async def _existing(self, ns: NamespaceName, bundle: BundleRange) -> None:
        await self._namespace(ns)
        if not (await self.broker.ownership.bundles(ns)).has(bundle):
            raise NotFound(f"Namespace bundle {ns}/{bundle} does not exist")

    async def where(self, ns: NamespaceName, bundle: BundleRange) -> Elsewhere | None:
        """The bundle's owner when it is another broker; None when it is this one or nobody."""
        cluster = self.broker.cluster
        if cluster is None:
            return None
        owned = cluster.ownership.owned_bundle(ns, bundle)
        if owned is not None:
            return None
        try:
            owner = await cluster.ownership.keys.owner(ns, bundle)
        except md.MetadataError as exc:
            raise InvalidRequest(f"cannot read the owner of {ns}/{bundle}: {exc}") from exc
        if owner is None or owner.same_broker(cluster.ownership.me_data):
            return None
        return Elsewhere(owner.urls)

    async def unload_bundle(self, ns: NamespaceName, bundle: BundleRange, destination: str | None) -> Elsewhere | None:
        """Unload (on a cluster: transfer) one bundle; Elsewhere when another broker owns it."""
        await self._existing(ns, bundle)
        elsewhere = await self.where(ns, bundle)
        if elsewhere is not None:
            return elsewhere
        cluster = self.broker.cluster
        if cluster is None:
            await self.broker.registry.unload_where(in_bundle(ns, bundle))
            return None
        if cluster.ownership.owned_bundle(ns, bundle) is None:
            log.info("unload of %s/%s: no broker owns it", ns, bundle)
            return None
        await cluster.moves.unload(ns, bundle, destination=destination or None)
        return None

    async def unload_namespace(self, ns: NamespaceName) -> list[tuple[BundleRange, Elsewhere]]:
        """Unload every bundle of ``ns`` owned here; returns the bundles other brokers own (to forward)."""
        await self._namespace(ns)
        cluster = self.broker.cluster
        if cluster is None:
            await self.broker.registry.unload_where(lambda t: t.namespace_name == ns)
            return []
        others = []
        for bundle in (await cluster.ownership.bundles(ns, fresh=True)).ranges():
            elsewhere = await self.where(ns, bundle)
            if elsewhere is not None:
                others.append((bundle, elsewhere))
        await cluster.moves.unload_namespace(ns)
        return others

    async def split(
        self, ns: NamespaceName, bundle: BundleRange, algorithm_name: str | None, positions: Iterable[int],
        *, unload: bool,
    ) -> Elsewhere | list[BundleRange]:
        await self._existing(ns, bundle)
        try:
            algorithm = SplitAlgorithm.parse(algorithm_name)
        except BundleError as exc:
            raise InvalidRequest(str(exc)) from exc
        elsewhere = await self.where(ns, bundle)
        if elsewhere is not None:
            return elsewhere
        topics = await self.broker.catalog.list_topics(ns)
        cluster = self.broker.cluster
        if cluster is not None:
            return await cluster.moves.split(ns, bundle, algorithm, positions=positions, topics=topics, unload=unload)
        stored = await self.keys.bundles(ns)
        try:
            new = stored.bundles.split(bundle, split_positions(bundle, algorithm, positions=positions, topics=topics))
        except BundleError as exc:
            raise InvalidRequest(str(exc)) from exc
        await self.keys.put_bundles(ns, stored, new)
        if unload:
            await self.broker.registry.unload_where(in_bundle(ns, bundle))
        return new.children(bundle)

    async def owned(self) -> dict[str, dict[str, Any]]:
        """This broker's bundles, as Pulsar's ``ownedNamespaces`` names them (name -> ownership status)."""
        cluster = self.broker.cluster
        if cluster is not None:
            names = set(cluster.ownership.serving_names())
        else:  # a standalone owns what it serves: the bundles of its loaded topics
            ownership = self.broker.ownership
            names = {bundle_name(t.name.namespace_name, await ownership.bundle_of(t.name))
                     for t in self.broker.registry.topics()}
        return {name: {"broker_assignment": "shared", "is_controlled": False, "is_active": True}
                for name in sorted(names)}

    def take(self, ns: NamespaceName, bundle: BundleRange) -> None:
        """Another broker hands ``bundle`` over: take it as soon as it lets go (magnetar's transfer)."""
        cluster = self.broker.cluster
        if cluster is None:
            raise InvalidRequest("this broker is a standalone: it owns every bundle already")
        cluster.moves.take(ns, bundle)

