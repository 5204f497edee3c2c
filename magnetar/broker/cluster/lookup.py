"""One lookup answer for every edge: the binary LOOKUP, the HTTP lookup and ``/admin/v2/brokers``.

An edge says how the request reached this broker (``here``: the URLs spelled as the client reached them,
so a client does not open a second connection to another spelling of the same address, facts §2.7) and
which listener the client named; :class:`Lookup` checks the namespace, asks the ownership who serves the
topic and answers Connect (this broker) or Redirect (the owner), with the listener's URLs applied the way
Pulsar applies them: a listener's plain URLs replace the broker's, its TLS URLs are the listener's only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from magnetar.broker.cluster.listeners import ListenerUrls, listener_urls
from magnetar.broker.cluster.ownership import BrokerUrls, Ownership
from magnetar.broker.errors import NotFound
from magnetar.broker.names import NamespaceName, TopicName


class Namespaces(Protocol):
    async def namespace_exists(self, ns: NamespaceName) -> bool: ...


@dataclass(frozen=True, slots=True)
class ListenerSettings:
    """``advertisedListeners`` and ``internalListenerName`` (see :mod:`magnetar.broker.cluster.listeners`)."""

    advertised_listeners: str = ""
    internal_listener_name: str = ""


@dataclass(frozen=True, slots=True)
class LookupAnswer:
    urls: BrokerUrls
    redirect: bool = False  # Redirect: look the topic up again at ``urls``; else Connect there
    authoritative: bool = False  # the answer comes from the broker that decides (the leader)

    def lookup_data(self) -> dict[str, str | None]:
        """Pulsar's ``LookupData`` JSON (the HTTP lookup)."""
        urls = self.urls
        return {"brokerUrl": urls.pulsar, "brokerUrlTls": urls.pulsar_tls, "httpUrl": urls.http,
                "httpUrlTls": urls.https, "nativeUrl": urls.pulsar}


def with_listener(urls: BrokerUrls, listener: ListenerUrls | None) -> BrokerUrls:
    if listener is None:
        return urls
    return BrokerUrls(listener.pulsar or urls.pulsar, listener.pulsar_ssl, listener.http or urls.http,
                      listener.https)


class Lookup:
    def __init__(self, ownership: Ownership, namespaces: Namespaces, listeners: ListenerSettings) -> None:
        self.ownership = ownership
        self._namespaces = namespaces
        self._listeners = listeners

    def listener(self, requested: str | None) -> ListenerUrls | None:
        """The named (or internal) listener's URLs; None without listeners; ServiceNotReady for a name this
        broker does not have (Pulsar's refusal)."""
        s = self._listeners
        return listener_urls(s.advertised_listeners, s.internal_listener_name, requested or None)

    async def answer(
        self, topic: TopicName, here: BrokerUrls, listener: str | None = None, *, authoritative: bool = False
    ) -> LookupAnswer:
        """Where a client serves ``topic``: NotFound when its namespace does not exist."""
        if not await self._namespaces.namespace_exists(topic.namespace_name):
            raise NotFound(f"Namespace {topic.namespace_name} does not exist")
        chosen = self.listener(listener)
        placement = await self.ownership.find(topic, listener or None, authoritative)
        if placement.urls is None:
            return LookupAnswer(with_listener(here, chosen), authoritative=True)  # this broker decides for itself
        return LookupAnswer(placement.urls, redirect=placement.redirect, authoritative=placement.authoritative)

    async def bundle_of(self, topic: TopicName) -> str:
        """The name of the bundle ``topic`` belongs to (``0x00000000_0x40000000``): NotFound without its
        namespace."""
        if not await self._namespaces.namespace_exists(topic.namespace_name):
            raise NotFound(f"Namespace {topic.namespace_name} does not exist")
        return (await self.ownership.bundle_of(topic)).name

    async def brokers(self, here: BrokerUrls) -> list[BrokerUrls]:
        """Every live broker of the cluster, this one first."""
        return [self.ownership.me() or here, *await self.ownership.other_brokers()]

    async def leader(self, here: BrokerUrls) -> BrokerUrls:
        return await self.ownership.leader() or self.ownership.me() or here
