"""Which broker owns a topic: the port every lookup and the topic registry ask.

A topic is served by exactly one broker of the cluster at a time (Pulsar owns per namespace bundle; the
cluster issues bring bundles, ZooKeeper locks and a leader behind this same port). Two questions:

- :meth:`Ownership.owner`: who serves the topic, as the URLs a client is sent to (None: this broker);
- :meth:`Ownership.check_owned`: may this broker serve it now (raises the retriable "look it up again"
  ServiceNotReady when it may not, before a topic is loaded for a producer, a consumer or the admin).

:class:`LocalOwnership` is the standalone's: one broker owns every topic and is its cluster's only broker
and leader. Safety never rests on this answer alone: a ledger is fenced in its store (``specs/cluster.md``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from magnetar.broker.names import TopicName


@dataclass(frozen=True, slots=True)
class BrokerUrls:
    """How clients reach one broker (Pulsar's ``brokerServiceUrl[Tls]`` and ``webServiceUrl[Tls]``)."""

    pulsar: str | None = None
    pulsar_tls: str | None = None
    http: str | None = None
    https: str | None = None

    @property
    def web_address(self) -> str:
        """``host:port`` of its web service, as Pulsar names a broker in ``/admin/v2/brokers``."""
        url = self.http or self.https or ""
        return url.partition("://")[2]


class Ownership(Protocol):
    async def owner(self, topic: TopicName, listener: str | None) -> BrokerUrls | None:
        """The broker that serves ``topic``, its URLs for the named listener: None when it is this one."""
        ...

    async def check_owned(self, topic: TopicName) -> None:
        """Raise ``ServiceNotReady`` ("look it up again") unless this broker may serve ``topic`` now."""
        ...

    async def other_brokers(self) -> list[BrokerUrls]:
        """The cluster's other live brokers."""
        ...

    async def leader(self) -> BrokerUrls | None:
        """The cluster's leader broker: None when it is this one."""
        ...


class LocalOwnership:
    """One broker owns every topic: it is the whole cluster and its leader."""

    async def owner(self, topic: TopicName, listener: str | None) -> BrokerUrls | None:
        return None

    async def check_owned(self, topic: TopicName) -> None:
        return None

    async def other_brokers(self) -> list[BrokerUrls]:
        return []

    async def leader(self) -> BrokerUrls | None:
        return None
