"""Which broker owns a topic: the port every lookup and the topic registry ask.

A topic is served by one broker of the cluster at a time, the owner of its namespace bundle. Two questions:

- :meth:`Ownership.find`: where a client serves the topic (:class:`Placement`): this broker, the owner, or
  (while nobody owns its bundle) a broker to ask again, the way Pulsar's lookup answers: Connect to the owner
  from any broker; Redirect to the leader, or from the leader (``authoritative``) to the broker it chose;
  an ``authoritative`` lookup makes the broker it reaches take the bundle;
- :meth:`Ownership.check_owned`: may this broker serve it now (raises the retriable "look it up again"
  ServiceNotReady when it may not, before a topic is loaded for a producer, a consumer or the admin).

:class:`LocalOwnership` is the standalone's: one broker owns every topic and is its cluster's only broker
and leader. :mod:`magnetar.broker.cluster.bundle_owner` is a cluster's: bundles locked in the metadata store,
assigned by the leader. Safety never rests on either answer alone: a ledger is fenced in its store
(``specs/cluster.md``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from magnetar.broker.cluster.bundles import BundleRange, Bundles
from magnetar.broker.names import NamespaceName, TopicName

#: a namespace's bundles as the metadata store holds them (the default cut when it holds none)
BundlesOf = Callable[[NamespaceName], Awaitable[Bundles]]


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


@dataclass(frozen=True, slots=True)
class Placement:
    """Where a client goes for a topic. ``urls`` None: this broker, as the client reached it (a standalone);
    ``redirect``: ask again at ``urls`` (with ``authoritative``: that broker is to take the bundle)."""

    urls: BrokerUrls | None = None
    here: bool = True
    redirect: bool = False
    authoritative: bool = True


HERE = Placement()


class Ownership(Protocol):
    async def find(self, topic: TopicName, listener: str | None, authoritative: bool) -> Placement:
        """Where ``topic`` is served, with URLs for the named listener (``authoritative``: the asker was sent
        here by the leader to take the topic's bundle)."""
        ...

    async def check_owned(self, topic: TopicName) -> None:
        """Raise ``ServiceNotReady`` ("look it up again") unless this broker may serve ``topic`` now."""
        ...

    async def bundles(self, ns: NamespaceName) -> Bundles:
        """The namespace's bundles."""
        ...

    async def bundle_of(self, topic: TopicName) -> BundleRange:
        """The bundle ``topic`` belongs to."""
        ...

    def me(self) -> BrokerUrls | None:
        """This broker's advertised URLs (None: as each client reached it, a standalone)."""
        ...

    async def other_brokers(self) -> list[BrokerUrls]:
        """The cluster's other live brokers."""
        ...

    async def leader(self) -> BrokerUrls | None:
        """The cluster's leader broker: None when it is this one."""
        ...


class LocalOwnership:
    """One broker owns every topic: it is the whole cluster and its leader. Its namespaces still have bundles
    (``bundles_of``; the default cut without it), as a Pulsar standalone's do."""

    def __init__(self, bundles_of: BundlesOf | None = None) -> None:
        self._bundles_of = bundles_of

    async def find(self, topic: TopicName, listener: str | None, authoritative: bool) -> Placement:
        return HERE

    async def check_owned(self, topic: TopicName) -> None:
        return None

    async def bundles(self, ns: NamespaceName) -> Bundles:
        return await self._bundles_of(ns) if self._bundles_of is not None else Bundles.default()

    async def bundle_of(self, topic: TopicName) -> BundleRange:
        return (await self.bundles(topic.namespace_name)).find(str(topic))

    def me(self) -> BrokerUrls | None:
        return None

    async def other_brokers(self) -> list[BrokerUrls]:
        return []

    async def leader(self) -> BrokerUrls | None:
        return None
