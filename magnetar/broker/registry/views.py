"""The loaded topics as the periodic services see them (retention and TTL, backlog quotas, offload).

Each of those services declares what it reads of "the broker" as its own protocol (``RetentionTopics``,
``PolicyBroker``, ``OffloadBroker``); :class:`TopicsHost` is the one object that has it all, built by the
composition root over the registry and the catalog. It holds no state of its own.
"""

from __future__ import annotations

from magnetar.broker.config import BrokerConfig
from magnetar.broker.names import NamespaceName, TopicName
from magnetar.broker.registry.catalog import TopicCatalog
from magnetar.broker.registry.registry import TopicRegistry
from magnetar.broker.topic.persistent import PersistentTopic
from magnetar.core.clock import Clock
from magnetar.ledger.api import ManagedLedgerFactory
from magnetar.resources import MetadataResources, Policies


class TopicsHost:
    def __init__(self, config: BrokerConfig, resources: MetadataResources, ledgers: ManagedLedgerFactory,
                 clock: Clock, registry: TopicRegistry, catalog: TopicCatalog) -> None:
        self.config = config
        self.resources = resources
        self.ledgers = ledgers
        self.clock = clock
        self._registry = registry
        self._catalog = catalog

    def loaded_topics(self) -> list[tuple[NamespaceName, PersistentTopic]]:
        """Every loaded topic with its namespace (a snapshot: iterate it across awaits)."""
        return [(t.name.namespace_name, t) for t in self._registry.topics()]

    def quota_topics(self) -> list[PersistentTopic]:
        return self._registry.topics()

    async def get_topic(self, topic: TopicName, *, create: bool) -> PersistentTopic:
        return await self._registry.get(topic, create=create)

    async def namespace_policies(self, ns: NamespaceName) -> Policies:
        return await self._catalog.namespace_policies(ns)
