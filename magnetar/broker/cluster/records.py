"""The JSON a cluster's brokers write about themselves, in Pulsar's shapes, so ``zkCli`` and Pulsar's tools
read them the same:

- :class:`OwnerData`: the value of a bundle's ownership lock (Pulsar's ``NamespaceEphemeralData``: the
  owner's ``nativeUrl``/``nativeUrlTls``/``httpUrl``/``httpUrlTls``, ``disabled`` while it unloads, and its
  ``advertisedListeners``);
- :class:`BrokerReport`: a live broker's registration with its load (a subset of Pulsar's
  ``LocalBrokerData``: its URLs, listeners, start and update times, topic/producer/consumer counts, message
  rates, CPU, and the bundles it owns);
- :class:`LeaderData`: the leader key's value (Pulsar's ``LeaderBroker``: ``brokerId`` and ``serviceUrl``).

Values only (encode, decode, validate): reading and writing the keys is ``magnetar.resources``' job.
A record a broker cannot read (another version, a hand edit) decodes to ``None`` with a warning, never an
exception: one bad record must not stop lookups for everything else.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from magnetar.broker.cluster.ownership import BrokerUrls

log = logging.getLogger("magnetar.cluster")

BUNDLES_LISTED_MAX = 100_000  # a report lists the bundles a broker owns; bounded well under a znode's 1 MiB


@dataclass(frozen=True, slots=True)
class ListenerAddress:
    """One advertised listener's binary-protocol URLs (Pulsar's ``AdvertisedListener``)."""

    pulsar: str | None = None
    pulsar_tls: str | None = None

    def to_json(self) -> dict[str, str]:
        out = {}
        if self.pulsar:
            out["brokerServiceUrl"] = self.pulsar
        if self.pulsar_tls:
            out["brokerServiceUrlTls"] = self.pulsar_tls
        return out

    @classmethod
    def from_json(cls, value: Any) -> ListenerAddress:
        if not isinstance(value, dict):
            return cls()
        return cls(_text(value, "brokerServiceUrl"), _text(value, "brokerServiceUrlTls"))


def _text(value: Mapping[str, Any], key: str) -> str | None:
    item = value.get(key)
    return item if isinstance(item, str) and item else None


def _number(value: Mapping[str, Any], key: str) -> float:
    item = value.get(key)
    return float(item) if isinstance(item, int | float) and not isinstance(item, bool) else 0.0


def _listeners_json(listeners: Mapping[str, ListenerAddress]) -> dict[str, dict[str, str]]:
    return {name: address.to_json() for name, address in sorted(listeners.items())}


def _listeners_from(value: Any) -> dict[str, ListenerAddress]:
    if not isinstance(value, dict):
        return {}
    return {name: ListenerAddress.from_json(item) for name, item in value.items() if isinstance(name, str)}


def _decode_object(raw: bytes, what: str) -> dict[str, Any] | None:
    try:
        value = json.loads(raw)
    except ValueError:
        log.warning("%s is not JSON: ignored", what)
        return None
    if not isinstance(value, dict):
        log.warning("%s is not a JSON object: ignored", what)
        return None
    return value


@dataclass(frozen=True, slots=True)
class OwnerData:
    """Who owns a bundle: the owner's URLs (Pulsar's ``NamespaceEphemeralData``)."""

    urls: BrokerUrls
    disabled: bool = False  # the owner is unloading the bundle: look it up again shortly
    listeners: Mapping[str, ListenerAddress] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"nativeUrl": self.urls.pulsar, "nativeUrlTls": self.urls.pulsar_tls, "httpUrl": self.urls.http,
                "httpUrlTls": self.urls.https, "disabled": self.disabled,
                "advertisedListeners": _listeners_json(self.listeners)}

    def encode(self) -> bytes:
        return json.dumps(self.to_json(), sort_keys=True).encode()

    @classmethod
    def decode(cls, raw: bytes, key: str) -> OwnerData | None:
        value = _decode_object(raw, f"the ownership record {key}")
        if value is None:
            return None
        urls = BrokerUrls(_text(value, "nativeUrl"), _text(value, "nativeUrlTls"), _text(value, "httpUrl"),
                          _text(value, "httpUrlTls"))
        if urls.pulsar is None and urls.pulsar_tls is None:
            log.warning("the ownership record %s names no broker URL: ignored", key)
            return None
        return cls(urls, value.get("disabled") is True, _listeners_from(value.get("advertisedListeners")))

    def same_broker(self, other: OwnerData) -> bool:
        return self.urls == other.urls


@dataclass(frozen=True, slots=True)
class Load:
    """What a broker serves and how busy it is (the figures of Pulsar's load report)."""

    topics: int = 0
    producers: int = 0
    consumers: int = 0
    msg_rate_in: float = 0.0
    msg_rate_out: float = 0.0
    throughput_in: float = 0.0
    throughput_out: float = 0.0
    cpu_percent: float = 0.0
    bundles: tuple[str, ...] = ()  # "tenant/namespace/0x..._0x..."


@dataclass(frozen=True, slots=True)
class BrokerReport:
    """A live broker's registration and load (Pulsar's ``LocalBrokerData``), keyed by its id ``host:port``."""

    broker_id: str
    urls: BrokerUrls
    listeners: Mapping[str, ListenerAddress] = field(default_factory=dict)
    version: str = ""
    start_ms: int = 0
    update_ms: int = 0
    load: Load = field(default_factory=Load)

    def to_json(self) -> dict[str, Any]:
        load = self.load
        return {
            "webServiceUrl": self.urls.http, "webServiceUrlTls": self.urls.https,
            "pulsarServiceUrl": self.urls.pulsar, "pulsarServiceUrlTls": self.urls.pulsar_tls,
            "persistentTopicsEnabled": True, "nonPersistentTopicsEnabled": True,
            "advertisedListeners": _listeners_json(self.listeners),
            "brokerVersionString": self.version, "startTimestamp": self.start_ms, "lastUpdate": self.update_ms,
            "numTopics": load.topics, "numBundles": len(load.bundles), "numProducers": load.producers,
            "numConsumers": load.consumers, "msgRateIn": load.msg_rate_in, "msgRateOut": load.msg_rate_out,
            "msgThroughputIn": load.throughput_in, "msgThroughputOut": load.throughput_out,
            "cpu": {"usage": load.cpu_percent, "limit": 100.0},
            "bundles": list(load.bundles[:BUNDLES_LISTED_MAX]),
        }

    def encode(self) -> bytes:
        return json.dumps(self.to_json(), sort_keys=True).encode()

    @classmethod
    def decode(cls, broker_id: str, raw: bytes) -> BrokerReport | None:
        value = _decode_object(raw, f"the registration of broker {broker_id}")
        if value is None:
            return None
        urls = BrokerUrls(_text(value, "pulsarServiceUrl"), _text(value, "pulsarServiceUrlTls"),
                          _text(value, "webServiceUrl"), _text(value, "webServiceUrlTls"))
        if urls.pulsar is None and urls.pulsar_tls is None:
            log.warning("the registration of broker %s names no broker URL: ignored", broker_id)
            return None
        bundles = value.get("bundles")
        cpu = value.get("cpu")
        load = Load(
            topics=int(_number(value, "numTopics")), producers=int(_number(value, "numProducers")),
            consumers=int(_number(value, "numConsumers")), msg_rate_in=_number(value, "msgRateIn"),
            msg_rate_out=_number(value, "msgRateOut"), throughput_in=_number(value, "msgThroughputIn"),
            throughput_out=_number(value, "msgThroughputOut"),
            cpu_percent=_number(cpu, "usage") if isinstance(cpu, dict) else 0.0,
            bundles=tuple(b for b in bundles[:BUNDLES_LISTED_MAX] if isinstance(b, str))
            if isinstance(bundles, list) else (),
        )
        return cls(broker_id, urls, _listeners_from(value.get("advertisedListeners")),
                   _text(value, "brokerVersionString") or "", int(_number(value, "startTimestamp")),
                   int(_number(value, "lastUpdate")), load)

    def owner_data(self) -> OwnerData:
        """The ownership record this broker writes for the bundles it owns."""
        return OwnerData(self.urls, False, self.listeners)


@dataclass(frozen=True, slots=True)
class LeaderData:
    """The leader key's value (Pulsar's ``LeaderBroker``)."""

    broker_id: str
    service_url: str

    def encode(self) -> bytes:
        return json.dumps({"brokerId": self.broker_id, "serviceUrl": self.service_url}, sort_keys=True).encode()

    @classmethod
    def decode(cls, raw: bytes) -> LeaderData | None:
        value = _decode_object(raw, "the leader record")
        if value is None:
            return None
        broker_id, url = _text(value, "brokerId"), _text(value, "serviceUrl")
        return None if broker_id is None else cls(broker_id, url or "")
